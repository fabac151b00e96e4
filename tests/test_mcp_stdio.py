"""The real server process (`python -m graphmem.cli mcp`) through the SDK's stdio and HTTP clients."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import anyio
import httpx
from mcp import Client, StdioServerParameters

from test_mcp import TOOLS, _data, _text


def _stdio(*args: str) -> StdioServerParameters:
    # The SDK passes only a few safe variables by default; the test's GRAPHMEM_HOME must reach it.
    return StdioServerParameters(command=sys.executable, args=["-m", "graphmem.cli", "mcp", *args],
                                 env=dict(os.environ))


def test_stdio_server_process_writes_searches_and_survives_bad_calls(spec_dir: Path):
    gotcha = "Run alembic upgrade head before the API tests or they hit a missing column"

    async def main():
        async with Client(_stdio("--spec-dir", str(spec_dir)), read_timeout_seconds=60) as c:
            assert {t.name for t in (await c.list_tools()).tools} >= TOOLS
            rep = _data(await c.call_tool("add_gotcha", {"text": gotcha}))
            assert rep["files"] == "written"
            bad = await c.call_tool("save_session_insights", {"session_num": -4, "insights": {}})
            assert bad.is_error and "session_num" in _text(bad)
            hits = _data(await c.call_tool("search_memory", {"query": "alembic upgrade head",
                                                             "scope": "spec"}))["hits"]
            assert hits and hits[0]["text"] == gotcha and hits[0]["kind"] == "gotcha"
            assert hits[0]["source"] == "specs/001-feature/memory/gotchas.md"  # project-relative
            assert hits[0]["local_path"] == str(spec_dir.resolve() / "memory" / "gotchas.md")
    anyio.run(main)
    assert gotcha in (spec_dir / "memory" / "gotchas.md").read_text()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_http_server_process_answers_on_loopback(spec_dir: Path):
    port = _free_port()
    proc = subprocess.Popen([sys.executable, "-m", "graphmem.cli", "mcp", "--spec-dir", str(spec_dir),
                             "--http", f"127.0.0.1:{port}"], stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            assert proc.poll() is None, proc.stderr.read()
            try:
                httpx.get(f"http://127.0.0.1:{port}/mcp", timeout=1)
                break
            except httpx.TransportError:
                time.sleep(0.2)

        from test_mcp_http_auth import _client, _token

        async def main():
            async with _client(f"http://127.0.0.1:{port}/mcp", _token()) as c:
                _data(await c.call_tool("add_pattern", {"text": "Wrap handlers in a unit of work"}))
                summary = _data(await c.call_tool("memory_summary", {}))
                assert summary["total_patterns"] == 1
        anyio.run(main)
    finally:
        proc.terminate()
        proc.wait(timeout=20)
    assert "Wrap handlers" in (spec_dir / "memory" / "patterns.md").read_text()


def test_cli_refuses_a_public_address_without_allow_remote(spec_dir: Path):
    from conftest import run_cli

    r = run_cli("mcp", "--spec-dir", str(spec_dir), "--http", "0.0.0.0:8765")
    assert r.returncode != 0
    assert "not a loopback address" in r.stderr and "--allow-remote" in r.stderr


def test_stdio_server_with_the_graph_on_writes_to_the_embedded_falkordb(spec_dir: Path, monkeypatch):
    from graphmem.cli.doctor import run_doctor
    from graphmem.graph.server import EmbeddedServer
    from graphmem.settings import Settings

    monkeypatch.setenv("GRAPHMEM_GRAPH", "on")
    try:
        async def main():
            async with Client(_stdio("--spec-dir", str(spec_dir)), read_timeout_seconds=60) as c:
                rep = _data(await c.call_tool("add_gotcha", {"text": "Celery beat must run once"}))
                assert rep["graph"] == "written", rep
                hits = _data(await c.call_tool("search_memory", {"query": "celery beat"}))["hits"]
                assert hits and hits[0]["text"] == "Celery beat must run once"
        anyio.run(main)
        graph = {r["name"]: r for r in run_doctor(spec_dir, None)["sections"]["graph"]}
        assert graph["server"]["status"] == "ok" and "embedded" in graph["server"]["detail"]
        assert graph["drift"]["detail"] == "1 item(s) in files, 1 in the graph", graph
    finally:
        EmbeddedServer(Settings.load()).stop()
