"""Bad input is a ValidationError naming the field, and leaves the files as they were (issue 14
finding 11): lone surrogates in any text field, non-JSON insight extras, a list nested 100,000
deep, ``Memory(5)``, a ``gotchas.md`` that is a folder; through the API, the CLI and MCP.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from test_mcp import _data, _session, _text

from conftest import run_cli
from graphmem import Memory
from graphmem.errors import StorageError, ValidationError
from graphmem.serve.mcp_server import build_server


def deep(levels: int = 100_000) -> list:
    value: list = []
    for _ in range(levels):
        value = [value]
    return value


def snapshot(folder: Path) -> dict[str, bytes]:
    """Every file and folder under ``folder`` (locks excluded: taking one is not a write)."""
    return {str(p.relative_to(folder)): p.read_bytes() if p.is_file() else b"<dir>"
            for p in sorted(folder.rglob("*")) if not p.name.endswith(".lock")}


@pytest.fixture
def mem(spec_dir: Path):
    """A memory with one of everything written, and its open session's id."""
    with Memory(spec_dir) as m:
        m.append_gotcha("baseline gotcha")
        m.append_pattern("baseline pattern")
        m.save_session_insights(1, {"what_worked": ["baseline"]})
        m.update_codebase_map({"a.py": "baseline"})
        sid = m.start_session()
        m.record_turn(sid, "user", "baseline turn")
        m.record_step(sid, "baseline", "ok", {"n": 1})
        yield m, sid


BAD = "lone \ud800 surrogate"
API = [  # (name, call(memory, session id), field the error must name)
    ("gotcha", lambda m, s: m.append_gotcha(BAD), "gotcha"),
    ("pattern", lambda m, s: m.append_pattern(BAD), "pattern"),
    ("insight list", lambda m, s: m.save_session_insights(2, {"what_failed": [BAD]}),
     "insights.what_failed[0]"),
    ("insight discovery", lambda m, s: m.save_session_insights(
        2, {"discoveries": {"gotchas_encountered": [BAD]}}), "insights.discoveries"),
    ("insight extra", lambda m, s: m.save_session_insights(2, {"extra": {"note": BAD}}),
     "insights.extra.note"),
    ("insight extra key", lambda m, s: m.save_session_insights(2, {"extra": {BAD: 1}}),
     "insights.extra"),
    ("insight extra set", lambda m, s: m.save_session_insights(2, {"extra": {1, 2}}),
     "insights.extra"),
    ("insight extra object", lambda m, s: m.save_session_insights(2, {"extra": [object()]}),
     "insights.extra[0]"),
    ("insight extra bytes", lambda m, s: m.save_session_insights(2, {"extra": b"raw"}),
     "insights.extra"),
    ("insight extra nan", lambda m, s: m.save_session_insights(2, {"extra": float("nan")}),
     "insights.extra"),
    ("insight extra int key", lambda m, s: m.save_session_insights(2, {"extra": {1: "a"}}),
     "insights.extra"),
    ("insight deep", lambda m, s: m.save_session_insights(2, {"extra": deep()}), "insights.extra"),
    ("map value", lambda m, s: m.update_codebase_map({"b.py": BAD}), "discoveries.b.py"),
    ("map key", lambda m, s: m.update_codebase_map({"b\udcff.py": "x"}), "discoveries"),
    ("map deep", lambda m, s: m.update_codebase_map({"b.py": deep()}), "discoveries.b.py"),
    ("turn content", lambda m, s: m.record_turn(s, "user", BAD), "content"),
    ("turn role", lambda m, s: m.record_turn(s, "us\ud800", "x"), "role"),
    ("turn model", lambda m, s: m.record_turn(s, "user", "x", model=BAD), "model"),
    ("turn metadata", lambda m, s: m.record_turn(s, "user", "x", metadata={"k": [BAD]}),
     "metadata.k[0]"),
    ("turn metadata deep", lambda m, s: m.record_turn(s, "user", "x", metadata={"k": deep()}),
     "metadata.k"),
    ("turn metadata set", lambda m, s: m.record_turn(s, "user", "x", metadata={"k": {1}}),
     "metadata.k"),
    ("turns batch", lambda m, s: m.record_turns(s, [{"role": "user", "content": "ok"},
                                                   {"role": "user", "content": BAD}]),
     "turns[1].content"),
    ("step name", lambda m, s: m.record_step(s, BAD, "ok"), "name"),
    ("step payload", lambda m, s: m.record_step(s, "run", "ok", {"out": BAD}), "payload.out"),
    ("step payload deep", lambda m, s: m.record_step(s, "run", "ok", deep()), "payload"),
    ("summary", lambda m, s: m.set_session_summary(s, BAD), "summary"),
    ("session model", lambda m, s: m.start_session(model=BAD), "model"),
    ("workspace", lambda m, s: m.list_recent_sessions("w\udcff"), "workspace"),
    ("search query", lambda m, s: m.search("q\udcff"), "query"),
    ("context task", lambda m, s: m.context("t\ud800"), "query"),
    ("Memory(5)", lambda m, s: Memory(5), "spec_dir"),
    ("Memory(spec, 5)", lambda m, s: Memory(m.spec_dir, 5), "project_dir"),
    ("Memory(None, 5)", lambda m, s: Memory(None, 5.0), "project_dir"),
    ("Memory(undecodable)", lambda m, s: Memory(Path(str(m.spec_dir) + "\udcff")), "spec_dir"),
]


@pytest.mark.parametrize("name,call,field", API, ids=[a[0] for a in API])
def test_api_refuses_naming_the_field_and_writes_nothing(mem, name, call, field):
    m, sid = mem
    before = snapshot(m.spec_dir)
    with pytest.raises(ValidationError) as err:
        call(m, sid)
    assert err.value.field is not None and err.value.field.startswith(field), err.value
    assert str(err.value).startswith(err.value.field)
    assert len(str(err.value)) < 300  # a path 100,000 levels deep is not spelled out
    assert snapshot(m.spec_dir) == before


def test_a_folder_in_place_of_gotchas_md_is_a_storage_error_naming_it(spec_dir: Path):
    (spec_dir / "memory" / "gotchas.md").mkdir(parents=True)
    before = snapshot(spec_dir)
    with Memory(spec_dir) as m:
        for call in (m.load_gotchas, lambda: m.append_gotcha("x"), m.summary):
            with pytest.raises(StorageError) as err:
                call()
            assert "gotchas.md" in str(err.value)
    assert snapshot(spec_dir) == before
    done = run_cli("gotchas", "--spec-dir", str(spec_dir))
    assert done.returncode == 1 and "graphmem: error:" in done.stderr and "gotchas.md" in done.stderr
    assert "Traceback" not in done.stderr
    assert snapshot(spec_dir) == before


def test_cli_refuses_naming_the_field_and_writes_nothing(mem):
    m, sid = mem
    spec = str(m.spec_dir)
    Path(spec + "\udcff").mkdir()  # a folder whose name is not UTF-8 (Linux allows it)
    cases = [  # argv (bytes the shell could pass: undecodable ones arrive as lone surrogates)
        (["sessions", "--workspace", "w\udcff", "--spec-dir", spec], "workspace"),
        (["sessions", "--limit", "0", "--spec-dir", spec], "limit"),
        (["consolidate", "--sessions", "0", "--spec-dir", spec], "sessions"),
        (["gotchas", "--spec-dir", spec + "\udcff"], "spec_dir"),
        (["search", "q\udcff", "--spec-dir", spec], "query"),
    ]
    before = snapshot(m.spec_dir.parent)
    for argv, field in cases:
        done = run_cli(*[a.encode("utf-8", "surrogateescape").decode("utf-8", "surrogateescape")
                         for a in argv])
        assert done.returncode == 2, (argv, done.stderr)
        assert f"graphmem: error: {field}:" in done.stderr, (argv, done.stderr)
        assert "Traceback" not in done.stderr
    assert snapshot(m.spec_dir.parent) == before


MCP = [  # (tool, arguments, text the error must name)
    ("add_gotcha", {"text": BAD}, "gotcha"),  # named as the API names it
    ("add_pattern", {"text": 5}, "text"),
    ("save_session_insights", {"session_num": 2, "insights": {"what_worked": [BAD]}}, "insights"),
    ("save_session_insights", {"session_num": 2, "insights": {"extra": {"k": BAD}}},
     "insights.extra.k"),
    ("save_session_insights", {"session_num": 2, "insights": {"extra": deep(150)}},
     "insights.extra"),
    ("save_session_insights", {"session_num": "2", "insights": {}}, "session_num"),
    ("save_session_insights", {"session_num": True, "insights": {}}, "session_num"),
    ("update_codebase_map", {"discoveries": {"b.py": BAD}}, "discoveries"),
    ("record_turn", {"role": "user", "content": BAD}, "content"),
    ("record_turn", {"role": "user", "content": "x", "model": BAD}, "model"),
    ("record_turn", {"role": "user", "content": "x", "tokens": "3"}, "tokens"),
    ("record_turn", {"role": "user", "content": "x", "tokens": True}, "tokens"),
    ("search_memory", {"query": "x", "limit": "3"}, "limit"),
    ("get_context", {"task": "x", "max_tokens": True}, "max_tokens"),
    ("list_sessions", {"limit": "5"}, "limit"),
]


def test_mcp_refuses_naming_the_field_and_writes_nothing(mem):
    m, sid = mem
    before = snapshot(m.spec_dir)

    async def steps(c):
        for tool, args, field in MCP:
            result = await c.call_tool(tool, args)
            assert result.is_error, (tool, args)
            assert f"graphmem: error: {field}" in _text(result), (tool, _text(result))
        # a refused first turn (no session id) leaves no session behind
        assert len(_data(await c.call_tool("list_sessions", {}))["sessions"]) == 1
    _session(build_server(m.spec_dir), steps)
    assert snapshot(m.spec_dir) == before


EVIL = "evil \x1b[31mRED\x1b[0m \x1b]0;retitled\x07 \x1b[2J\x9b31m \x08\x08 \u202eRTL \x1b]8;;http://x\x1b\\link"
CONTROL = ("\x1b", "\x07", "\x08", "\x9b", "\u202e")


def test_cli_prints_stored_text_without_terminal_sequences(spec_dir: Path):
    with Memory(spec_dir) as m:
        m.append_gotcha(EVIL)
        m.append_pattern(EVIL)
        m.update_codebase_map({"a.py": EVIL})
        m.save_session_insights(1, {"what_worked": [EVIL], EVIL: EVIL})
        sid = m.start_session()
        m.record_turn(sid, "user", EVIL)
        m.record_step(sid, EVIL, "failed", {"out": EVIL})
        m.set_session_summary(sid, EVIL)
    spec, project = str(spec_dir), str(spec_dir.parent.parent)
    for argv in (["gotchas", "--spec-dir", spec], ["patterns", "--spec-dir", spec],
                 ["map", "--spec-dir", spec], ["insights", "--spec-dir", spec],
                 ["session", sid, "--spec-dir", spec], ["sessions", "--spec-dir", spec],
                 ["search", "evil RED", "--project-dir", project],
                 ["context", "evil RED", "--project-dir", project],
                 ["session", "ses-\x1b[2Jnope", "--spec-dir", spec]):
        done = run_cli(*argv)
        out = done.stdout + done.stderr
        assert not [c for c in CONTROL if c in out], (argv, out)
        assert ("evil RED" in out and "RTL" in out) or "graphmem: error:" in out, (argv, out)
    exact = run_cli("gotchas", "--spec-dir", spec, "--json")  # --json stays the exact data
    import json
    assert json.loads(exact.stdout) == [EVIL]


def test_cli_shows_stored_markup_as_written(spec_dir: Path):
    """Text that looks like rich markup is text: ``[/]`` crashed map, insights and sessions."""
    odd = "closes [/] nothing, [red]not red[/red] [link=file:///etc]x"
    with Memory(spec_dir) as m:
        m.append_gotcha(odd)
        m.update_codebase_map({"a.py": odd})
        m.save_session_insights(1, {"what_worked": [odd], f"{odd} key": odd})
        sid = m.start_session()
        m.record_turn(sid, "user", odd)
    spec, project = str(spec_dir), str(spec_dir.parent.parent)
    for argv in (["gotchas", "--spec-dir", spec], ["map", "--spec-dir", spec],
                 ["insights", "--spec-dir", spec], ["sessions", "--spec-dir", spec],
                 ["session", sid, "--spec-dir", spec],
                 ["search", "closes nothing", "--project-dir", project]):
        done = run_cli(*argv, env={"COLUMNS": "300"})
        assert done.returncode == 0 and "Traceback" not in done.stderr, (argv, done.stderr)
        assert "closes [/] nothing, [red]not red[/red]" in done.stdout, (argv, done.stdout)
