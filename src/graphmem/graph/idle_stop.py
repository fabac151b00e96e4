"""The embedded FalkorDB's idle watcher: ``python -m graphmem.graph.idle_stop HOME PID IDLE``.

``server.EmbeddedServer`` starts one beside every server it starts (and again when it finds a
server nobody watches). It asks the server every ``IDLE / 20`` seconds (at most 15 s) how many
graph queries it has run (``INFO commandstats``: ``GRAPH.*`` calls other than ``GRAPH.LIST``,
so status checks and its own questions do not count) and records the time of the last change in
``idle.json``. After ``IDLE`` seconds without one it stops the server the way ``graphmem db
stop`` does (log compacted, SIGTERM), under the start lock and only if still nothing ran, then
records ``last-stop.json`` with reason ``idle``. It exits as soon as the server is gone,
whoever stopped it (it waits on a pidfd where Linux has them), or replaced by another.

While it watches it uses the standard library alone (one unix socket speaking RESP): about
10 MB and a few milliseconds to start, so starting a server does not cost its users a second
Python's worth of imports; graphmem's settings and ``server`` are imported only to stop it.
"""

from __future__ import annotations

import functools
import json
import os
import select
import socket
import sys
import time
from pathlib import Path

MAX_INTERVAL = 15.0


class InfoClient:
    """``INFO commandstats`` over the server's unix socket (no password: the embedded server
    listens on a 0700 socket only)."""

    def __init__(self, path: str, timeout: float = 5.0):
        self.path, self.timeout = path, timeout
        self.sock: socket.socket | None = None

    def graph_calls(self) -> int:
        """Graph queries the server has run since it started (status checks left out)."""
        if self.sock is None:
            self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            self.sock.settimeout(self.timeout)
            try:
                self.sock.connect(self.path)
            except OSError:
                self.close()
                raise
        try:
            self.sock.sendall(b"*2\r\n$4\r\nINFO\r\n$12\r\ncommandstats\r\n")
            text = self._bulk()
        except (OSError, ValueError):
            self.close()
            raise
        total = 0
        for line in text.splitlines():
            name, _, fields = line.partition(":")
            if name.startswith("cmdstat_graph.") and name != "cmdstat_graph.list":
                stats = dict(f.split("=", 1) for f in fields.split(",") if "=" in f)
                total += int(stats.get("calls", 0))
        return total

    def _bulk(self) -> str:
        assert self.sock is not None
        buf = b""
        while b"\r\n" not in buf:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise OSError("connection closed")
            buf += chunk
        head, _, rest = buf.partition(b"\r\n")
        if not head.startswith(b"$"):
            raise ValueError(f"unexpected reply {head[:80]!r}")
        size = int(head[1:])
        while len(rest) < size + 2:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise OSError("connection closed")
            rest += chunk
        return rest[:size].decode("utf-8", "replace")

    def close(self) -> None:
        """Close the socket (the next question opens a new one)."""
        if self.sock is not None:
            self.sock.close()
            self.sock = None


def _unchanged(client: InfoClient, count: int | None) -> bool:
    """Whether the server has still run ``count`` graph queries (a failed question: no)."""
    try:
        return client.graph_calls() == count
    except (OSError, ValueError):
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
    except (ProcessLookupError, PermissionError):  # gone, or the pid is someone else's now
        return True
    return False


def _read(path: Path) -> dict:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _record(path: Path, data: dict) -> None:
    """Replace ``idle.json`` (0600) in one rename; bookkeeping only, so failures are ignored."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(json.dumps(data))
        os.replace(tmp, path)
    except OSError:
        tmp.unlink(missing_ok=True)


def _stop(home: str, pid: int, still_idle) -> bool:
    """Stop server ``pid`` as ``graphmem db stop`` does, if ``still_idle()`` under the lock."""
    from ..settings import Settings
    from .server import EmbeddedServer

    # the home alone: the watcher runs in <home>/falkordb, where no graphmem.toml is read
    return EmbeddedServer(Settings.load(env={"GRAPHMEM_HOME": home})).stop_if_idle(pid, still_idle)


def watch(home: str, pid: int, idle: float) -> str:
    """Watch server ``pid`` of ``home`` until it is gone or stopped for idleness -> what ended
    the watch."""
    root = Path(home) / "falkordb"
    state_file, idle_file = root / "server.json", root / "idle.json"
    interval = min(max(idle / 20, 0.05), MAX_INTERVAL)
    fd = _pidfd(pid)
    client = InfoClient(str(_read(state_file).get("socket") or root / "falkordb.sock"))
    last: int | None = None
    active = time.time()
    try:
        while True:
            if _gone(pid, fd, interval):
                return "the server ended"
            if _read(state_file).get("pid") != pid:
                return "the server was replaced"
            try:
                count = client.graph_calls()
            except (OSError, ValueError):  # busy loading, a dropped connection: ask again
                continue
            now = time.time()
            if count != last:
                last, active = count, now
                record = _read(idle_file)
                if record.get("watcher") == os.getpid():
                    _record(idle_file, {**record, "last_active": active})
            elif now - active >= idle:
                if _stop(home, pid, functools.partial(_unchanged, client, last)):
                    return f"stopped after {idle:g}s without a graph query"
                active = now  # a query came in meanwhile: watch on
    finally:
        client.close()
        if fd is not None:
            os.close(fd)


def main(argv: list[str]) -> int:
    """Entry point: HOME PID IDLE."""
    home, pid, idle = argv[0], int(argv[1]), float(argv[2])
    why = watch(home, pid, idle)
    print(f"{time.strftime('%Y-%m-%dT%H:%M:%S')} idle watcher of FalkorDB pid {pid}: {why}",
          flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
