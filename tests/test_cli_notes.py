"""What a search or a context has to tell besides its answer reaches every caller: the Python API
(``search_notes``), the CLI (stdout keeps its shape, ``--json`` a list of hits for search; the
notes on stderr as ``graphmem: note: ...`` lines, and in context's text and ``--json``) and MCP
(``notes`` beside the hits; context's text). Retired memories left out by a search are counted,
and a file given to ``context(files=)`` that nothing is known about is named (a typo shows)."""

from __future__ import annotations

import json

from conftest import run_cli
from graphmem import Memory
from graphmem.serve.mcp_server import build_server
from test_code_freshness import PAY, commit, project
from test_mcp import _data, _session, _text

LEFT_OUT = "1 matching memory left out: retired or superseded"
TYPO = "nothing is known about src/pya.py yet: not in the project, and no memory names it"


def test_a_search_says_how_many_retired_memories_it_left_out_on_every_surface(tmp_path):
    root, spec = project(tmp_path, {"src/pay.py": PAY})
    with Memory(spec, root) as mem:
        mem.append_gotcha("`refund` retries 3 times")
        mem.append_gotcha("`refund` logs every retry")
        # by its text, not by a search's first hit: which of two notes anchored to one file
        # ranks first depends on whether they were written in the same second (code recall's
        # newest-work gain), so under load the other one was retired and the test failed
        old = next(i.id for i in mem.items() if i.text == "`refund` retries 3 times")
        mem.retire(old, "retries were removed")
        hits = mem.search("refund retries")
        assert [h.text for h in hits] == ["`refund` logs every retry"]
        assert any(n.startswith(LEFT_OUT) for n in mem.search_notes), mem.search_notes
        mem.search("refund retries", include_history=True)
        assert mem.search_notes == []  # nothing left out
    cli = run_cli("search", "refund retries", "--spec-dir", str(spec), "--json")
    assert cli.returncode == 0, cli.stderr
    assert [h["text"] for h in json.loads(cli.stdout)] == ["`refund` logs every retry"]  # a list
    assert f"graphmem: note: {LEFT_OUT}" in cli.stderr, cli.stderr
    human = run_cli("search", "refund retries", "--spec-dir", str(spec))
    assert f"graphmem: note: {LEFT_OUT}" in human.stderr and LEFT_OUT not in human.stdout

    async def steps(c):
        got = _data(await c.call_tool("search_memory", {"query": "refund retries"}))
        assert [h["text"] for h in got["hits"]] == ["`refund` logs every retry"]
        assert any(n.startswith(LEFT_OUT) for n in got["notes"]), got
    _session(build_server(spec, root), steps)


def test_context_names_a_file_nothing_is_known_about(tmp_path):
    root, spec = project(tmp_path, {"src/pay.py": PAY, "src/old.py": "def old():\n    pass\n"})
    with Memory(spec, root) as mem:
        mem.append_gotcha("`refund` must run after the ledger write")
        mem.append_gotcha("src/old.py is kept for imports")
    (root / "src" / "old.py").unlink()
    (root / "src" / "draft.py").write_text("")  # not committed yet: still a file of the project
    commit(root, "drop old.py")
    (root / "src" / "new.py").write_text("")
    files = ["src/pay.py", "src/pya.py", "src/old.py", "src/new.py"]
    with Memory(spec, root) as mem:
        ctx = mem.context("refund after the ledger write", files=files)
        assert mem.search_notes == [TYPO]  # a deleted file a memory names is known
        only = mem.context("something else entirely", files=["src/pya.py"])
    assert ctx.rstrip().endswith(f"_Note: {TYPO}._"), ctx
    assert "`refund` must run after the ledger write" in ctx
    assert only.rstrip().endswith(f"_Note: {TYPO}._"), only  # not an empty answer
    cli = run_cli("context", "refund after the ledger write", "--spec-dir", str(spec),
                  *[a for f in files for a in ("--file", f)])
    assert cli.returncode == 0, cli.stderr
    assert cli.stdout.strip() == ctx.strip()
    js = run_cli("context", "refund after the ledger write", "--spec-dir", str(spec),
                 "--file", "src/pya.py", "--json")
    got = json.loads(js.stdout)
    assert got["notes"] == [TYPO] and TYPO in got["context"]

    async def steps(c):
        res = await c.call_tool("get_context", {"task": "refund after the ledger write",
                                                "files": ["src/pya.py"]})
        assert not res.is_error and TYPO in _text(res), _text(res)
    _session(build_server(spec, root), steps)
