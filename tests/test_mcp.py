"""The MCP server in memory, through the SDK's own client: tools, real file effects, tool errors."""

from __future__ import annotations

import json
from pathlib import Path

import anyio
from mcp import Client

from conftest import run_cli
from graphmem.cli.mcp_commands import parse_http
from graphmem.serve.mcp_server import build_server

TOOLS = {"save_session_insights", "add_gotcha", "add_pattern", "update_codebase_map", "search_memory",
         "get_context", "record_turn", "end_session", "list_sessions", "memory_summary", "about"}
READ_ONLY = {"search_memory", "get_context", "list_sessions", "memory_summary", "about"}


def _text(result) -> str:
    return "".join(getattr(c, "text", "") for c in result.content)


def _data(result) -> dict:
    assert not result.is_error, _text(result)
    return result.structured_content if result.structured_content else json.loads(_text(result))


def _session(server, steps) -> None:
    async def main():
        async with Client(server) as client:
            await steps(client)
    anyio.run(main)


def test_lists_every_tool_with_description_and_typed_arguments(spec_dir: Path):
    async def steps(c):
        tools = {t.name: t for t in (await c.list_tools()).tools}
        assert set(tools) >= TOOLS
        for name in TOOLS:
            assert len(tools[name].description or "") > 30, name
        search = tools["search_memory"].input_schema["properties"]
        assert search["scope"]["enum"] == ["spec", "project", "all"]
        assert search["limit"]["type"] == "integer"
        assert "query" in tools["search_memory"].input_schema["required"]
        assert tools["get_context"].input_schema["properties"]["max_tokens"]["default"] == 1500
        for name in TOOLS:
            t = tools[name]
            assert t.title and t.annotations and t.annotations.title == t.title, name
            assert t.annotations.read_only_hint is (name in READ_ONLY), name
            for arg, schema in t.input_schema["properties"].items():
                assert len(schema.get("description", "")) > 8, (name, arg)
        roles = tools["record_turn"].input_schema["properties"]["role"]
        assert set(roles["enum"]) == {"user", "assistant", "system", "tool"}
        insights = tools["save_session_insights"].input_schema
        typed = insights["$defs"][insights["properties"]["insights"]["$ref"].rsplit("/", 1)[1]]
        assert typed["properties"]["what_worked"] == {"items": {"type": "string"},
                                                      "title": "What Worked", "type": "array"}
        assert "files_understood" in json.dumps(insights["$defs"])
    _session(build_server(spec_dir), steps)


def test_writes_reach_the_files(spec_dir: Path):
    mem = spec_dir / "memory"

    async def steps(c):
        rep = _data(await c.call_tool("add_gotcha", {"text": "Never call db.commit() inside a loop"}))
        assert rep["files"] == "written" and rep["path"] == str(mem / "gotchas.md")
        again = _data(await c.call_tool("add_gotcha", {"text": "never call  DB.commit() inside a loop"}))
        assert again["files"] == "unchanged"
        _data(await c.call_tool("add_pattern", {"text": "Services take a Session argument"}))
        _data(await c.call_tool("update_codebase_map", {"discoveries": {"src/app/db.py": "engine setup"}}))
        _data(await c.call_tool("save_session_insights", {"session_num": 1, "insights": {
            "subtasks_completed": ["add orders table"], "what_worked": ["alembic autogenerate"]}}))
        summary = _data(await c.call_tool("memory_summary", {}))
        assert (summary["total_sessions"], summary["total_files_mapped"], summary["total_patterns"],
                summary["total_gotchas"]) == (1, 1, 1, 1)
    _session(build_server(spec_dir), steps)
    assert (mem / "gotchas.md").read_text().count("db.commit() inside a loop") == 1
    assert "- Services take a Session argument" in (mem / "patterns.md").read_text()
    assert json.loads((mem / "codebase_map.json").read_text())["src/app/db.py"] == "engine setup"
    saved = json.loads((mem / "session_insights" / "session_001.json").read_text())
    assert saved["what_worked"] == ["alembic autogenerate"]


def test_bad_arguments_are_tool_errors_and_the_server_keeps_answering(spec_dir: Path):
    mem = spec_dir / "memory"
    bad_calls = [
        ("save_session_insights", {"session_num": 1, "insights": {"what_worked": "not a list"}},
         "insights.what_worked"),
        ("save_session_insights", {"session_num": 0, "insights": {}}, "session_num"),
        ("save_session_insights", {"session_num": "three", "insights": {}}, "session_num"),
        ("update_codebase_map", {"discoveries": {"/etc/passwd": "x"}}, "absolute"),
        ("update_codebase_map", {"discoveries": {"../../up.py": "x"}}, "outside the project"),
        ("update_codebase_map", {"discoveries": {"a.py": 5}}, "discoveries"),
        ("add_gotcha", {"text": "   "}, "gotcha"),
        ("add_pattern", {"text": "two\nlines"}, "single line"),
        ("add_gotcha", {}, "text"),
        ("search_memory", {"query": "x", "scope": "galaxy"}, "scope"),
        ("search_memory", {"query": "x", "limit": 0}, "limit"),
        ("memory_summary", {"spec_dir": "/no/such/spec"}, "spec_dir: /no/such/spec is outside"),
        ("memory_summary", {"spec_dir": str(spec_dir / "absent")}, "spec folder not found"),
    ]

    async def steps(c):
        for name, args, expected in bad_calls:
            result = await c.call_tool(name, args)
            assert result.is_error, (name, args)
            assert expected in _text(result), (name, _text(result))
            # the server still answers, and nothing was written by the failed call
            assert _data(await c.call_tool("memory_summary", {}))["total_sessions"] == 0
        assert not (mem / "session_insights").exists()
        assert not (mem / "codebase_map.json").exists()
        assert not (mem / "gotchas.md").exists() and not (mem / "patterns.md").exists()
    _session(build_server(spec_dir), steps)


def test_graphmem_errors_carry_the_cli_message(tmp_path: Path):
    missing = tmp_path / "project" / "specs" / "absent-spec"
    cli = run_cli("summary", "--spec-dir", str(missing))
    assert cli.returncode != 0

    async def steps(c):
        result = await c.call_tool("memory_summary", {"spec_dir": str(missing)})
        assert result.is_error
        assert cli.stderr.strip() in _text(result)
    _session(build_server(roots=[tmp_path]), steps)


def test_spec_comes_from_arguments_or_start_up_options(tmp_path: Path, spec_dir: Path):
    other = tmp_path / "other" / "auto-claude" / "specs" / "002-api"
    other.mkdir(parents=True)
    server = build_server(roots=[tmp_path])

    async def steps(c):
        none = await c.call_tool("add_gotcha", {"text": "x"})
        assert none.is_error and "spec_dir" in _text(none) and "--spec-dir" in _text(none)
        _data(await c.call_tool("add_gotcha", {"text": "first spec", "spec_dir": str(spec_dir)}))
        _data(await c.call_tool("add_gotcha", {"text": "second spec", "spec_dir": str(other)}))
        _data(await c.call_tool("add_gotcha", {"text": "first again", "spec_dir": str(spec_dir)}))
        assert len(server.pool._memories) == 2  # one memory per (spec, project), reused
    _session(server, steps)
    assert (spec_dir / "memory" / "gotchas.md").read_text().count("\n- ") == 2
    assert "second spec" in (other / "memory" / "gotchas.md").read_text()
    assert "first" not in (other / "memory" / "gotchas.md").read_text()


def test_http_address_is_loopback_unless_allowed():
    assert parse_http("127.0.0.1:8765") == ("127.0.0.1", 8765)
    assert parse_http("[::1]:9000") == ("::1", 9000)
    assert parse_http("localhost:1") == ("localhost", 1)
    for bad, why in [("0.0.0.0:8765", "loopback"), ("10.1.2.3:80", "allow-remote"),
                     ("8765", "HOST:PORT"), ("127.0.0.1:http", "not a number"),
                     ("127.0.0.1:70000", "1-65535")]:
        try:
            parse_http(bad)
        except Exception as exc:
            assert why in str(exc), (bad, exc)
        else:
            raise AssertionError(f"{bad} was accepted")
    assert parse_http("0.0.0.0:8765", allow_remote=True) == ("0.0.0.0", 8765)


def test_turns_start_a_session_and_list_sessions_shows_it(spec_dir: Path):
    async def steps(c):
        first = _data(await c.call_tool("record_turn", {"role": "user",
                                                        "content": "Why do the API tests fail on CI?"}))
        sid = first["session_id"]
        assert sid and first["turn_id"]
        second = _data(await c.call_tool("record_turn", {"role": "assistant", "session_id": sid,
                                                         "content": "The migration did not run.",
                                                         "tokens": 12}))
        assert second["session_id"] == sid and second["turn_id"] != first["turn_id"]
        bad = await c.call_tool("record_turn", {"role": "user", "content": "x",
                                                "session_id": "ses-doesnotexist"})
        assert bad.is_error and "graphmem: error:" in _text(bad)
        empty = await c.call_tool("record_turn", {"role": "", "content": "x", "session_id": sid})
        assert empty.is_error and "role" in _text(empty)
        sessions = _data(await c.call_tool("list_sessions", {"limit": 5}))["sessions"]
        assert [s["session_id"] for s in sessions] == [sid]
        assert "Why do the API tests fail on CI?" in json.dumps(sessions[0])
    _session(build_server(spec_dir), steps)
    turns = list((spec_dir / "memory").rglob("turns.jsonl"))
    assert len(turns) == 1
    lines = [json.loads(x) for x in turns[0].read_text().splitlines()]
    assert [t["content"] for t in lines] == ["Why do the API tests fail on CI?", "The migration did not run."]


def test_project_only_reads_cover_the_project_and_writes_go_to_its_own_memory(spec_dir: Path):
    project = spec_dir.parent.parent  # the reference's default project folder

    async def steps(c):
        _data(await c.call_tool("add_gotcha", {"text": "Feature flags live in config/flags.yaml",
                                               "spec_dir": str(spec_dir)}))
        hits = _data(await c.call_tool("search_memory", {"query": "feature flags",
                                                         "project_dir": str(project)}))["hits"]
        assert any("config/flags.yaml" in h["text"] for h in hits)
        _data(await c.call_tool("add_gotcha", {"text": "Flags reload on SIGHUP",
                                               "project_dir": str(project)}))
        hits = _data(await c.call_tool("search_memory", {"query": "feature flags SIGHUP reload",
                                                         "project_dir": str(project)}))["hits"]
        assert {h["text"] for h in hits} >= {"Flags reload on SIGHUP",
                                             "Feature flags live in config/flags.yaml"}
    _session(build_server(roots=[project]), steps)
    assert (project / ".graphmem" / "memory" / "gotchas.md").read_text().count("SIGHUP") == 1
    assert "SIGHUP" not in (spec_dir / "memory" / "gotchas.md").read_text()


def test_memories_are_closed_after_the_last_session_and_reopened_by_the_next(spec_dir: Path):
    server = build_server(spec_dir)

    async def first(c):
        _data(await c.call_tool("add_gotcha", {"text": "Pin the Stripe API version"}))
        assert len(server.pool._memories) == 1

    async def second(c):
        assert len(server.pool._memories) == 0  # the first session's memory was closed
        assert _data(await c.call_tool("memory_summary", {}))["total_gotchas"] == 1
        hits = _data(await c.call_tool("search_memory", {"query": "stripe api version"}))["hits"]
        assert hits[0]["text"] == "Pin the Stripe API version"
    _session(server, first)
    _session(server, second)
