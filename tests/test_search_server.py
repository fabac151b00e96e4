"""``graphmem search-server``: the warm path of ``graphmem search`` (real processes, real socket)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

from conftest import run_cli

from graphmem import Memory
from graphmem.search_server import ask, socket_path


def _start(home: Path, *args: str) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-m", "graphmem.cli", "search-server", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=dict(os.environ, GRAPHMEM_HOME=str(home)))
    line = proc.stdout.readline()  # printed once the models are loaded and the socket listens
    assert "graphmem search server on" in line, proc.stderr.read()
    return proc


def _raw(path: Path, payload: bytes) -> dict:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(30)
        s.connect(str(path))
        s.sendall(payload)
        return json.loads(s.makefile().readline())


def test_search_goes_through_the_server_and_falls_back_without_it(tmp_path: Path, isolated_env):
    home = isolated_env
    spec = tmp_path / "shop" / "specs" / "001"
    spec.mkdir(parents=True)
    with Memory(spec) as m:
        m.append_gotcha("Stripe webhooks arrive twice; make the handler idempotent")
        m.append_gotcha("The CI runner kills any job that prints nothing for ten minutes")
    project = spec.parent.parent
    args = ("search", "payment notifications delivered more than once", "--project-dir",
            str(project), "--json")
    proc = _start(home, "--idle", "60")
    try:
        path = socket_path(home)
        assert path.exists() and (path.stat().st_mode & 0o777) == 0o600
        warm = run_cli(*args)
        cold = run_cli(*args, "--no-server")
        assert warm.returncode == 0 and cold.returncode == 0, warm.stderr + cold.stderr
        assert json.loads(warm.stdout) == json.loads(cold.stdout)
        assert json.loads(warm.stdout)[0]["text"].startswith("Stripe webhooks")
        with Memory(spec) as m:  # a write by another process is seen by the running server
            m.append_gotcha("Refunds over 500 EUR need a second approver")
        hits = ask(home, {"query": "refund approval", "scope": "spec", "spec_dir": str(spec),
                          "limit": 1})
        assert hits["hits"][0]["text"].startswith("Refunds over 500 EUR")
        # errors come back as the in-process path reports them
        bad = run_cli("search", "", "--project-dir", str(project))
        assert bad.returncode == 2 and "query" in bad.stderr and "Traceback" not in bad.stderr
        missing = run_cli("search", "x", "--project-dir", str(tmp_path / "nowhere"))
        assert missing.returncode == 4 and "not found" in missing.stderr
        # garbage on the socket gets an error, and a request for another home is refused
        assert _raw(path, b"not json\n")["exit"] == 2
        assert _raw(path, json.dumps({"query": "x", "home": "/elsewhere",
                                      "project_dir": str(project)}).encode() + b"\n") == \
            {"wrong_home": True}
        assert ask(tmp_path / "other-home", {"query": "x", "project_dir": str(project)}) is None
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
    assert not socket_path(home).exists()  # removed on the way out
    # a socket left by a killed server: the CLI searches in-process
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.bind(str(socket_path(home)))
    try:
        again, cold = run_cli(*args), run_cli(*args, "--no-server")
        assert again.returncode == 0 and json.loads(again.stdout) == json.loads(cold.stdout)
    finally:
        socket_path(home).unlink()


def test_server_exits_when_idle_and_refuses_a_second_one(isolated_env):
    home = isolated_env
    proc = _start(home, "--idle", "3")
    try:
        second = run_cli("search-server", "--idle", "3")
        assert second.returncode != 0 and "already answers" in second.stderr
    finally:
        assert proc.wait(timeout=60) == 0
    assert not socket_path(home).exists()
    bad = run_cli("search-server", "--idle", "0")
    assert bad.returncode == 2 and "--idle" in bad.stderr
