"""``about`` as a demanding user asks it: a function moved to another file is found by the file
it lives in now (the hit already says "moved" there), from the files, the CLI and the graph;
``anchors refresh`` tells a repository with no commit from a folder outside git."""

from __future__ import annotations

import json

from conftest import run_cli
from graphmem import Memory
from test_code_about import shape
from test_code_freshness import commit, project

PAY = "def refund(order):\n    return order.total\n\n\ndef charge(n):\n    return n\n"
REFUND = "`refund` must run after the ledger write"
CHARGE = "`charge` rounds to cents"


def move_refund(tmp_path):
    """refund moves from src/pay.py (which stays) to src/refunds.py."""
    root, spec = project(tmp_path, {"src/pay.py": PAY})
    with Memory(spec, root) as mem:
        mem.append_gotcha(REFUND)
        mem.append_gotcha(CHARGE)
        ids = {h.text: h.id for h in mem.search("refund charge ledger cents", limit=5)}
    (root / "src" / "pay.py").write_text("def charge(n):\n    return n\n")
    (root / "src" / "refunds.py").write_text("def refund(order):\n    return order.total\n")
    commit(root, "move refund to its own module")
    return root, spec, ids


def test_about_the_file_a_function_moved_to_finds_the_memories_of_that_function(tmp_path):
    root, spec, ids = move_refund(tmp_path)
    with Memory(spec, root) as mem:
        hit = next(h for h in mem.search("refund ledger", limit=5) if h.id == ids[REFUND])
        there = mem.about("src/refunds.py")
        before = mem.about("src/pay.py")
    assert hit.metadata["freshness"]["moved"] == {"src/pay.py": "src/refunds.py"}
    assert [e["id"] for e in there["current"]] == [ids[REFUND]]
    assert there["current"][0]["freshness"]["state"] == "moved"
    assert {e["id"] for e in before["current"]} == {ids[REFUND], ids[CHARGE]}  # the old name too
    cli = run_cli("about", "src/refunds.py", "--project-dir", str(root), "--json")
    assert cli.returncode == 0, cli.stderr
    assert [e["id"] for e in json.loads(cli.stdout)["current"]] == [ids[REFUND]]


def test_the_graph_answers_about_a_moved_function_like_the_files(tmp_path, graph_on, monkeypatch):
    root, spec, ids = move_refund(tmp_path)
    with Memory(None, root) as mem:
        from_graph = mem.about("src/refunds.py")
    monkeypatch.setenv("GRAPHMEM_GRAPH", "off")
    with Memory(None, root) as mem:
        from_files = mem.about("src/refunds.py")
    assert (from_graph["source"], from_files["source"]) == ("graph", "files")
    assert shape(from_graph) == shape(from_files)
    assert [e["id"] for e in from_graph["current"]] == [ids[REFUND]]


def test_anchors_refresh_in_a_repository_with_no_commit_does_not_call_it_a_non_git_tree(tmp_path):
    from test_code_freshness import git

    root = tmp_path / "fresh"
    (root / "src").mkdir(parents=True)
    (root / "src" / "pay.py").write_text(PAY)
    git(root, "init", "-q")
    git(root, "add", "src/pay.py")  # staged, never committed
    out = run_cli("anchors", "refresh", "--project-dir", str(root))
    assert out.returncode == 0, out.stderr
    assert "no commit yet" in out.stdout and "non-git" not in out.stdout
    js = run_cli("anchors", "refresh", "--project-dir", str(root), "--json")
    assert json.loads(js.stdout)["git"] is True and json.loads(js.stdout)["head"] is None
