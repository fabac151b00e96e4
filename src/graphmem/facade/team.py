"""Team memory on a shared FalkorDB server: who wrote an item, and taking in the others' writes.

Every item sent to the graph records its author (``GRAPHMEM_AUTHOR``, else git's ``user.email``
in the project, else the login name) and machine (``GRAPHMEM_HOST``, else the hostname) in its
metadata, so hits show both.

With an external server (``GRAPHMEM_FALKORDB_URL``), a search in ``spec`` or ``project`` scope
first pulls what this home's local index lacks from the project's graph: items and tombstones
written after the home's cursor (server time, ``IndexStore.cursor``), which trails the
server's clock by a margin for writes that committed after a later one was already read. New or
changed items are embedded and ranked by the local index like this machine's own writes;
tombstoned ones are dropped. A pull with nothing new costs three small indexed queries.
"""

from __future__ import annotations

import functools
import getpass
import json
import logging
import socket
import subprocess
from pathlib import Path
from typing import Any

from graphmem.models import MemoryItem, parse_iso

log = logging.getLogger("graphmem.facade.team")

# A write is stamped when it runs, and one that started before a faster one may commit after a
# reader already saw the faster one: the cursor never passes the server's clock less this many
# ms, so writes of the last seconds are read again (ids and hashes only) until they are older.
# compose/ stops any query after TIMEOUT_DEFAULT (30 s), so no write lands later than that.
MARGIN_MS = 35_000
BUDGET = 256  # items one pull embeds at most (about 1.3 s with the default local model)
# Teammates' items live in the local index under the project key plus this suffix (a control
# character no project id may hold): ranked with the project's own rows, but never taken for
# this machine's files by a reindex, a journal replay or doctor's index drift, which reconcile
# the project key's rows with the files here.
TEAM_SUFFIX = "\x1fteam"


def team_key(key: str) -> str:
    """The local index key of the items taken in from ``key``'s shared graph."""
    return key + TEAM_SUFFIX


def own_key(hits: list) -> list:
    """Hits of taken-in items under their project's own key."""
    return [h.model_copy(update={"project": h.project[:-len(TEAM_SUFFIX)]})
            if h.project.endswith(TEAM_SUFFIX) else h for h in hits]


@functools.lru_cache(maxsize=64)
def _git_email(project_dir: str) -> str | None:
    try:
        out = subprocess.run(["git", "config", "--get", "user.email"], cwd=project_dir,
                             capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None


def author(settings: Any, project_dir: Path | str | None) -> str:
    """Who writes: the setting, else git's user.email in the project, else the login name."""
    if settings.team.author:
        return settings.team.author
    found = _git_email(str(project_dir)) if project_dir and Path(project_dir).is_dir() else None
    if found:
        return found
    try:
        return getpass.getuser()
    except (KeyError, OSError):
        return "unknown"


def host(settings: Any) -> str:
    """Which machine writes: the setting, else the hostname."""
    return settings.team.host or socket.gethostname()


def stamp(items: list[MemoryItem], settings: Any, project_dir: Path | str | None) -> list[MemoryItem]:
    """The items with ``author`` and ``host`` in their metadata (kept when already there)."""
    if not items:
        return items
    who, where = author(settings, project_dir), host(settings)
    out = []
    for it in items:
        if "author" in it.metadata and "host" in it.metadata:
            out.append(it)
        else:
            out.append(it.model_copy(update={"metadata": {"author": who, "host": where,
                                                          **it.metadata}}))
    return out


def _item(row: list, project: str) -> MemoryItem:
    """A graph row as the item the writer's files hold (spec and source stay relative to the
    project root, which is where this machine has it checked out)."""
    uuid, kind, text, _key, spec, session, when, meta, source = row[:9]
    try:
        metadata = json.loads(meta) if meta else {}
    except ValueError:
        metadata = {}
    kw: dict[str, Any] = {}
    t = parse_iso(when)
    if t is not None:
        kw["time"] = t
    return MemoryItem(id=uuid, kind=kind, text=text or "", project=project, spec=spec or None,
                      session=session or None, metadata=metadata, source=source or "", **kw)


async def pull(mem: Any, budget: int = BUDGET) -> dict[str, int] | None:
    """Take in the project graph's changes after this home's cursor -> counts (``more``: the
    budget of items to embed was reached, call again), or None when there is no shared server.
    ``mem``: anything with ``settings``, ``backends`` and ``project`` (an ``AsyncMemory``, or
    its ``DerivedSync``).
    """
    from graphmem.graph import schema, server

    settings = mem.settings
    if settings.graph.mode == "off" or server.external_endpoint(settings) is None:
        return None
    graph = await mem.backends.graph_store()
    if graph is None or not graph.available:
        return None
    project = mem.project.key
    gid = schema.group_id(project)
    index = mem.backends.local.index
    items_at, tombs_at = index.cursor(gid)
    rows = await graph.changes(project, items_at)
    if not rows and items_at == (0, ""):
        return {"items": 0, "deleted": 0, "read": 0, "more": False}  # no graph (yet)
    settled = await graph.server_ms(project) - MARGIN_MS  # every write stamped before has landed
    tombs = await graph.changes(project, tombs_at, tombstones=True)
    have = index.hashes_by_id([r[0] for r in rows] + [t[0] for t in tombs])
    # Take rows in feed order until ``budget`` of them need embedding: a first pull of a big
    # graph is spread over several searches instead of blocking one past its timeout.
    wanted, cut = [], len(rows)
    for i, (uuid, digest, _) in enumerate(rows):
        if have.get(uuid) != digest:
            wanted.append(uuid)
            if len(wanted) >= budget:
                cut = i + 1
                break
    more, rows = cut < len(rows), rows[:cut]
    latest = {r[0]: int(r[2]) for r in rows}
    gone = [uuid for uuid, written in tombs  # a tombstone wins over an older write of an item
            if uuid in have and int(written) >= latest.get(uuid, -1)]
    drop = set(gone)
    wanted = [u for u in wanted if u not in drop]
    # Only what this index lacks is fetched whole (the feed itself is ids, hashes and times).
    fresh = []
    for row in await graph.items_by_id(project, wanted) if wanted else []:
        try:
            fresh.append(_item(row, team_key(project)))
        except (ValueError, TypeError) as exc:  # a node another program wrote: skip it, once
            log.warning("skipped graph item %r of %s: not a graphmem item (%s)", row[0], project,
                        str(exc).splitlines()[0])
    if fresh:
        await index.upsert(fresh)
    if gone:  # a copy this machine's own files hold stays: the files here are the truth
        gone_n = index.delete(project=team_key(project), ids=gone)
    index.advance_cursor(gid, project, _next(rows, settled, 2), _next(tombs, settled, 1))
    return {"items": len(fresh), "deleted": gone_n if gone else 0, "read": len(rows) + len(tombs),
            "more": more}


def _next(rows: list[list], settled: int, at: int) -> tuple[int, str]:
    """The cursor after ``rows`` (``at``: the column of their time), never past ``settled``:
    a write stamped later may still be landing, so it is read again next time."""
    from graphmem.graph.schema import AFTER_ALL

    if rows and int(rows[-1][at]) <= settled:
        return int(rows[-1][at]), rows[-1][0]
    return settled, AFTER_ALL


async def pull_all(mem: Any) -> dict[str, int] | None:
    """Pull until the project graph has nothing more to give (``graphmem sync``)."""
    total = None
    while True:
        got = await pull(mem)
        if got is None:
            return total
        total = {k: (total or {}).get(k, 0) + v for k, v in got.items() if k != "more"}
        if not got["more"]:
            return total
