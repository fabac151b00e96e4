"""The CLI's side of the warm search server: find it, ask it, start it. Standard library only.

``graphmem search`` and ``graphmem context`` must answer in a fraction of a second, but loading
pydantic, numpy, onnxruntime and the embedding model takes a new process about a second. So the
CLI asks a ``graphmem search-server`` of the same home and settings over a Unix socket; when none
answers it searches in-process and then starts one, detached, for the next call.

One server serves one *key*: a digest of the resolved home, every environment variable that can
change a result, the config and env files' contents, and the graphmem installation. Other
settings give another key, so another socket, so never an answer computed under settings the
caller does not have (and a server whose code files change under it stops answering). Files, per
key, in ``$TMPDIR``: ``.sock`` (0600), ``.lock`` (flock held
by the live server, with its pid), ``.log`` (its stderr), ``.err`` (why it failed to start; no
new server is started for ``SPAWN_BACKOFF`` seconds after that).

This module must stay cheap to import: it runs before every CLI search and in every hook that asks
the server, so its own paths are strings (``pathlib`` is imported only for callers of ``ServerConfig.socket`` etc.).
"""

from __future__ import annotations

import json
import os
import socket
import sys

from graphmem.config_sources import DEFAULT_IDLE, default_home, raw_settings, read_sources
from graphmem.config_sources import SEARCH_SERVER_MODES as MODES
from graphmem.errors import ConfigError

TYPE_CHECKING = False  # typing costs a hook process ~3 ms to import; mypy reads the names
if TYPE_CHECKING:
    from pathlib import Path
    from typing import Any

# Environment variables that can change what a search returns (the settings' names and the
# vendors'); the server's own controls cannot, so they do not split servers.
PREFIXES = ("GRAPHMEM_", "GRAPHITI_", "OPENAI_", "ANTHROPIC_", "VOYAGE_", "AZURE_OPENAI_",
            "OLLAMA_", "FALKORDB_")
CONTROLS = ("GRAPHMEM_SEARCH_SERVER", "GRAPHMEM_SEARCH_SERVER_IDLE", "GRAPHMEM_HOOKS")
SPAWN_BACKOFF = 120.0  # seconds: a server that failed to start is not retried sooner


class ServerConfig:
    """Where the server for the current settings lives, and whether to use and start one."""

    def __init__(self, home: str, mode: str, idle: float, key: str):
        self.home, self.mode, self.idle, self.key = home, mode, idle, key
        base = os.environ.get("TMPDIR") or "/tmp"
        name = f"graphmem-{os.getuid()}-{key[:16]}"
        if len(os.path.join(base, name)) > 90:  # Unix socket paths are limited to ~107 bytes
            base = "/tmp"
        self.base = os.path.join(base, name)

    @property
    def socket(self) -> Path:
        """The Unix socket the server listens on."""
        return _path(self.base + ".sock")

    @property
    def lock(self) -> Path:
        """The lock file the live server holds (its pid inside)."""
        return _path(self.base + ".lock")

    @property
    def log(self) -> Path:
        """The server's stderr."""
        return _path(self.base + ".log")

    @property
    def err(self) -> Path:
        """Why the last server failed to start."""
        return _path(self.base + ".err")


def _path(name: str) -> Path:
    from pathlib import Path

    return Path(name)


def client_config(env: dict[str, str] | None = None, cwd: str | None = None) -> ServerConfig | None:
    """The server config as ``Settings.load`` resolves it (the same sources, read by
    ``config_sources``), without loading pydantic.

    None when the sources cannot be read or a value is invalid: the caller then runs in-process,
    where ``Settings.load`` reports the problem with the field's name.
    """
    env = dict(os.environ if env is None else env)
    cwd = cwd or os.getcwd()
    try:
        sources = read_sources(env, cwd=cwd)
        data = raw_settings(sources)
    except ConfigError:
        return None
    section = data.get("search_server", {})
    if not isinstance(section, dict):
        return None
    home = data.get("home")
    mode = section.get("mode", "auto")
    idle = section.get("idle", DEFAULT_IDLE)
    try:
        idle = float(idle)
    except (TypeError, ValueError):
        return None
    if mode not in MODES or not idle > 0 or not (home is None or isinstance(home, str)):
        return None
    if home is None:
        home = default_home()
    home = os.path.realpath(os.path.join(cwd, home))
    material: dict[str, Any] = dict(sources.files)
    material.update(home=home, code=code_stamp(), env=sorted(
        (k, v) for k, v in env.items() if k.startswith(PREFIXES) and k not in CONTROLS))
    key = _digest(json.dumps(material, sort_keys=True).encode("utf-8"))
    return ServerConfig(home, mode, idle, key)


def _digest(raw: bytes) -> str:
    import hashlib

    return hashlib.sha256(raw).hexdigest()


def code_roots() -> list[str]:
    """The folders graphmem's code is loaded from (``graphmem.providers`` may live apart)."""
    import importlib.util

    import graphmem

    roots = [os.path.dirname(graphmem.__file__)]
    providers = importlib.util.find_spec("graphmem.providers")
    if providers is not None and providers.submodule_search_locations:
        roots += [p for p in providers.submodule_search_locations if p not in roots]
    return roots


def code_stamp() -> str:
    """Which graphmem installation runs. (A server whose own files change under it stops
    answering: see ``search_server``.)"""
    import graphmem

    return f"{graphmem.__version__}:{sys.executable}:{code_roots()}"


def ask(cfg: ServerConfig, request: dict[str, Any], timeout: float = 60.0) -> dict[str, Any] | None:
    """The server's answer, or None when no server of ours listens (stale socket, none, dying)."""
    path = cfg.base + ".sock"
    request = dict(request, key=cfg.key)
    try:
        if os.stat(path).st_uid != os.getuid():  # never talk to another user's socket
            return None
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(timeout)
            s.connect(path)
            s.sendall(json.dumps(request).encode("utf-8") + b"\n")
            data = b""
            while not data.endswith(b"\n"):
                chunk = s.recv(1 << 16)
                if not chunk:
                    break
                data += chunk
        answer = json.loads(data) if data else None
    except (OSError, ValueError):
        return None
    return answer if isinstance(answer, dict) else None


def holder(cfg: ServerConfig) -> int | None:
    """The pid of the server holding ``cfg``'s lock (running or still loading), else None."""
    import fcntl

    try:
        fd = os.open(cfg.base + ".lock", os.O_RDWR | os.O_NOFOLLOW)
    except OSError:
        return None  # no lock file: no server (a server creates it)
    try:
        if os.fstat(fd).st_uid != os.getuid():
            return None  # another user's file: not our server (and ``spawn`` will not start one)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            try:
                return int(os.pread(fd, 32, 0).split()[0])
            except (OSError, ValueError, IndexError):
                return -1  # held, pid not written yet
        fcntl.flock(fd, fcntl.LOCK_UN)
        return None
    finally:
        os.close(fd)


def _ours(path: str) -> bool:
    """Absent, or a file of ours that is not a link: ``$TMPDIR`` is shared with other users, who
    could leave a file under our name to read the server's log or to hold its lock."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return True
    except OSError:
        return False
    return st.st_uid == os.getuid() and not os.path.islink(path)


def spawn(cfg: ServerConfig, replace: bool = False) -> int | None:
    """Start a detached server for ``cfg`` unless one holds the lock or one failed lately.

    Returns the new process id, or None. Two CLIs racing here may both start one: the loser
    finds the lock taken and exits at once (see ``search_server.serve``). ``replace``: the
    server holding the lock answered ``wrong_server`` and is exiting; the new one waits for its
    lock (``--replace``) instead of exiting, so the caller need not wait.
    """
    if cfg.mode != "auto" or (not replace and holder(cfg) is not None) or not all(
            _ours(cfg.base + ext) for ext in (".sock", ".lock", ".log", ".err")):
        return None
    try:
        import time

        if time.time() - os.stat(cfg.base + ".err").st_mtime < SPAWN_BACKOFF:
            return None
    except OSError:
        pass
    # -P: the caller's folder must not shadow modules; stdin/stdout are not the caller's, so a
    # tool that waits for the CLI's output to close is not kept waiting by the server.
    argv = [sys.executable, "-P", "-m", "graphmem.cli", "search-server", "--auto",
            *(["--replace"] if replace else [])]
    actions = [(os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
               (os.POSIX_SPAWN_OPEN, 1, cfg.base + ".log",
                os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600),
               (os.POSIX_SPAWN_DUP2, 1, 2)]
    try:
        return os.posix_spawn(sys.executable, argv, os.environ, file_actions=actions, setsid=True)
    except OSError:
        return None
