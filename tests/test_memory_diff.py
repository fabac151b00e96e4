"""``graphmem diff BASE..HEAD`` on a real repository with committed project memory: what the
range added, what its code changes made stale, moved or gone, what it retired; as JSON and as a
pull-request comment, run as a user runs it (the CLI in a subprocess)."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import run_cli
from graphmem import Memory
from test_code_freshness import commit, git

PAY = "def refund(order):\n    return order.total\n\ndef charge(x):\n    return x\n\ndef ship(x):\n    return x\n"
REFUND = "`refund` in src/pay.py returns the total without the fee"
CHARGE = "`charge` in src/pay.py never retries"
SHIP = "`ship` in src/pay.py is synchronous"
KEPT = "`refund` callers pass an order, never a cart"


def project(tmp_path: Path) -> Path:
    root = tmp_path / "proj"
    (root / "src").mkdir(parents=True)
    (root / "src" / "pay.py").write_text(PAY)
    (root / "src" / "cart.py").write_text("def total(cart):\n    return 0\n")
    git(root, "init", "-q")
    git(root, "config", "user.email", "t@example.invalid")
    git(root, "config", "user.name", "t")
    commit(root, "start")
    with Memory(None, root) as mem:
        for text in (REFUND, CHARGE, SHIP):
            mem.append_gotcha(text)
    commit(root, "memory")
    return root


def branch(root: Path) -> dict[str, str]:
    """A commit that edits `refund`, deletes `charge`, moves `ship`, learns one gotcha and
    retires CHARGE -> ids by text."""
    with Memory(None, root) as mem:
        mem.append_gotcha("Carts total in src/cart.py")
        ids = {h.text: h.id for h in mem.search("src/pay.py refund charge ship carts", limit=10)}
        mem.retire(ids[CHARGE], "charging moved to the gateway")
    (root / "src" / "pay.py").write_text("def refund(order):\n    return order.total - order.fee\n")
    (root / "src" / "ship").mkdir()
    (root / "src" / "ship" / "core.py").write_text("def ship(x):\n    return x\n")
    commit(root, "change")
    return ids


def test_diff_names_added_stale_moved_and_retired_memories(tmp_path):
    root = project(tmp_path)
    ids = branch(root)
    out = run_cli("diff", "HEAD~1..HEAD", "--project-dir", str(root), "--json")
    assert out.returncode == 0, out.stderr
    rep = json.loads(out.stdout)
    assert [r["text"] for r in rep["added"]] == ["Carts total in src/cart.py"]
    assert [r["id"] for r in rep["stale"]] == [ids[REFUND]]
    assert rep["stale"][0]["changed"] == ["src/pay.py"]
    assert [(r["id"], r["moved"]) for r in rep["moved"]] == [(ids[SHIP],
                                                               {"src/pay.py": "src/ship/core.py"})]
    assert rep["gone"] == []  # CHARGE's code is gone, but the range retired it: history, not stale
    assert [(r["id"], r["reason"]) for r in rep["retired"]] == [
        (ids[CHARGE], "charging moved to the gateway")]
    md = run_cli("diff", "HEAD~1..HEAD", "--project-dir", str(root), "--markdown")
    assert md.returncode == 0, md.stderr
    assert "**Made stale (their code changed): 1**" in md.stdout
    assert "- `ship` in src/pay.py is synchronous (src/pay.py → src/ship/core.py)" in md.stdout
    assert "charging moved to the gateway" in md.stdout


def test_diff_of_a_range_that_changed_nothing_says_so(tmp_path):
    root = project(tmp_path)
    (root / "README").write_text("hello\n")
    commit(root, "docs")
    out = run_cli("diff", "--project-dir", str(root), "--markdown")
    assert out.returncode == 0, out.stderr
    assert "_No memory was added, made stale, moved, gone, superseded or retired._" in out.stdout
    three = run_cli("diff", "HEAD~2...HEAD", "--project-dir", str(root), "--json")
    assert len(json.loads(three.stdout)["added"]) == 3  # the memory commit is in the range


def test_diff_refuses_a_range_that_is_not_commits(tmp_path):
    root = project(tmp_path)
    for bad in ("nosuchbranch..HEAD", "HEAD..--output=/tmp/x", "HEAD~99..HEAD"):
        out = run_cli("diff", bad, "--project-dir", str(root))
        assert out.returncode != 0
        assert "graphmem: error:" in out.stderr and "range" in out.stderr, out.stderr


def test_readme_workflow_is_valid_yaml_running_a_real_diff_command():
    """The README's GitHub Actions job parses, and its `graphmem diff` line is one the parser
    takes (the range in quotes, --markdown)."""
    import re
    import shlex

    import yaml

    from graphmem.cli.app import build_parser

    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
    job = yaml.safe_load(re.search(r"```yaml\n(.*?)```", readme, re.S).group(1))
    runs = [s["run"] for s in job["jobs"]["diff"]["steps"] if "run" in s]
    line = next(r for r in runs if r.startswith("graphmem diff"))
    argv = shlex.split(line.split(">")[0].replace("${{ github.base_ref }}", "main"))[1:]
    args = build_parser(argv).parse_args(argv)
    assert args.range == "origin/main...HEAD" and args.markdown
    assert any("gh pr comment" in r and "memory.md" in r for r in runs)
