"""A project's own memory, without a spec folder: ``Memory(None, project)``, the CLI with no
``--spec-dir`` and the MCP tools given only ``project_dir`` write ``<project>/.graphmem/memory/``
in the reference layout; spec folders work as before and a project search covers both."""

from __future__ import annotations

import json

import pytest

from conftest import run_cli
from graphmem import Memory, ValidationError
from test_code_freshness import PAY, commit, git, project


def test_project_memory_is_written_in_the_reference_layout_and_anchored(tmp_path):
    root, spec = project(tmp_path, {"src/pay.py": PAY})
    with Memory(None, root) as m:
        assert m.spec_dir == root.resolve() / ".graphmem"
        m.append_gotcha("refund() in src/pay.py must round half-even, never half-up.")
        m.update_codebase_map({"src/pay.py": "refunds and the payment client"})
        m.save_session_insights(1, {"subtasks_completed": ["refunds"], "discoveries": {}})
    with Memory(spec) as s:
        s.append_gotcha("The spec folder's own gotcha about the staging proxy.")
    mem = root / ".graphmem" / "memory"
    assert (mem / "gotchas.md").is_file() and (mem / "codebase_map.json").is_file()
    # a committed memory's session file names its writer (files/session_names.py)
    assert [p.name[:12] for p in (mem / "session_insights").glob("session_*.json")] == ["session_001-"]
    assert (mem / "anchors.jsonl").read_text().count("src/pay.py") >= 1  # anchored to the code
    with Memory(None, root) as m:
        hits = m.search("refund rounding half-even", limit=5)
        assert hits[0].spec == ".graphmem" and hits[0].metadata["freshness"]["state"] == "current"
        specs = {h.spec for h in m.search("gotcha staging proxy refund", limit=20)}
        assert specs >= {".graphmem", "specs/001"}  # a project search covers both
        about = m.about("src/pay.py")
        assert any("half-even" in c["text"] for c in about["current"])
    with Memory(spec) as s:  # a spec folder keeps to itself, as before
        assert s.load_gotchas() == ["The spec folder's own gotcha about the staging proxy."]


def test_the_project_memory_follows_the_code_when_committed(tmp_path):
    root, _ = project(tmp_path, {"src/pay.py": PAY})
    with Memory(None, root) as m:
        m.append_gotcha("refund() in src/pay.py must round half-even.")
    commit(root, "memory")  # committed with the code, as a later clone would get it
    tracked = git(root, "ls-files").splitlines()
    assert ".graphmem/memory/gotchas.md" in tracked and ".graphmem/.gitignore" in tracked
    assert not [p for p in tracked if p.endswith(".lock") or "/.locks/" in p]  # locks ignored
    git(root, "mv", "src/pay.py", "src/payments.py")
    commit(root, "rename")
    with Memory(None, root) as m:
        hit = m.search("refund half-even", limit=1)[0]
        # the memory folder is memory, not code: only src/ files are the project's code
        assert hit.metadata["freshness"]["state"] == "moved"


def test_cli_without_spec_dir_reads_and_writes_the_project_memory(tmp_path):
    root, spec = project(tmp_path, {"src/pay.py": PAY})
    with Memory(None, root) as m:
        m.append_gotcha("The nightly export needs the quokka cache warmed first.")
    out = run_cli("gotchas", "--json", cwd=root / "src")  # from a sub-folder: the same project
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == ["The nightly export needs the quokka cache warmed first."]
    found = run_cli("search", "quokka cache export", "--json", cwd=root)
    assert found.returncode == 0, found.stderr
    hit = json.loads(found.stdout)[0]
    out = run_cli("retire", hit["id"], "--reason", "the cache is gone", "--json", cwd=root)
    assert out.returncode == 0, out.stderr
    with Memory(None, root) as m:
        assert m.search("quokka cache export", limit=5) == []
    assert run_cli("gotchas", "--spec-dir", str(spec), "--json").stdout.strip() == "[]"


def test_garbage_into_the_project_memory_is_refused_and_writes_nothing(tmp_path):
    root, _ = project(tmp_path, {"src/pay.py": PAY})
    with Memory(None, root) as m:
        for call, field in ((lambda: m.append_gotcha(5), "gotcha"),
                            (lambda: m.update_codebase_map({"a.py": 7}), "discoveries"),
                            (lambda: m.save_session_insights(-1, {}), "session_num")):
            with pytest.raises(ValidationError) as err:
                call()
            assert field in str(err.value)
    assert not (root / ".graphmem" / "memory").exists() or not any(
        p.is_file() and p.name in ("gotchas.md", "codebase_map.json")
        for p in (root / ".graphmem" / "memory").rglob("*"))
    with pytest.raises(ValidationError) as err:
        Memory(None, 5.0)
    assert err.value.field == "project_dir"


def test_mcp_tool_given_only_project_dir_writes_the_project_memory(tmp_path):
    import anyio
    from mcp import Client

    from graphmem.serve.mcp_server import build_server

    root, _ = project(tmp_path, {"src/pay.py": PAY})

    async def main():
        async with Client(build_server(project_dir=root)) as client:
            res = await client.call_tool("add_gotcha", {"text": "Ports below 1024 need root."})
            assert not res.is_error, res.content

    anyio.run(main)
    assert "Ports below 1024 need root." in (root / ".graphmem" / "memory" / "gotchas.md").read_text()
