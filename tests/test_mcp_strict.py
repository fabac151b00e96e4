"""What MCP tools refuse: folders outside the server's roots, loose integers, bad first turns."""

from __future__ import annotations

import json
from pathlib import Path

from test_mcp import _data, _session, _text

from graphmem.serve.mcp_server import build_server


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() if p.is_file() else b"<dir>"
            for p in sorted(folder.rglob("*"))}


def test_folder_arguments_outside_the_roots_are_refused_and_nothing_is_created(
        tmp_path: Path, spec_dir: Path):
    outside = tmp_path / "elsewhere" / "auto-claude" / "specs" / "001-x"
    outside.mkdir(parents=True)
    project = spec_dir.parent.parent
    (project / "link-out").symlink_to(outside.parent.parent.parent, target_is_directory=True)
    via_link = project / "link-out" / "auto-claude" / "specs" / "001-x"
    shallow = project / "one"  # inside the project, but its implied project (two up) is not
    shallow.mkdir()
    sibling = project / "specs" / "002-other"
    sibling.mkdir()
    refused = [
        ("add_gotcha", {"text": "planted", "spec_dir": str(outside)}, "spec_dir"),
        ("add_gotcha", {"text": "planted", "spec_dir": str(via_link)}, "spec_dir"),
        ("add_gotcha", {"text": "planted", "spec_dir": str(shallow)}, "spec_dir"),
        ("add_gotcha", {"text": "planted", "spec_dir": str(spec_dir),
                        "project_dir": str(outside.parent.parent.parent)}, "project_dir"),
        ("search_memory", {"query": "x", "project_dir": str(outside.parent.parent.parent)},
         "project_dir"),
        ("record_turn", {"role": "user", "content": "hi", "spec_dir": str(outside)}, "spec_dir"),
        ("memory_summary", {"spec_dir": str(tmp_path / "no-such")}, "spec_dir"),
    ]
    before = _snapshot(tmp_path / "elsewhere")

    async def steps(c):
        for name, args, field in refused:
            result = await c.call_tool(name, args)
            assert result.is_error, (name, args)
            text = _text(result)
            assert f"graphmem: error: {field}:" in text and "--root" in text, text
            assert "not found" not in text  # existence outside the roots is not revealed
        # inside the roots: the start-up spec, and another spec of the same project
        _data(await c.call_tool("add_gotcha", {"text": "kept", "spec_dir": str(sibling)}))
        _data(await c.call_tool("add_gotcha", {"text": "kept"}))
    _session(build_server(spec_dir), steps)
    assert _snapshot(tmp_path / "elsewhere") == before
    assert not (outside / "memory").exists() and not (shallow / "memory").exists()
    assert "kept" in (sibling / "memory" / "gotchas.md").read_text()


def test_a_server_started_without_folders_refuses_every_folder_and_says_how(spec_dir: Path):
    async def steps(c):
        result = await c.call_tool("add_gotcha", {"text": "x", "spec_dir": str(spec_dir)})
        assert result.is_error and "spec_dir" in _text(result)
        assert "--root" in _text(result) and "--spec-dir" in _text(result)
    _session(build_server(), steps)
    assert not (spec_dir / "memory").exists()


def test_extra_roots_admit_their_folders(tmp_path: Path, spec_dir: Path):
    other = tmp_path / "second" / "auto-claude" / "specs" / "003-y"
    other.mkdir(parents=True)

    async def steps(c):
        _data(await c.call_tool("add_pattern", {"text": "Ports over adapters",
                                                "spec_dir": str(other)}))
    _session(build_server(spec_dir, roots=[tmp_path / "second"]), steps)
    assert "Ports over adapters" in (other / "memory" / "patterns.md").read_text()


def test_integers_are_strict(spec_dir: Path):
    loose = [
        ("save_session_insights", {"session_num": "3", "insights": {}}, "session_num"),
        ("save_session_insights", {"session_num": True, "insights": {}}, "session_num"),
        ("save_session_insights", {"session_num": 3.0, "insights": {}}, "session_num"),
        ("search_memory", {"query": "x", "limit": "3"}, "limit"),
        ("search_memory", {"query": "x", "limit": True}, "limit"),
        ("get_context", {"task": "x", "max_tokens": "500"}, "max_tokens"),
        ("list_sessions", {"limit": False}, "limit"),
        ("record_turn", {"role": "user", "content": "x", "tokens": "5"}, "tokens"),
        ("record_turn", {"role": "user", "content": "x", "tokens": True}, "tokens"),
    ]
    mem = spec_dir / "memory"

    async def steps(c):
        for name, args, field in loose:
            result = await c.call_tool(name, args)
            assert result.is_error, (name, args)
            assert f"graphmem: error: {field}:" in _text(result), _text(result)
        assert _data(await c.call_tool("search_memory", {"query": "x", "limit": 3}))["hits"] == []
    _session(build_server(spec_dir), steps)
    assert not (mem / "session_insights").exists() and not (mem / "episodes").exists()


def test_a_refused_first_turn_leaves_no_session(spec_dir: Path):
    bad_first_turns = [
        ({"role": "user", "content": "   "}, "content"),
        ({"role": "user", "content": "x" * 1_000_001}, "content"),
        ({"role": "wizard", "content": "abracadabra"}, "role"),
        ({"role": "user", "content": "x", "model": "m" * 300}, "model"),
        ({"role": "user", "content": "x", "session_id": ""}, "session_id"),
    ]

    async def steps(c):
        for args, field in bad_first_turns:
            result = await c.call_tool("record_turn", args)
            assert result.is_error and field in _text(result), (args, _text(result))
        assert _data(await c.call_tool("list_sessions", {}))["sessions"] == []
    _session(build_server(spec_dir), steps)
    assert not list((spec_dir / "memory").rglob("session.json"))


def test_end_session_ends_what_record_turn_started(spec_dir: Path):
    async def steps(c):
        sid = _data(await c.call_tool("record_turn", {"role": "user", "content": "Why is CI red?",
                                                      "tokens": 7}))["session_id"]
        _data(await c.call_tool("record_turn", {"role": "assistant", "content": "A stale lock file.",
                                                "tokens": 5, "session_id": sid}))
        listed = _data(await c.call_tool("list_sessions", {}))["sessions"]
        assert listed[0]["status"] == "active"
        ended = _data(await c.call_tool("end_session", {"session_id": sid}))
        assert ended["status"] == "ended" and ended["ended_at"] and ended["total_tokens"] == 12
        again = _data(await c.call_tool("end_session", {"session_id": sid}))
        assert again["ended_at"] == ended["ended_at"]
        assert _data(await c.call_tool("list_sessions", {}))["sessions"][0]["status"] == "ended"
        missing = await c.call_tool("end_session", {"session_id": "ses-doesnotexist"})
        assert missing.is_error and "graphmem: error:" in _text(missing)
    _session(build_server(spec_dir), steps)
    meta = json.loads(next((spec_dir / "memory").rglob("session.json")).read_text())
    assert meta["status"] == "ended" and meta["total_tokens"] == 12


def test_a_list_item_is_named_as_graphmem_names_it_everywhere(spec_dir: Path):
    # files[1], as the API and the CLI say it for a path they refuse, not pydantic's files.1
    from graphmem import Memory
    from graphmem.errors import ValidationError

    bad = [("get_context", {"task": "x", "files": ["src/a.py", 2]}, "files[1]: "),
           ("get_context", {"task": "x", "files": ["../a.py"]}, "files[0]: "),
           ("search_memory", {"query": "x", "kinds": ["gotcha", "nope"]}, "kinds[1]: "),
           ("save_session_insights", {"session_num": 1, "insights": {"what_failed": ["ok", 1]}},
            "insights.what_failed[1]: ")]

    async def steps(c):
        for name, args, field in bad:
            text = _text(await c.call_tool(name, args))
            assert text.startswith(f"graphmem: error: {field}"), (name, text)
    _session(build_server(spec_dir), steps)
    with Memory(spec_dir) as mem:  # the Python API names the same field the same way
        try:
            mem.save_session_insights(1, {"what_failed": ["ok", 1]})
        except ValidationError as exc:
            assert exc.field == "insights.what_failed[1]"
        else:
            raise AssertionError("a number among what_failed's texts was accepted")
