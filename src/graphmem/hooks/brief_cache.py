"""The session briefing kept on disk, for a SessionStart that finds no warm search server.

A session starts exactly when the server is most likely cold (its idle exit, a reboot, an
upgrade), and starting one takes the hook ~0.7 s on a quiet machine, seconds under load. So the
last briefing computed for a project is kept in ``<project>/.graphmem/spool/briefing.json`` (the
spool folder ignores itself in git), written atomically wherever a briefing is computed: by the
warm server when it answers one, and by the digest worker once it has turned a session into
memories. A SessionStart hook that finds no server serves it, starts the server in the
background, and never waits for it.

The file says what the briefing was computed from, and it is served only while all of it is
unchanged (``stamp``):

- ``key``: the search server's key (the home, settings, environment and graphmem installation,
  ``cli/search_client``), so never a briefing made under settings the hook does not have
  (``GRAPHMEM_REVIEW=hold`` included);
- the project's memory as the index holds it: the database's instance, and the number of the
  project's rows and the latest generation that wrote one (any write, supersession, team pull or
  reindex of the project changes them);
- the size and time of the validity log of each of the project's memory folders (a retirement,
  a review's accept, reject or undo: searches read the log, the index is not written);
- the folder of the session insights (the briefing's recent work reads the files);
- git's ``HEAD`` (branch and commit): the briefing names files under their current names and
  marks the code that changed, so a commit, a checkout or a rebase makes it stale.

What it can miss: uncommitted edits to the working tree made since it was written (a file
deleted, renamed or changed without a commit); the digest worker rewrites it after each
session, and the first commit or checkout invalidates it. It holds what the live briefing
printed, so pending-review memories, ``<private>`` spans and secrets are no more in it than
there. Standard library only, read by the hook process (``cli/hook_command.py``).
"""

from __future__ import annotations

import json
import os

TYPE_CHECKING = False  # typing costs a hook process ~3 ms to import; mypy reads the names
if TYPE_CHECKING:
    from typing import Any, Awaitable, Callable

NAME = "briefing.json"
VERSION = 1
OWN = ".graphmem"  # the project's own memory folder (``facade/scope.py``)


class BadCache(ValueError):
    """The cache file is there but not one this module wrote (named, with the problem)."""


def cache_path(project: str) -> str:
    """Where the project's briefing is kept."""
    return os.path.join(project, OWN, "spool", NAME)


def stamp(project: str, home: str, project_key: str) -> dict[str, Any] | None:
    """What the project's briefing depends on now (see the module docstring); None when the
    index cannot be read (no stamp: nothing is served or written)."""
    import sqlite3

    db = os.path.join(home, "index.sqlite3")
    if not os.path.isfile(db):
        return None
    try:
        conn = sqlite3.connect(db, timeout=1.0, isolation_level=None)
        try:
            row = conn.execute("SELECT value FROM search_meta WHERE key='instance'").fetchone()
            instance = row[0] if row else ""
            row = conn.execute("SELECT id FROM projects WHERE path=?", (project_key,)).fetchone()
            count, gen, specs = 0, 0, []
            if row is not None:
                count, gen = conn.execute("SELECT count(*), coalesce(max(gen), 0) FROM "
                                          "search_items WHERE project_id=?", (row[0],)).fetchone()
                specs = [r[0] for r in conn.execute(
                    "SELECT DISTINCT spec FROM search_items WHERE project_id=? AND spec IS NOT "
                    "NULL", (row[0],))]
        finally:
            conn.close()
    except sqlite3.Error:
        return None
    logs = {spec: _stat(os.path.join(project, spec, "memory", "validity.jsonl"))
            for spec in sorted({OWN, *(s for s in specs if isinstance(s, str))})}
    return {"index": [instance, count, gen], "validity": logs,
            "insights": _stat(os.path.join(project, OWN, "memory", "session_insights")),
            "head": git_head(project)}


def _stat(path: str) -> list[int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return [st.st_size, st.st_mtime_ns]


def git_head(project: str) -> str:
    """The branch and commit checked out in the repository holding ``project`` ('' outside
    one), read from the files: ``HEAD``, the ref's file, or ``packed-refs``."""
    folder = project
    while True:
        dot = os.path.join(folder, ".git")
        if os.path.exists(dot):
            break
        up = os.path.dirname(folder)
        if up == folder:
            return ""
        folder = up
    try:
        if os.path.isfile(dot):  # a worktree or a submodule: ``gitdir: <path>``
            with open(dot, encoding="utf-8") as fh:
                line = fh.read().strip()
            if not line.startswith("gitdir:"):
                return ""
            dot = os.path.join(folder, line[len("gitdir:"):].strip())
        with open(os.path.join(dot, "HEAD"), encoding="utf-8") as fh:
            head = fh.read().strip()
    except OSError:
        return ""
    if not head.startswith("ref:"):
        return head  # detached: the commit itself
    ref = head[len("ref:"):].strip()
    common = dot
    try:
        with open(os.path.join(dot, "commondir"), encoding="utf-8") as fh:
            common = os.path.join(dot, fh.read().strip())
    except OSError:
        pass
    for base in (dot, common):
        try:
            with open(os.path.join(base, ref), encoding="utf-8") as fh:
                return f"{head} {fh.read().strip()}"
        except OSError:
            pass
    try:
        with open(os.path.join(common, "packed-refs"), encoding="utf-8") as fh:
            for line in fh:
                sha, _, name = line.strip().partition(" ")
                if name == ref:
                    return f"{head} {sha}"
    except OSError:
        pass
    return head  # a branch with no commit yet


def load(project: str, key: str, home: str) -> str | None:
    """The cached briefing when it was made under ``key`` from what the project holds now
    (None: none, or stale); ``BadCache`` when the file is not one of ours."""
    path = cache_path(project)
    try:
        with open(path, "rb") as fh:
            raw = fh.read(1 << 20)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise BadCache(f"{path}: cannot be read: {exc}") from None
    try:
        data = json.loads(raw)
    except ValueError:
        raise BadCache(f"{path}: not JSON") from None
    if not isinstance(data, dict) or data.get("version") != VERSION or not isinstance(
            data.get("text"), str) or not isinstance(data.get("project_key"), str):
        raise BadCache(f"{path}: not a briefing cache of version {VERSION}")
    if data.get("key") != key:
        return None  # made under other settings or code
    now = stamp(project, home, data["project_key"])
    if now is None or now != data.get("stamp"):
        return None  # the memory or the checkout changed since
    return data["text"]


async def remember(project: str, key: str | None, home: str, project_key: str,
                   compute: Callable[[], Awaitable[str]]) -> str:
    """``compute()``'s briefing, kept on disk for ``key`` when nothing it depends on changed
    while it was computed (tried twice: the first briefing may settle writes still queued)."""
    text = ""
    for _ in range(2):
        before = stamp(project, home, project_key) if key else None
        text = await compute()
        if before is None:
            return text
        if stamp(project, home, project_key) == before:
            _write(project, {"version": VERSION, "key": key, "project_key": project_key,
                             "stamp": before, "text": text})
            return text
    return text


def _write(project: str, data: dict[str, Any]) -> None:
    """Replace the cache atomically, unless it already says the same."""
    from pathlib import Path

    from graphmem.files.atomic import atomic_write_json
    from graphmem.hooks.spool import spool_dir

    path = cache_path(project)
    try:
        with open(path, encoding="utf-8") as fh:
            if json.loads(fh.read()) == data:
                return
    except (OSError, ValueError):
        pass
    spool_dir(project)  # created with its .gitignore when missing
    atomic_write_json(Path(path), data, sync=False)  # a lost cache costs one slower start
