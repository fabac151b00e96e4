"""Code memory as a demanding user asks for it: ``about`` finds a function by the file it moved to
(the hit already says "moved" there), from the files, the CLI and the graph; ``context(files=)``
pins by a file's new name and takes the absolute paths agents' tools give, as ``about`` does (a
symlinked file stays itself); ``anchors refresh`` tells a repository with no commit from a folder
outside git; a CLI whose reader left prints no traceback."""

from __future__ import annotations

import json
import subprocess
import sys

import anyio
from mcp import Client

from conftest import run_cli
from graphmem import Memory
from graphmem.serve.mcp_server import build_server
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


OTHERS = [f"deploys of region {n} need the release checklist step {n}" for n in range(30)]


def test_context_files_pins_memories_by_the_new_name_and_takes_absolute_paths(tmp_path):
    root, spec, ids = move_refund(tmp_path)
    with Memory(spec, root) as mem:
        for text in OTHERS:
            mem.append_gotcha(text)
        plain = mem.context("prepare the release checklist", max_tokens=300)
        by_new = mem.context("prepare the release checklist", max_tokens=300, files=["src/refunds.py"])
        by_abs = mem.context("prepare the release checklist", max_tokens=300,
                             files=[str(root / "src" / "refunds.py")])
    assert REFUND not in plain  # only the file it lives in now pulls it
    line = next(x for x in by_new.splitlines() if REFUND in x)
    assert "`refund` moved from src/pay.py to src/refunds.py" in line  # pay.py is still there
    assert "src/pay.py is now" not in by_new
    assert by_new == by_abs
    cli = run_cli("context", "prepare the release checklist", "--max-tokens", "300", "--spec-dir", str(spec),
                  "--file", str(root / "src" / "refunds.py"))
    assert cli.returncode == 0, cli.stderr
    assert line in cli.stdout
    bad = run_cli("context", "checklist", "--spec-dir", str(spec), "--file", "/etc/passwd")
    assert bad.returncode == 2 and "files[0]: /etc/passwd is outside the project" in bad.stderr

    async def main():
        async with Client(build_server(spec, root)) as c:
            res = await c.call_tool("get_context", {"task": "prepare the release checklist", "max_tokens": 300,
                                                    "files": [str(root / "src" / "refunds.py")]})
            assert not res.is_error, res.content
            return res.content[0].text
    assert REFUND in anyio.run(main)


def test_about_an_absolute_path_of_a_symlinked_file_is_about_the_link(tmp_path):
    root, spec = project(tmp_path, {"src/pay.py": PAY})
    (root / "pay_link.py").symlink_to("src/pay.py")
    commit(root, "a link")
    with Memory(spec, root) as mem:
        mem.append_gotcha("pay_link.py is kept for old imports")
        mem.append_gotcha(CHARGE)
        link = mem.about(str(root / "pay_link.py"))
        real = mem.about(str(root / "src" / "pay.py"))
    assert link["target"] == "pay_link.py"
    assert [e["text"] for e in link["current"]] == ["pay_link.py is kept for old imports"]
    assert real["target"] == "src/pay.py" and [e["text"] for e in real["current"]] == [CHARGE]


def test_a_cli_whose_reader_left_prints_no_traceback(tmp_path):
    root, spec = project(tmp_path, {"src/pay.py": PAY})
    with Memory(spec, root) as mem:
        mem.append_gotcha(CHARGE)
    proc = subprocess.Popen([sys.executable, "-m", "graphmem.cli", "about", "charge",
                             "--project-dir", str(root)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    proc.stdout.close()  # like `| head -0`: gone before the first line is written
    err = proc.stderr.read().decode()
    assert proc.wait() == 141 and "Traceback" not in err, err


def test_about_refuses_a_relative_path_out_of_the_project_and_mcp_takes_what_the_api_takes(
        tmp_path):
    import pytest

    from graphmem.errors import ValidationError

    root, spec = project(tmp_path, {"src/pay.py": PAY})
    with Memory(spec, root) as mem:
        mem.append_gotcha(CHARGE)
        for bad in ("../x.py", "src/../../x.py"):
            with pytest.raises(ValidationError) as err:
                mem.about(bad)
            assert err.value.field == "path_or_symbol" and "outside the project" in str(err.value)
        assert [e["text"] for e in mem.about("src\\pay.py")["current"]] == [CHARGE]
        assert [e["text"] for e in mem.about("src/../src/pay.py")["current"]] == [CHARGE]
        api_small = mem.context("charge cents", max_tokens=20)
    cli = run_cli("about", "../x.py", "--project-dir", str(root))
    assert cli.returncode == 2 and "path_or_symbol: " in cli.stderr

    async def main():
        async with Client(build_server(spec, root)) as c:
            out = {}
            for name, args in (("about", {"path_or_symbol": "../x.py"}),
                               ("get_context", {"task": "charge cents", "max_tokens": 20}),
                               ("get_context", {"task": "charge cents", "max_tokens": 150_000}),
                               ("search_memory", {"query": "charge", "include_history": "yes"})):
                res = await c.call_tool(name, args)
                out[name, json.dumps(args)] = (res.is_error, res.content[0].text if res.content
                                               else "")
            return list(out.values())
    about, small, big, loose = anyio.run(main)
    assert about[0] and "path_or_symbol: " in about[1]
    assert (small, big[0]) == ((False, api_small), False)  # the API's bounds, 20 to 200,000
    assert loose[0] and "include_history" in loose[1]  # a JSON boolean, not "yes"


def test_a_quoted_path_with_spaces_and_non_ascii_letters_is_anchored(tmp_path):
    root, spec = project(tmp_path, {"src/my dir/ütil.py": "def helper():\n    return 1\n",
                                    "src/pay.py": PAY})
    with Memory(spec, root) as mem:
        mem.append_gotcha("`src/my dir/ütil.py` must stay free of imports")
        sid = mem.start_session()
        mem.record_turn(sid, "user", 'please tidy "src/my dir/ütil.py" and src/pay.py')
        hits = {h.kind: h for h in mem.search("tidy imports ütil", scope="project", limit=5)}
        about = mem.about("src/my dir/ütil.py")
    assert hits["gotcha"].metadata["freshness"]["paths"] == ["src/my dir/ütil.py"]
    assert set(hits["turn"].metadata["freshness"]["paths"]) == {"src/my dir/ütil.py", "src/pay.py"}
    assert {e["kind"] for e in about["current"]} == {"gotcha", "turn"}


def test_a_fifo_in_a_project_outside_git_does_not_hang_code_memory(tmp_path):
    import os

    root, spec = project(tmp_path, {"src/pay.py": PAY}, use_git=False)
    with Memory(spec, root) as mem:
        mem.append_gotcha(CHARGE)
    os.mkfifo(root / "src" / "events.pipe")  # reading it would wait for a writer forever
    (root / "src" / "zero").symlink_to("/dev/zero")  # endless when read
    proc = subprocess.run([sys.executable, "-m", "graphmem.cli", "about", "src/pay.py",
                           "--project-dir", str(root), "--json"], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert [e["text"] for e in json.loads(proc.stdout)["current"]] == [CHARGE]
    missing = run_cli("about", "x", "--spec-dir", str(tmp_path / "no-such-spec"))
    assert missing.returncode == 4 and "spec folder not found" in missing.stderr


BOTH = "In src/pay.py, `refund` rounds down and `charge` retries twice"


def test_a_moved_function_is_a_note_and_the_path_of_a_file_still_there_stays(tmp_path):
    # refund left src/pay.py, charge stayed: "In src/refunds.py, ... `charge`" would be false
    root, spec = project(tmp_path, {"src/pay.py": PAY})
    with Memory(spec, root) as mem:
        mem.append_gotcha(BOTH)
        mem.update_codebase_map({"src/pay.py": "`refund` and `charge`"})
    (root / "src" / "pay.py").write_text("def charge(n):\n    return n\n")
    (root / "src" / "refunds.py").write_text("def refund(order):\n    return order.total\n")
    commit(root, "move refund to its own module")
    with Memory(spec, root) as mem:
        ctx = mem.context("refund rounding and charge retries", max_tokens=800)
    line = next(x for x in ctx.splitlines() if "rounds down" in x)
    assert line.startswith("- " + BOTH) and "`refund` moved from src/pay.py to src/refunds.py" in line
    entry = next(x for x in ctx.splitlines() if "`refund` and `charge`" in x)
    assert entry.startswith("- src/pay.py: ") and "src/refunds.py:" not in ctx
    with Memory(spec, root) as mem:  # a query asking where refund is: said once, not twice
        asked = mem.context("Where is `refund` now?", max_tokens=800)
    entry = next(x for x in asked.splitlines() if "`refund` and `charge`" in x)
    assert entry.endswith("[`refund` moved from src/pay.py to src/refunds.py]"), entry
    # the file split in two (src/pay.py gone): no single new name to write, a note per function
    (root / "src" / "pay.py").unlink()
    (root / "src" / "charges.py").write_text("def charge(n):\n    return n\n")
    commit(root, "split pay.py")
    cli = run_cli("context", "refund rounding and charge retries", "--max-tokens", "800",
                  "--spec-dir", str(spec), "--project-dir", str(root))
    assert cli.returncode == 0, cli.stderr
    line = next(x for x in cli.stdout.splitlines() if "rounds down" in x)
    assert line.startswith("- " + BOTH), line
    assert "`refund` moved from src/pay.py (deleted) to src/refunds.py" in line
    assert "`charge` moved from src/pay.py (deleted) to src/charges.py" in line


def test_the_three_views_read_old_and_malformed_move_marks_alike():
    """context, graphmem search and graphmem about read a freshness mark's moves one way
    (code.freshness.moves_of): a mark from before moves were listed (only ``moved``) reads as a
    file move, and a malformed move (no from/to, not a dict) is left out, never shown as None."""
    from datetime import datetime, timezone

    from graphmem.code.about_answer import format_about
    from graphmem.rules.context import _line
    from graphmem.models import Hit
    from graphmem.cli.hit_view import stale_note

    old = {"state": "moved", "moved": {"src/pay.py": "src/refunds.py"}, "changed": [],
           "paths": ["src/refunds.py"]}
    bad = {**old, "moves": [{"from": "src/pay.py", "to": "src/refunds.py", "what": "file"},
                            {"what": "file"}, "src/x.py", {"from": 3, "to": None}]}
    for fresh in (old, bad):
        hit = Hit(id="g1", kind="gotcha", text="Refunds go through src/pay.py", score=1.0,
                  project="p", metadata={"freshness": fresh})
        line = _line(hit, None)
        assert "src/refunds.py" in line and "src/pay.py is now src/refunds.py" in line, line
        note = stale_note(hit.metadata)
        assert note == "moved: src/pay.py -> src/refunds.py", note
        shown: list[str] = []
        format_about({"target": "src/refunds.py", "source": "local index", "history": [],
                      "current": [{"id": "g1", "kind": "gotcha", "text": hit.text,
                                   "freshness": fresh, "validity": None,
                                   "valid_at": datetime.now(timezone.utc).isoformat()}]},
                     shown.append)
        assert any("[moved: src/pay.py is now src/refunds.py]" in s for s in shown), shown
        assert not any("None" in s for s in [line, note, *shown])
