"""``context(files=[...])``: a folder pins the newest memories anchored to files under it, at
most ``FOLDER_PINS`` of them once retired and gone ones are out, so even ``.`` (the whole
project) cannot fill the context; through the API, the CLI (``--file``) and MCP. Pinning keeps
the relevance floor: pinning the memory that best matches the task must not let every weak
match in (the floor is a share of the best score, and the pinned memory was left out of that
best, so the next weak match became the bar)."""

from __future__ import annotations

from pathlib import Path

from conftest import run_cli
from graphmem import Memory
from graphmem.code.pins import FOLDER_PINS
from graphmem.serve.mcp_server import build_server
from test_code_freshness import commit, project
from test_mcp import _session, _text

NAMES = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf"]
TASK = "helper caches tokens forever"
HELPER = "`helper` in lib/cache.py caches tokens forever"


def tidy_turns(tmp_path: Path) -> tuple[Path, Path]:
    """Seven turns each naming one file under src/ (sharing no word with TASK, so no search
    brings them), and a gotcha about lib/cache.py; -> root, spec."""
    files = {f"src/{n}.py": f"def {n}_step(x):\n    return x\n" for n in NAMES}
    files["lib/cache.py"] = "def helper():\n    return 1\n"
    root, spec = project(tmp_path, files)
    with Memory(spec, root) as mem:
        sid = mem.start_session()
        for n in NAMES:
            mem.record_turn(sid, "user", f"please tidy src/{n}.py")
        mem.append_gotcha(HELPER)
    return root, spec


def shown(ctx: str) -> list[str]:
    """The files of the tidy turns a context shows."""
    return [n for n in NAMES if f"src/{n}.py" in ctx]


def test_pinning_the_best_match_lets_no_weak_match_in(tmp_path):
    root, spec = tidy_turns(tmp_path)
    with Memory(spec, root) as mem:
        alone = mem.context(TASK)
        pinned = mem.context(TASK, files=["lib/cache.py"])
    assert HELPER in alone and shown(alone) == []
    assert HELPER in pinned and shown(pinned) == [], pinned


def test_a_folder_pins_the_memories_under_it_capped(tmp_path):
    root, spec = tidy_turns(tmp_path)
    with Memory(spec, root) as mem:
        alone = mem.context(TASK)
        one = mem.context(TASK, files=["src/bravo.py"])
        folder = mem.context(TASK, files=["src/"])
        whole = mem.context(TASK, files=["."])
        other = mem.context(TASK, files=[str(root / "lib")])  # absolute, as agents' tools give it
        gone = shown(folder)[0]
        turn = mem.search(f"please tidy src/{gone}.py", kinds=["turn"], limit=1)[0]
        mem.retire(turn.id, "tidied long ago")
        after = mem.context(TASK, files=["src"])
    assert shown(alone) == [] and shown(one) == ["bravo"]
    assert len(shown(folder)) == FOLDER_PINS and HELPER in folder
    assert 0 < len(shown(whole)) <= FOLDER_PINS  # the whole project: no more than one folder
    assert shown(other) == [] and HELPER in other
    assert gone not in shown(after) and len(shown(after)) == FOLDER_PINS  # retired: out, and
    # the cap is filled from the others


def test_a_folder_pins_through_the_cli_and_mcp(tmp_path):
    root, spec = tidy_turns(tmp_path)
    cli = run_cli("context", TASK, "--project-dir", str(root), "--file", "src")
    assert cli.returncode == 0, cli.stderr
    assert len(shown(cli.stdout)) == FOLDER_PINS

    async def steps(c):
        result = await c.call_tool("get_context", {"task": TASK, "files": ["src"]})
        assert not result.is_error, _text(result)
        assert len(shown(_text(result))) == FOLDER_PINS
        tools = {t.name: t for t in (await c.list_tools()).tools}
        assert "folder" in tools["get_context"].input_schema["properties"]["files"]["description"]
    _session(build_server(spec), steps)


def test_a_folder_pins_a_memory_whose_function_moved_into_it(tmp_path):
    root, spec = project(tmp_path, {"lib/cache.py": "def helper():\n    return 1\n",
                                    "src/app.py": "def main():\n    pass\n"})
    with Memory(spec, root) as mem:
        mem.record_turn(mem.start_session(), "user", "why does `helper` keep lib/cache.py warm?")
        mem.append_gotcha("Zebra quokka releases go out on Fridays")  # what the task matches
    (root / "lib" / "cache.py").unlink()
    (root / "src" / "helpers.py").write_text("def helper():\n    return 1\n")
    commit(root, "move helper into src")
    with Memory(spec, root) as mem:
        # a budget of one line: the pinned memory comes first, the search's best after it
        ctx = mem.context("zebra quokka releases go out on fridays", files=["src"], max_tokens=80)
    line = next((x for x in ctx.splitlines() if "warm" in x), "")
    assert "keep src/helpers.py warm" in line, ctx  # pinned, and said where its code is now
