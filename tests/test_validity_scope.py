"""retire and supersede act on a memory of the spec they are given, and say where it is when it
is not there: an id from another project whose spec folder has the same relative name was
retired in the wrong spec (the check compared the spec's name only)."""

from __future__ import annotations

import subprocess

import pytest

from conftest import run_cli
from graphmem import Memory
from graphmem.errors import NotFoundError


def repo(folder):
    (folder / "specs" / "001").mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(folder)], check=True)
    return folder / "specs" / "001"


def test_an_id_of_another_project_is_not_retired_here(tmp_path):
    a, b = repo(tmp_path / "a"), repo(tmp_path / "b")  # both name their spec specs/001
    with Memory(b) as mem:
        mem.append_gotcha("Project B caches forever")
        theirs = mem.search("caches forever", limit=1)[0].id
    with Memory(a) as mem:
        mem.append_gotcha("Project A logs everything")
        with pytest.raises(NotFoundError):
            mem.retire(theirs, "not ours to retire")
        with pytest.raises(NotFoundError):
            mem.supersede(theirs, "Project B caches for a day")
    assert not (a / "memory" / "validity.jsonl").exists()
    with Memory(b) as mem:
        assert [h.id for h in mem.search("caches forever", limit=1)] == [theirs]


def test_an_id_of_another_spec_of_the_project_names_that_spec(tmp_path):
    one = repo(tmp_path / "shop")
    two = one.parent / "002"
    two.mkdir()
    with Memory(two) as mem:
        mem.append_gotcha("Webhooks retry for three days")
        found = mem.search("webhooks retry", limit=1)[0]
    out = run_cli("retire", found.id, "--reason", "x", "--spec-dir", str(one))
    assert out.returncode == 4, out.stderr
    assert f"no memory {found.id} in {one}; it is in {two}" in out.stderr
    assert "--spec-dir" in out.stderr


def test_retire_from_a_project_wide_mcp_server_names_the_spec_to_pass(tmp_path):
    from graphmem.serve.mcp_server import build_server
    from test_mcp import _session, _text

    one = repo(tmp_path / "shop")
    with Memory(one) as mem:
        mem.append_gotcha("Webhooks retry for three days")
        found = mem.search("webhooks retry", limit=1)[0]

    async def steps(c):
        text = _text(await c.call_tool("retire_memory", {"id": found.id, "reason": "x"}))
        assert text.startswith("graphmem: error: spec_dir: ") and f"it is in {one}" in text, text
    _session(build_server(None, tmp_path / "shop"), steps)  # a server for the project only
