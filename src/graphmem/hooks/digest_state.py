"""Where a session's digest stands (``<session>.state.json`` beside its spool), and the
detached worker that advances it. Standard library only (no ``pathlib``): the Stop hook imports it."""

from __future__ import annotations

import json
import os
import sys

from graphmem.agent_spool import read_state, state_file
from graphmem.hooks import spool

TYPE_CHECKING = False  # typing costs a hook process ~3 ms to import; mypy reads the names
if TYPE_CHECKING:
    from os import PathLike
    from typing import Any

    Project = str | PathLike[str]


def state_path(project: Project, session_id: str) -> str:
    """The digest state of one session."""
    return state_file(spool.spool_dir(project), spool.session_name(session_id))


def load_state(project: Project, session_id: str) -> dict[str, Any]:
    """The session's digest state (``offset`` in its spool, what was learned so far)."""
    return read_state(state_path(project, session_id))


def save_state(project: Project, session_id: str, state: dict[str, Any]) -> None:
    """Replace the state file atomically (a unique temp name, then rename)."""
    path = state_path(project, session_id)
    folder, name = os.path.split(path)
    tmp = os.path.join(folder, f".{name}.{os.getpid()}.tmp")
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write(json.dumps(state, ensure_ascii=False))
    os.replace(tmp, path)


def pending(project: Project, session_id: str) -> bool:
    """Whether the session's spool holds lines no digest has read yet."""
    try:
        size = os.stat(spool.spool_path(project, session_id)).st_size
    except FileNotFoundError:
        return False
    return size > int(load_state(project, session_id).get("offset", 0))


def pending_sessions(project: Project) -> list[str]:
    """The sessions of the project whose spool holds unread lines."""
    names = sorted(n[:-len(".jsonl")] for n in os.listdir(spool.spool_dir(project))
                   if n.endswith(".jsonl") and not n.startswith("."))
    return [n for n in names if pending(project, n)]


def worker_lock(project: Project) -> int:
    """An open descriptor on the project's digest lock (``digest.lock`` beside the spools)."""
    return os.open(os.path.join(spool.spool_dir(project), "digest.lock"), os.O_RDWR | os.O_CREAT, 0o600)


def try_lock(fd: int) -> bool:
    """Take the digest lock without waiting; whether it was free."""
    import fcntl

    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return False
    return True


def worker_running(project: Project) -> bool:
    """Whether a digest worker holds the project's lock (it will read every spool again
    before it exits, so lines appended now are not left behind)."""
    fd = worker_lock(project)
    try:
        if try_lock(fd):
            return False  # released when the descriptor closes
        return True
    finally:
        os.close(fd)


def start_worker(project: Project) -> int:
    """Start the digest worker detached (own session, no terminal, output to ``digest.log``),
    so the hook returns at once; the worker's pid. It is ``python -m
    graphmem.cli.digest_worker PROJECT``: ``digest.py`` with the search server's key, under which
    it keeps the briefing it computes (``brief_cache.py``)."""
    log = os.path.join(spool.spool_dir(project), "digest.log")
    argv = [sys.executable, "-P", "-m", "graphmem.cli.digest_worker", str(project)]
    actions = [(os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
               (os.POSIX_SPAWN_OPEN, 1, log,
                os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_NOFOLLOW, 0o600),
               (os.POSIX_SPAWN_DUP2, 1, 2)]
    return os.posix_spawn(sys.executable, argv, os.environ, file_actions=actions, setsid=True)
