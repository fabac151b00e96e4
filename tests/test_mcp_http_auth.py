"""The HTTP MCP edge as a stranger meets it: the real server process, the SDK's client, raw requests."""

from __future__ import annotations

import os
import socket
import stat
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import anyio
import httpx
import httpx2
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from conftest import run_cli
from graphmem.serve.mcp_auth import allowed_hosts
from test_mcp import _data

INITIALIZE = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
              "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                         "clientInfo": {"name": "stranger", "version": "0"}}}


def _free_port(host: str) -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


@contextmanager
def _server(*args: str, host: str = "127.0.0.1", via: str | None = None):
    """``graphmem mcp --http HOST:PORT ...`` as a process; yields its URL (at ``via``) once it answers."""
    port = _free_port(host)
    proc = subprocess.Popen([sys.executable, "-m", "graphmem.cli", "mcp", *args,
                             "--http", f"{host}:{port}"], stderr=subprocess.PIPE, text=True)
    url = f"http://{via or host}:{port}/mcp"
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            assert proc.poll() is None, proc.stderr.read()
            try:
                httpx.get(url, timeout=1)
                break
            except httpx.TransportError:
                time.sleep(0.2)
        yield url
    finally:
        proc.terminate()
        proc.wait(timeout=20)


def _token(*extra: str) -> str:
    r = run_cli("mcp", "token", *extra)
    assert r.returncode == 0, r.stderr
    return r.stdout.strip()


def _post(url: str, token: str | None = None, **headers: str) -> httpx.Response:
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    return httpx.post(url, json=INITIALIZE, timeout=10,
                      headers={"Accept": "application/json, text/event-stream", **headers})


def _client(url: str, token: str) -> Client:
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"},
                              timeout=httpx2.Timeout(30, read=300))
    return Client(streamable_http_client(url, http_client=http))


def _refused(response: httpx.Response, status: int) -> None:
    """The status and a one-line JSON error: no server info, no tool, nothing of the memory."""
    assert response.status_code == status, (response.status_code, response.text)
    assert set(response.json()) == {"error"}
    assert "graphmem" not in response.text.lower().replace("graphmem mcp token", "")
    assert "tools" not in response.text and "serverInfo" not in response.text


def test_token_is_created_once_private_and_stable():
    home = Path(os.environ["GRAPHMEM_HOME"])
    first = _token()
    assert len(first) >= 32
    assert _token() == first
    path = home / "mcp_token"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    path.chmod(0o644)  # a token others could read is refused, not served with
    r = run_cli("mcp", "token")
    assert r.returncode != 0 and "0644" in r.stderr and "--rotate" in r.stderr
    rotated = _token("--rotate")
    assert rotated != first and stat.S_IMODE(path.stat().st_mode) == 0o600


def test_http_needs_the_token_and_a_rotation_locks_the_old_one_out(spec_dir: Path):
    token = _token()
    with _server("--spec-dir", str(spec_dir)) as url:
        _refused(_post(url), 401)
        get = httpx.get(url, timeout=10)
        _refused(get, 401)
        assert get.headers["www-authenticate"].startswith("Bearer")
        _refused(_post(url, "wrong-" + token), 401)
        _refused(_post(url, token[:-1]), 401)
        _refused(_post(url, Authorization=f"Basic {token}"), 401)
        assert _post(url, token).status_code == 200

        async def works(t: str) -> None:
            async with _client(url, t) as c:
                _data(await c.call_tool("add_pattern", {"text": "Wrap handlers in a unit of work"}))
                assert _data(await c.call_tool("memory_summary", {}))["total_patterns"] == 1
        anyio.run(works, token)

        new = _token("--rotate")
        _refused(_post(url, token), 401)  # the running server reads the new token at once
        assert _post(url, new).status_code == 200
        anyio.run(works, new)
    assert (spec_dir / "memory" / "patterns.md").read_text().count("unit of work") == 1


def test_foreign_host_or_origin_is_refused_on_any_loopback_address(spec_dir: Path):
    token = _token()
    with _server("--spec-dir", str(spec_dir), host="127.0.0.2") as url:
        port = url.split(":")[2].split("/")[0]
        _refused(_post(url, token, Host=f"evil.example:{port}"), 421)
        _refused(_post(url, token, Host=f"127.0.0.1:{port}"), 421)
        _refused(_post(url, token, Origin="http://evil.example"), 403)
        _refused(_post(url, token, Origin=f"http://evil.example:{port}"), 403)
        assert _post(url, token, Origin=f"http://127.0.0.2:{port}").status_code == 200
        assert _post(url, token, Host=f"localhost:{port}").status_code == 200


def test_allow_remote_help_no_longer_promises_an_open_server():
    r = run_cli("mcp", "--help")
    assert r.returncode == 0
    assert "no authentication" not in r.stdout
    assert "token" in r.stdout and "--root" in r.stdout


def test_rotate_outside_token_is_refused_naming_it(spec_dir: Path):
    r = run_cli("mcp", "--spec-dir", str(spec_dir), "--rotate")
    assert r.returncode != 0 and "--rotate" in r.stderr
    assert not (Path(os.environ["GRAPHMEM_HOME"]) / "mcp_token").exists()



def test_allowed_hosts_name_the_bind_address():
    assert allowed_hosts("127.0.0.1", 8765) == {"127.0.0.1:8765", "localhost:8765"}
    assert allowed_hosts("127.0.0.2", 80) == {"127.0.0.2:80", "localhost:80"}
    assert allowed_hosts("::1", 9) == {"[::1]:9", "localhost:9"}
    assert allowed_hosts("localhost", 9) == {"localhost:9", "127.0.0.1:9", "[::1]:9"}
    assert allowed_hosts("10.1.2.3", 9) == {"10.1.2.3:9"}
    assert allowed_hosts("0.0.0.0", 9) is None  # any name the machine is reached by, at the port


def test_allow_remote_still_requires_the_token(spec_dir: Path):
    token = _token()
    with _server("--spec-dir", str(spec_dir), "--allow-remote", host="0.0.0.0", via="127.0.0.1") as url:
        port = url.split(":")[2].split("/")[0]
        _refused(_post(url), 401)
        _refused(_post(url, "x" + token), 401)
        _refused(_post(url, token, Host=f"evil.example:{int(port) + 1}"), 421)
        _refused(_post(url, token, Origin="http://evil.example"), 403)
        assert _post(url, token).status_code == 200
