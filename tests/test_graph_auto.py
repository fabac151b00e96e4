"""The default graph mode ``auto`` (issue 33, item 6): the graph is used whenever a FalkorDB is
there (the embedded one after ``graphmem db start``, or a configured server), the local index
alone otherwise, silently; the embedded server stops when idle and leaves no process behind."""

from __future__ import annotations

import json
import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from conftest import run_cli
from graphmem import Memory, Settings
from graphmem.errors import ConfigError
from graphmem.graph import presence


def _running(pid: int) -> bool:
    """A live process (not gone, not a zombie)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[-1].split()[0] not in ("Z", "X")


def _wait(cond, timeout: float = 30.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if cond():
            return True
        time.sleep(0.05)
    return cond()


def _pids(home: Path) -> tuple[int, int]:
    """(server pid, idle watcher pid) of the home's embedded server."""
    state = json.loads((home / "falkordb" / "server.json").read_text())
    idle = json.loads((home / "falkordb" / "idle.json").read_text())
    assert idle["server"] == state["pid"]
    return state["pid"], idle["watcher"]


@pytest.fixture
def auto(monkeypatch, isolated_env):
    """The default mode (nothing set), the offline wordllama embedder, a 2 s idle stop."""
    monkeypatch.delenv("GRAPHMEM_GRAPH", raising=False)
    monkeypatch.setenv("GRAPHMEM_LOCAL_EMBEDDING_MODEL", "wordllama")
    monkeypatch.setenv("GRAPHMEM_GRAPH_IDLE", "2")
    presence.forget_probes()
    yield isolated_env
    presence.forget_probes()


def test_auto_is_the_default_and_without_a_server_touches_nothing(auto, spec_dir):
    assert Settings.load().graph.mode == "auto"
    code = (
        "import sys\n"
        "from graphmem import Memory\n"
        f"m = Memory({str(spec_dir)!r})\n"
        "r = m.append_gotcha('the billing job retries forever')\n"
        "hits = m.search('billing job')\n"
        "print(r.graph, len(hits), sorted(n for n in ('redis', 'falkordb', 'graphiti_core', "
        "'graphmem.graph.store', 'graphmem.graph.server') if n in sys.modules))\n"
        "m.close()\n")
    import subprocess

    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    # written to the files and the index, not to a graph; no graph client or server code loaded
    assert out.stdout.split() == ["off", "1", "[]"], out.stdout
    assert "graph" not in out.stderr.lower(), out.stderr  # silently
    assert not (auto / "falkordb").exists()
    assert not (spec_dir / "memory" / "graph_outbox.jsonl").exists()


def test_auto_uses_the_started_server_restarts_it_after_an_idle_stop_and_db_stop_ends_it(
        auto, spec_dir):
    r = run_cli("db", "start")
    assert r.returncode == 0, r.stderr
    with Memory(spec_dir) as mem:
        # (loading the embedder may take longer than the idle limit: then this write starts
        # the server again, as the later one does)
        assert mem.append_gotcha("the tax table loader needs utf-8").graph == "written"
        assert mem.drift()["missing"] == []  # in the graph
        first_server, first_watcher = _pids(auto)
        assert _running(first_server) and _running(first_watcher)

        # idle 2 s: the watcher stops the server and exits with it
        assert _wait(lambda: not _running(first_server)), "the idle server was not stopped"
        assert _wait(lambda: not _running(first_watcher)), "the idle watcher outlived its server"
        stop = json.loads((auto / "falkordb" / "last-stop.json").read_text())
        assert stop["reason"] == "idle" and stop["pid"] == first_server
        assert not (auto / "falkordb" / "server.json").exists()

        # `db start` turned it on: the next write starts it again, nothing is queued
        r2 = mem.append_gotcha("the cache expires after an hour")
        assert r2.graph == "written", r2.detail
        second_server, second_watcher = _pids(auto)
        assert second_server != first_server and _running(second_watcher)
        assert {h.text for h in mem.search("cache expires")} >= {"the cache expires after an hour"}
        assert mem.drift()["missing"] == []

        status = run_cli("db", "status")
        # (running: when it stops; under load it may have stopped already: when it did)
        assert ("stops after 2s without a graph query" in status.stdout
                or "stopped idle at" in status.stdout), status.stdout

        r3 = run_cli("db", "stop")  # (under load the 2 s idle stop may have come first)
        assert r3.returncode == 0 and "FalkorDB" in r3.stdout, r3.stderr
        assert not (auto / "falkordb" / "wanted").exists()
        assert _wait(lambda: not _running(second_server) and not _running(second_watcher))
        # stopped when asked: no longer used, and never started again on its own
        assert mem.append_gotcha("after the stop").graph == "off"
        assert not (auto / "falkordb" / "server.json").exists()
    assert not (spec_dir / "memory" / "graph_outbox.jsonl").exists()


def test_a_process_that_starts_the_server_itself_leaves_nothing_behind(auto, spec_dir):
    """Graph ``on``: a CLI write starts the server on its own and exits; the idle watcher stops
    the server 2 s later and no process of it is left."""
    r = run_cli("search", "anything", "--spec-dir", str(spec_dir), env={"GRAPHMEM_GRAPH": "on"})
    assert r.returncode == 0, r.stderr
    srv, watcher = _pids(auto)
    assert _running(srv) and _running(watcher)
    assert _wait(lambda: not _running(srv) and not _running(watcher)), "left running"
    assert json.loads((auto / "falkordb" / "last-stop.json").read_text())["reason"] == "idle"
    # graph `auto` and never `db start`: a stopped server is not started again by a write
    with Memory(spec_dir) as mem:
        assert mem.append_gotcha("no server wanted here").graph == "off"
    assert not (auto / "falkordb" / "server.json").exists()


def test_a_killed_watcher_is_replaced_by_the_next_process(auto):
    assert run_cli("db", "start").returncode == 0
    srv, watcher = _pids(auto)
    import os
    import signal

    os.kill(watcher, signal.SIGKILL)
    assert _wait(lambda: not _running(watcher))
    assert "no idle watcher" in run_cli("db", "status").stdout
    assert run_cli("db", "start").returncode == 0  # reuses the server, watches it again
    srv2, watcher2 = _pids(auto)
    assert srv2 == srv and watcher2 != watcher and _running(watcher2)
    assert _wait(lambda: not _running(srv) and not _running(watcher2))


class _Recorder:
    """An HTTP server on loopback that answers 500 to everything and counts the requests: where
    an OpenAI client would go if anything called one."""

    def __init__(self):
        self.requests: list[str] = []
        rec = self

        class Handler(BaseHTTPRequestHandler):
            def _any(self):
                rec.requests.append(self.path)
                self.send_response(500)
                self.end_headers()

            do_GET = do_POST = _any

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def test_auto_without_an_llm_writes_the_graph_and_calls_no_vendor(auto, spec_dir, monkeypatch):
    vendor = _Recorder()
    try:
        monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-a-real-key")
        monkeypatch.setenv("OPENAI_BASE_URL", vendor.url)
        assert run_cli("db", "start").returncode == 0
        with Memory(spec_dir) as mem:
            # free-text fields go through Graphiti's LLM extraction when an LLM is configured
            r = mem.save_session_insights(1, {"what_worked": ["pinning the tax table version"],
                                              "what_failed": ["caching the rates per request"],
                                              "recommendations_for_next_session": ["load once"]})
            assert r.graph == "written" and r.detail is None, (r.graph, r.detail)
            hits = mem.search("tax table rates", scope="project")
            assert hits and mem.drift()["missing"] == []
        assert vendor.requests == []
    finally:
        vendor.close()


def test_auto_with_an_unreachable_configured_server_falls_back_silently(auto, spec_dir, monkeypatch,
                                                                        caplog):
    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("GRAPHMEM_FALKORDB_URL", f"redis://127.0.0.1:{port}")
    caplog.set_level("INFO")
    with Memory(spec_dir) as mem:
        for n in range(3):
            assert mem.append_gotcha(f"the deploy lock {n} is per region").graph == "off"
        assert [h.text for h in mem.search("deploy lock 2")][0] == "the deploy lock 2 is per region"
    assert not [r for r in caplog.records if r.levelname in ("WARNING", "ERROR")]
    assert not (spec_dir / "memory" / "graph_outbox.jsonl").exists()
    assert not (auto / "falkordb").exists()  # nothing embedded was started instead


def test_doctor_says_the_graph_is_not_in_use_and_why(auto, spec_dir):
    r = run_cli("doctor", "--json", "--spec-dir", str(spec_dir))
    rows = json.loads(r.stdout)["sections"]["graph"]
    assert any("auto: not in use" in row["detail"] and "graphmem db start" in row["detail"]
               for row in rows), rows


@pytest.mark.parametrize("value", ["soon", "0", "-5"])
def test_a_bad_idle_setting_names_the_variable(auto, monkeypatch, value):
    monkeypatch.setenv("GRAPHMEM_GRAPH_IDLE", value)
    with pytest.raises(ConfigError, match="GRAPHMEM_GRAPH_IDLE"):
        Settings.load()
    r = run_cli("db", "start")
    assert r.returncode != 0 and "GRAPHMEM_GRAPH_IDLE" in r.stderr
    assert not (auto / "falkordb" / "server.json").exists()


def test_doctor_shows_when_the_started_server_stops(auto, spec_dir, monkeypatch):
    monkeypatch.setenv("GRAPHMEM_GRAPH_IDLE", "600")
    assert run_cli("db", "start").returncode == 0
    srv, watcher = _pids(auto)
    r = run_cli("doctor", "--json", "--spec-dir", str(spec_dir))
    rows = {row["name"]: row for row in json.loads(r.stdout)["sections"]["graph"]}
    assert "stops after 600s without a graph query" in rows["lifecycle"]["detail"], rows
    assert f"watcher pid {watcher}" in rows["lifecycle"]["detail"]
    assert rows["server"]["status"] == "ok"
    assert run_cli("db", "stop").returncode == 0
    assert _wait(lambda: not _running(srv) and not _running(watcher))
    r = run_cli("doctor", "--json", "--spec-dir", str(spec_dir))
    rows = {row["name"]: row for row in json.loads(r.stdout)["sections"]["graph"]}
    assert "auto: not in use" in rows["graph"]["detail"], rows


def test_auto_uses_a_configured_server_that_answers(auto, spec_dir, monkeypatch, tmp_path):
    """A FalkorDB named by URL (here another home's embedded one, over its unix socket) is probed
    once and used; this home starts nothing of its own."""
    from graphmem.graph import server

    other = server.EmbeddedServer(Settings.load(env={"GRAPHMEM_HOME": str(tmp_path / "other")}))
    ep = other.ensure()
    try:
        monkeypatch.setenv("GRAPHMEM_FALKORDB_URL", f"unix://{ep.unix_socket}")
        with Memory(spec_dir) as mem:
            assert mem.append_gotcha("the ledger export is nightly").graph == "written"
            assert mem.drift()["missing"] == []
        assert not (auto / "falkordb" / "server.json").exists()
    finally:
        other.stop()
