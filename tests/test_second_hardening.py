"""The smaller findings of issue 35 (finding 7): private append-only files and episode folders,
anchors written while ``anchors refresh`` runs kept, ``list_sessions`` inside the MCP roots, the
token file's mode checked while serving, and clear errors for a folder as token file and for
``anchors refresh --project-dir /``."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from graphmem import Memory
from test_code_freshness import PAY, project

from conftest import run_cli


def mode(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


@pytest.fixture
def umask_022():
    old = os.umask(0o022)
    yield
    os.umask(old)


def test_append_only_files_and_episode_folders_are_private(tmp_path, umask_022, monkeypatch):
    monkeypatch.setenv("GRAPHMEM_LOCAL_EMBEDDING_MODEL", "wordllama")
    root, spec = project(tmp_path, {"src/pay.py": PAY})
    with Memory(spec, root) as m:
        m.append_gotcha("`refund` in src/pay.py rounds cents, take 1")
        m.append_gotcha("`refund` in src/pay.py rounds cents, take 2")  # a validity event
        m.retire(m.search("refund")[0].id, "fixed")
        sid = m.start_session()
        m.record_turn(sid, "user", "the refund in src/pay.py rounds")
        m.record_step(sid, "run", "ok", {"argv": ["pytest"]})
        m.end_session(sid)
    mem = spec / "memory"
    episode = mem / "episodes" / sid
    files = [mem / "anchors.jsonl", mem / "validity.jsonl", episode / "turns.jsonl",
             episode / "steps.jsonl"]
    assert {str(p.relative_to(mem)): mode(p) for p in files} == \
        {str(p.relative_to(mem)): 0o600 for p in files}
    folders = [mem / "episodes", episode, mem / "episodes" / ".locks"]
    assert {str(p.relative_to(mem)): mode(p) for p in folders} == \
        {str(p.relative_to(mem)): 0o700 for p in folders}
    loose = {str(p.relative_to(mem)): oct(mode(p)) for p in mem.rglob("*")
             if p.is_file() and mode(p) & 0o077}
    assert loose == {}, loose


def test_anchors_refresh_refuses_the_filesystem_root():
    done = run_cli("anchors", "refresh", "--project-dir", "/")
    assert done.returncode == 2, (done.returncode, done.stderr[-2000:])
    assert "Traceback" not in done.stderr
    assert "project_dir" in done.stderr and "root" in done.stderr, done.stderr


@pytest.mark.parametrize("args", [(), ("--rotate",)])
def test_a_folder_as_token_file_is_a_clear_error(isolated_env: Path, args):
    (isolated_env / "mcp_token").mkdir(parents=True)
    done = run_cli("mcp", "token", *args)
    assert done.returncode != 0
    assert "Traceback" not in done.stderr, done.stderr[-2000:]
    assert "mcp_token" in done.stderr and ("folder" in done.stderr or "directory" in done.stderr.lower()), \
        done.stderr


def test_a_token_file_made_readable_while_serving_stops_being_accepted(spec_dir: Path,
                                                                      isolated_env: Path):
    from test_mcp_http_auth import _post, _server, _token

    token = _token()
    path = isolated_env / "mcp_token"
    with _server("--spec-dir", str(spec_dir)) as url:
        assert _post(url, token).status_code == 200
        os.chmod(path, 0o644)  # readable by every local user: no secret any more
        refused = _post(url, token)
        assert refused.status_code == 401, refused.text
        os.chmod(path, 0o600)
        assert _post(url, token).status_code == 200


def test_list_sessions_workspace_is_confined_to_the_roots(spec_dir: Path, tmp_path: Path):
    from graphmem.serve.mcp_server import build_server
    from test_mcp import _data, _session, _text

    elsewhere = tmp_path / "someone-elses-project"
    elsewhere.mkdir()
    with Memory(spec_dir) as m:  # a session of another workspace, in the same home's index
        m.start_session(workspace=str(elsewhere))
        m.start_session()
    got = {}

    async def steps(c):
        for name, ws in (("outside", str(elsewhere)), ("root", "/"), ("dots", str(spec_dir / "../../../..")),
                         ("inside", str(spec_dir.parent.parent))):
            got[name] = await c.call_tool("list_sessions", {"workspace": ws})
        got["default"] = await c.call_tool("list_sessions", {})

    _session(build_server(spec_dir), steps)
    for name in ("outside", "root", "dots"):
        assert got[name].is_error, (name, _text(got[name]))
        assert "workspace" in _text(got[name]) and "outside" in _text(got[name]), _text(got[name])
    assert not got["inside"].is_error, _text(got["inside"])
    assert len(_data(got["default"])["sessions"]) == 1


def test_anchors_refresh_keeps_records_of_items_written_while_it_runs(tmp_path, monkeypatch):
    from graphmem.code.anchor_file import book, compact
    from graphmem.code.anchors import backfill
    from graphmem.files.walk import held_ids, project_items
    from graphmem.identity import resolve_project

    monkeypatch.setenv("GRAPHMEM_LOCAL_EMBEDDING_MODEL", "wordllama")
    root, spec = project(tmp_path, {"src/pay.py": PAY})
    with Memory(spec, root) as m:
        m.append_gotcha("`refund` in src/pay.py rounds cents down")
    proj = resolve_project(spec, root)
    stale, _ = project_items(proj)  # what `anchors refresh` listed when it started
    mem = Memory(spec, root)

    def write(text: str) -> str:
        before = held_ids(proj)(str(spec))
        mem.append_gotcha(text)
        (new,) = held_ids(proj)(str(spec)) - before
        assert new in book(spec).records  # written with its anchors
        return new

    first = write("`refund` in src/pay.py keeps the order's currency")  # while refresh runs
    backfill(root, stale)  # compacts (the file names more items than the list): keeps it
    assert first in book(spec).records
    second = write("`Client.charge` in src/pay.py retries twice")
    backfill(root, stale, held_ids(proj))  # as the façade calls it
    assert {first, second} <= set(book(spec).records)

    held = held_ids(proj)

    def racing(spec_dir=str(spec)):
        ids = held(spec_dir)  # the files are read ...
        racing.late = write("`Client.charge` in src/pay.py logs the amount")  # ... then a write lands
        return ids

    compact(spec, live=racing)
    assert {first, second, racing.late} <= set(book(spec).records)
    mem.close()


def test_a_compaction_still_drops_items_the_files_no_longer_hold(tmp_path, monkeypatch):
    from graphmem.code.anchor_file import book
    from graphmem.code.anchors import backfill
    from graphmem.files.walk import held_ids, project_items
    from graphmem.identity import resolve_project

    monkeypatch.setenv("GRAPHMEM_LOCAL_EMBEDDING_MODEL", "wordllama")
    root, spec = project(tmp_path, {"src/pay.py": PAY})
    with Memory(spec, root) as m:
        m.append_gotcha("`refund` in src/pay.py rounds cents down")
        m.append_gotcha("`Client.charge` in src/pay.py retries twice")
    gone = {i.id for i in Memory(spec, root).items() if "retries" in i.text}
    path = spec / "memory" / "gotchas.md"
    path.write_text("".join(ln for ln in path.read_text().splitlines(keepends=True)
                            if "retries" not in ln))
    proj = resolve_project(spec, root)
    items, _ = project_items(proj)
    backfill(root, items, held_ids(proj))
    assert gone and not gone & set(book(spec).records)
    assert len(book(spec).records) == 1
