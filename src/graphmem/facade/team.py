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
import hashlib
import logging
import socket
import subprocess
from pathlib import Path
from typing import Any

from graphmem.models import MemoryItem

log = logging.getLogger("graphmem.facade.team")

# A write is stamped when it runs, and one that started before a faster one may commit after a
# reader already saw the faster one: the cursor never passes the server's clock less this many
# ms, so writes of the last seconds are read again (ids and hashes only) until they are older.
# compose/ stops any query after TIMEOUT_DEFAULT (30 s), so no write lands later than that.
MARGIN_MS = 35_000
BUDGET = 256  # items one pull embeds at most (about 1.3 s with the default local model)
# Characters one pull takes in at most (at least one item): an item near the size limit costs
# seconds to index (a local write of 0.9 MB takes 3.4 s), so many of them are spread over
# searches too, one of them per search at most.
BUDGET_CHARS = 1_000_000
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


def writer(settings: Any) -> str:
    """Which home writes: its host and a digest of the machine's name and the home's folder,
    so that two homes on one machine (or two machines given one GRAPHMEM_HOST) differ."""
    where = str(Path(settings.home).expanduser().resolve())
    tag = hashlib.sha256(f"{socket.gethostname()}\0{where}".encode("utf-8", "surrogatepass"))
    return f"{host(settings)}#{tag.hexdigest()[:12]}"


def owner(settings: Any) -> tuple[str, str]:
    """(writer, host): what a shared graph's deletes and rebuilds of this home are limited to
    (nodes written before writers were stamped are owned by their host)."""
    return writer(settings), host(settings)


def shared_owner(settings: Any) -> tuple[str, str] | None:
    """``owner`` on a shared server (``GRAPHMEM_FALKORDB_URL``); None for a home's own graph,
    where every node is this home's."""
    from graphmem.graph.server import external_endpoint

    return owner(settings) if external_endpoint(settings) is not None else None


def stamp(items: list[MemoryItem], settings: Any, project_dir: Path | str | None) -> list[MemoryItem]:
    """The items with ``author``, ``host`` and ``writer`` in their metadata (kept when already
    there), and ``shared_validity`` when their spec's validity log retired or superseded them
    (teammates' homes hide them too: ``validity.apply_validity``)."""
    if not items:
        return items
    who, where, home = author(settings, project_dir), host(settings), writer(settings)
    out = []
    for it in items:
        shared = _validity(it, project_dir)
        if "author" in it.metadata and "host" in it.metadata and "writer" in it.metadata and \
                it.metadata.get("shared_validity") == shared:
            out.append(it)
            continue
        meta = {"author": who, "host": where, "writer": home, **it.metadata}
        meta.pop("shared_validity", None)
        if shared:
            meta["shared_validity"] = shared
        out.append(it.model_copy(update={"metadata": meta}))
    return out


def _validity(item: MemoryItem, project_dir: Path | str | None) -> dict | None:
    """The latest validity event of ``item`` in its spec's log, as shared with teammates."""
    if not item.spec or project_dir is None:
        return None
    from graphmem.files.validity_log import validity_log

    ev = validity_log(Path(project_dir) / item.spec).events.get(item.id)
    if not ev:
        return None
    return {k: ev.get(k) for k in ("state", "by", "reason", "invalid_at", "recorded_at")}


def _item(row: list, project: str, max_bytes: int) -> MemoryItem:
    """A checked graph row (``feed.fetch_items``) as the item the writer's files hold (spec and
    source relative to the project root, which is where this machine has it checked out); a
    ValueError for a node that is not one (``graph/foreign.py``)."""
    from graphmem.graph.foreign import fields

    return MemoryItem(project=project, **fields(row, max_bytes))


async def pull(mem: Any, budget: int = BUDGET, chars: int = BUDGET_CHARS) -> dict[str, int] | None:
    """Take in the project graph's changes after this home's cursor -> counts (``more``: the
    budget of items to embed, or of ``chars`` to take in, was reached: call again), or None
    when there is no shared server.
    ``mem``: anything with ``settings``, ``derived`` and ``project`` (an ``AsyncMemory``, or
    its ``DerivedSync``).
    """
    from graphmem.graph import schema, server

    settings = mem.settings
    if settings.graph.mode == "off" or server.external_endpoint(settings) is None:
        return None
    graph = await mem.derived.graph_store()
    if graph is None or not graph.available:
        return None
    project = mem.project.key
    gid = schema.group_id(project)
    index = mem.derived.local.index
    items_at, tombs_at = index.cursor(gid)
    rows = await graph.changes(project, items_at)
    if not rows and items_at == (0, ""):
        return {"items": 0, "deleted": 0, "read": 0, "more": False}  # no graph (yet)
    settled = await graph.server_ms(project) - MARGIN_MS  # every write stamped before has landed
    tombs = await graph.changes(project, tombs_at, tombstones=True)
    ids = [r[0] for r in rows] + [t[0] for t in tombs]
    have = index.hashes_by_id(ids, project=team_key(project))
    # An id this machine's own files hold is theirs here: a teammate's node of the same id (the
    # same spec name and file, or their write over it) never replaces it, nor deletes it.
    mine = set(index.hashes_by_id(ids, project=project))
    refused = index.refused(gid, ids)  # nodes refused once: not fetched again until they change
    # Take rows in feed order until ``budget`` of them need embedding: a first pull of a big
    # graph is spread over several searches instead of blocking one past its timeout.
    wanted, cut = [], len(rows)
    for i, (uuid, digest, _) in enumerate(rows):
        if have.get(uuid) != digest and uuid not in mine and refused.get(uuid) != str(digest):
            wanted.append(uuid)
            if len(wanted) >= budget:
                cut = i + 1
                break
    # Their sizes first (nothing is sent whole yet): the pull stops before ``chars``.
    sizes = await graph.item_sizes(project, wanted) if wanted else {}
    spent, at = 0, {r[0]: i for i, r in enumerate(rows[:cut])}
    for j, uuid in enumerate(wanted):
        longest, total = sizes.get(uuid, (0, 0))
        if longest > settings.max_item_bytes:
            continue  # refused unread
        if spent and spent + total > chars:
            cut, wanted = at[uuid], wanted[:j]
            break
        spent += total
    more, rows = cut < len(rows), rows[:cut]
    latest = {r[0]: int(r[2]) for r in rows}
    gone = [uuid for uuid, written in tombs  # a tombstone wins over an older write of an item
            if uuid in have and int(written) >= latest.get(uuid, -1)]
    drop = set(gone)
    wanted = [u for u in wanted if u not in drop]
    fresh = await _fetch(graph, index, gid, project, wanted, {r[0]: r[1] for r in rows},
                         settings.max_item_bytes, sizes) if wanted else []
    if fresh:
        await index.upsert(fresh)
    if gone:  # only the teammates' copies: a copy this machine's own files hold stays
        gone_n = index.delete(project=team_key(project), ids=gone)
    index.advance_cursor(gid, project, _next(rows, settled, 2), _next(tombs, settled, 1))
    return {"items": len(fresh), "deleted": gone_n if gone else 0, "read": len(rows) + len(tombs),
            "more": more}


async def _fetch(graph: Any, index: Any, gid: str, project: str, ids: list[str],
                 digests: dict[str, str], max_bytes: int,
                 sizes: dict[str, tuple[int, int]]) -> list[MemoryItem]:
    """The items ``ids`` fetched whole and checked as a local write is (size, fields, paths):
    a node that fails is refused with one warning, and not fetched again until it changes;
    one over the size limit is never sent whole."""
    rows, over = await graph.items_by_id(project, ids, max_chars=max_bytes, sizes=sizes)
    refuse = {u: f"a field of {n} characters is over the limit of {max_bytes} bytes "
                 "(GRAPHMEM_MAX_ITEM_BYTES)" for u, n in over.items()}
    fresh = []
    for row in rows:
        try:
            fresh.append(_item(row, team_key(project), max_bytes))
        except ValueError as exc:  # pydantic's errors too: a node another program wrote
            refuse[row[0]] = str(exc).splitlines()[0]
    for uuid, why in refuse.items():
        log.warning("graph item %r of %s refused: %s", uuid, project, why)
    if refuse:
        index.refuse(gid, {u: (str(digests.get(u)), why) for u, why in refuse.items()})
    return fresh


def _next(rows: list[list], settled: int, at: int) -> tuple[int, str]:
    """The cursor after ``rows`` (``at``: the column of their time), never past ``settled``:
    a write stamped later may still be landing, so it is read again next time."""
    from graphmem.graph.schema import AFTER_ALL

    if rows and int(rows[-1][at]) <= settled:
        return int(rows[-1][at]), rows[-1][0]
    return settled, AFTER_ALL


async def pull_all(mem: Any) -> dict[str, int] | None:
    """Pull until the project graph has nothing more to give (``graphmem sync``)."""
    total: dict[str, int] | None = None
    while True:
        got = await pull(mem)
        if got is None:
            return total
        total = {k: (total or {}).get(k, 0) + v for k, v in got.items() if k != "more"}
        if not got["more"]:
            return total
