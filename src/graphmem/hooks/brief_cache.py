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
- the size and time of every file the briefing names: it names files under their current
  names, leaves gone ones out and marks the code that changed, so an edit, a rename, a deletion
  or a checkout touching one of them makes it stale, committed or not (a commit elsewhere does
  not).

What it can miss: a file the briefing left out because it was gone when it was written, and that
came back since (a checkout of an older branch); the digest worker rewrites the briefing after
each session, the server whenever it answers one. It holds what the live briefing printed, so
pending-review memories, ``<private>`` spans and secrets are no more in it than there.
Standard library only, read by the hook process (``cli/hook_command.py``).
"""

from __future__ import annotations

import json
import os
import re

TYPE_CHECKING = False  # typing costs a hook process ~3 ms to import; mypy reads the names
if TYPE_CHECKING:
    from typing import Any, Awaitable, Callable

NAME = "briefing.json"
VERSION = 1
OWN = ".graphmem"  # the project's own memory folder (``facade/scope.py``)
MAX_FILES = 64  # names in a briefing whose files are checked, at most
# a relative file name (``README.md``, ``src/pay.py``): a dot and a suffix, no scheme or spaces
_NAME = re.compile(r"(?<![\w./@+~:-])[\w@+~-][\w.@+~-]*(?:/[\w.@+~-]+)*\.\w+(?![\w/])")
RECENT_NS = 50_000_000  # a named file changed this close to the briefing's start: not kept


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
        conn = sqlite3.connect(db, timeout=0.2, isolation_level=None)  # readers never wait in WAL
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
    except (sqlite3.Error, OSError):
        return None
    logs = {spec: _stat(os.path.join(project, spec, "memory", "validity.jsonl"))
            for spec in sorted({OWN, *(s for s in specs if isinstance(s, str))})}
    return {"index": [instance, count, gen], "validity": logs,
            "insights": _stat(os.path.join(project, OWN, "memory", "session_insights"))}


def named_files(project: str, text: str) -> dict[str, list[int] | None]:
    """The size and time of each file of the project ``text`` names (None: not there)."""
    names = [n for n in dict.fromkeys(_NAME.findall(text)) if ".." not in n.split("/")]
    return {n: _stat(os.path.join(project, n)) for n in names[:MAX_FILES]}


def _stat(path: str) -> list[int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return [st.st_size, st.st_mtime_ns]


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
    files = data.get("files")
    if not isinstance(files, dict) or len(files) > MAX_FILES or any(
            _stat(os.path.join(project, str(n))) != st for n, st in files.items()):
        return None  # a file it names changed, moved or went since
    now = stamp(project, home, data["project_key"])
    if now is None or now != data.get("stamp"):
        return None  # the memory changed since
    return data["text"]


async def remember(project: str, key: str | None, home: str, project_key: str,
                   compute: Callable[[], Awaitable[str]]) -> str:
    """``compute()``'s briefing, kept on disk for ``key`` when nothing it depends on changed
    while it was computed (tried twice: the first briefing may settle writes still queued)."""
    import time

    text = ""
    for _ in range(2):
        before = stamp(project, home, project_key) if key else None
        started = time.time_ns() - RECENT_NS
        text = await compute()
        if before is None:
            return text
        files = named_files(project, text)
        if any(st and st[1] >= started for st in files.values()):
            return text  # a file it names changed while it was made: not kept this time
        if stamp(project, home, project_key) == before:
            _write(project, {"version": VERSION, "key": key, "project_key": project_key,
                             "stamp": before, "files": files, "text": text})
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
