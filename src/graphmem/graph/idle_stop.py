"""The embedded FalkorDB's idle watcher: ``python -m graphmem.graph.idle_stop HOME PID IDLE``.

``server.EmbeddedServer`` starts one beside every server it starts (and again when it finds a
server nobody watches). It asks the server every ``IDLE / 20`` seconds (at most 15 s) how many
graph queries it has run (``INFO commandstats``: ``GRAPH.*`` calls other than ``GRAPH.LIST``,
so status checks and its own questions do not count) and records the time of the last change in
``idle.json``. After ``IDLE`` seconds without one it stops the server the way ``graphmem db
stop`` does (log compacted, SIGTERM), under the start lock and only if still nothing ran, then
records ``last-stop.json`` with reason ``idle``. It exits as soon as the server is gone,
whoever stopped it (it waits on a pidfd where Linux has them), or replaced by another.
"""

from __future__ import annotations

import functools
import os
import select
import sys
import time
from typing import Any

from ..settings import Settings
from .server import EmbeddedServer, sync_client

MAX_INTERVAL = 15.0


def graph_calls(client: Any) -> int:
    """Graph queries the server has run since it started (status checks left out)."""
    stats = client.info("commandstats")
    return sum(int(v.get("calls", 0)) for k, v in stats.items()
               if k.startswith("cmdstat_graph.") and k != "cmdstat_graph.list" and isinstance(v, dict))


def _unchanged(client: Any, count: int | None) -> bool:
    """Whether the server has still run ``count`` graph queries (a failed question: no)."""
    try:
        return graph_calls(client) == count
    except Exception:
        return False


def _pidfd(pid: int) -> int | None:
    try:
        return os.pidfd_open(pid)  # type: ignore[attr-defined,unused-ignore]
    except (AttributeError, OSError):
        return None


def _gone(pid: int, fd: int | None, wait: float) -> bool:
    """Wait up to ``wait`` seconds; True as soon as process ``pid`` has ended."""
    if fd is not None:
        return bool(select.select([fd], [], [], wait)[0])
    time.sleep(wait)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return True  # the pid now belongs to someone else's process
    return False


def watch(server: EmbeddedServer, pid: int, idle: float) -> str:
    """Watch server ``pid`` until it is gone or stopped for idleness -> what ended the watch."""
    interval = min(max(idle / 20, 0.05), MAX_INTERVAL)
    fd = _pidfd(pid)
    client = sync_client(server.endpoint(), timeout=5.0)
    last: int | None = None
    active = time.time()
    try:
        while True:
            if _gone(pid, fd, interval):
                return "the server ended"
            state = server._read_state()
            if not state or state.get("pid") != pid:
                return "the server was replaced"
            try:
                count = graph_calls(client)
            except Exception:  # busy loading, a dropped connection: ask again next time
                continue
            now = time.time()
            if count != last:
                last, active = count, now
                record = server.idle_state() or {}
                if record.get("watcher") == os.getpid():
                    server._write_private(server.idle_file, {**record, "last_active": active})
            elif now - active >= idle:
                if server.stop_if_idle(pid, functools.partial(_unchanged, client, last)):
                    return f"stopped after {idle:g}s without a graph query"
                active = now  # a query came in meanwhile: watch on
    finally:
        client.close()
        if fd is not None:
            os.close(fd)


def main(argv: list[str]) -> int:
    """Entry point: HOME PID IDLE."""
    home, pid, idle = argv[0], int(argv[1]), float(argv[2])
    # the home alone: the watcher runs in <home>/falkordb, where no graphmem.toml is read
    server = EmbeddedServer(Settings.load(env={"GRAPHMEM_HOME": home}))
    why = watch(server, pid, idle)
    print(f"{time.strftime('%Y-%m-%dT%H:%M:%S')} idle watcher of FalkorDB pid {pid}: {why}",
          flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
