"""The HTTP MCP server against a local user without the token (issue 35 finding 4): running out
of descriptors does not stop it, and a half-sent request is closed within seconds.

The server runs as a process with a lowered descriptor limit (128, in proportion to the 1,100
half-sent requests that stopped it under the usual 1,024); every connection stays on loopback
and the counts and waits are bounded.
"""

from __future__ import annotations

import resource
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

from graphmem.serve.mcp_http import REQUEST_TIMEOUT
from test_mcp_http_auth import _free_port, _post, _token

LIMIT = 128
HALF_SENT = 170  # more than the server's descriptors, as 1,100 were more than 1,024
HALF = b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"


def _low_fd_limit() -> None:
    resource.setrlimit(resource.RLIMIT_NOFILE, (LIMIT, LIMIT))


def _start(spec_dir: Path) -> tuple[subprocess.Popen, str]:
    port = _free_port("127.0.0.1")
    proc = subprocess.Popen([sys.executable, "-m", "graphmem.cli", "mcp", "--spec-dir", str(spec_dir),
                             "--http", f"127.0.0.1:{port}"], stderr=subprocess.PIPE, text=True,
                            preexec_fn=_low_fd_limit)
    url = f"http://127.0.0.1:{port}/mcp"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        assert proc.poll() is None, proc.stderr.read()
        try:
            httpx.get(url, timeout=1)
            return proc, url
        except httpx.TransportError:
            time.sleep(0.2)
    raise AssertionError("the server did not answer")


def _stop(proc: subprocess.Popen) -> str:
    if proc.poll() is None:
        proc.terminate()
    try:
        return proc.communicate(timeout=20)[1]
    except subprocess.TimeoutExpired:
        proc.kill()
        return proc.communicate()[1]


def _half_open(port: int, n: int) -> list[socket.socket]:
    out = []
    for _ in range(n):
        s = socket.create_connection(("127.0.0.1", port), timeout=5)
        s.sendall(HALF)
        out.append(s)
    return out


def test_descriptor_exhaustion_does_not_stop_the_server(spec_dir: Path):
    token = _token()
    proc, url = _start(spec_dir)
    port = int(url.rsplit(":", 1)[1].split("/")[0])
    socks: list[socket.socket] = []
    try:
        socks = _half_open(port, HALF_SENT)
        time.sleep(2)  # the accept loop meets EMFILE meanwhile
        assert proc.poll() is None, f"the server exited: {_stop(proc)[-3000:]}"
        for s in socks:
            s.close()
        socks = []
        deadline = time.monotonic() + 30
        while True:  # it accepts again once descriptors are free
            try:
                r = _post(url, token)
                break
            except httpx.TransportError:
                assert time.monotonic() < deadline and proc.poll() is None, _stop(proc)[-3000:]
                time.sleep(0.5)
        assert r.status_code == 200, r.text
    finally:
        for s in socks:
            s.close()
        err = _stop(proc)
    assert "Traceback" not in err, err[-3000:]


def test_a_half_sent_request_is_closed_within_seconds(spec_dir: Path):
    proc, url = _start(spec_dir)
    port = int(url.rsplit(":", 1)[1].split("/")[0])
    try:
        # the socket's own timeout is only a hang guard: a server holding the request open
        # makes recv raise; the request deadline is what closes it (never before it passed)
        s = socket.create_connection(("127.0.0.1", port), timeout=REQUEST_TIMEOUT + 60)
        started = time.monotonic()
        s.sendall(HALF)
        got = s.recv(4096)  # b"" (closed) or a 408 answer, once the timeout passes
        waited = time.monotonic() - started
        s.close()
        assert got == b"" or got.startswith(b"HTTP/1.1 408"), got
        assert waited >= REQUEST_TIMEOUT - 1, waited
        # a body promised and never sent is cut the same way
        s = socket.create_connection(("127.0.0.1", port), timeout=REQUEST_TIMEOUT + 10)
        s.sendall(HALF + b"Content-Length: 1000\r\n\r\n{")
        got = s.recv(4096)
        s.close()
        assert got == b"" or got.startswith(b"HTTP/1.1 4"), got
        assert proc.poll() is None
    finally:
        _stop(proc)
