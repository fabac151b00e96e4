"""Reading what a project graph holds: its item ids, items by id, and the change feed that other
machines sharing the server read after a cursor (``team.py``).

Every read is paged and ordered, each page starting after the last row seen, until a page comes
back empty: a server's RESULTSET_SIZE silently cuts any one reply short (FalkorDB's image
defaults to 10,000), so a short page does not mean the end.
"""

from __future__ import annotations

from typing import Any

from graphmem.graph import schema
from .writes import BATCH

PAGE = 5000  # ids per read when listing a graph's items


async def changes(store: Any, project: str, after: tuple[int, str] = (0, ""),
                  tombstones: bool = False) -> list[list]:
    """``GraphStore.changes``: items (uuid, hash, written) or tombstones (uuid, written) written
    after the cursor ``after`` = (server ms, uuid), in that order."""
    gid = schema.group_id(project)
    if not store.has_team_indexes(gid):
        got = await store.recorded_embedder(project)
        if got is None:
            return []  # no graph yet (or not ours): nothing to read, nothing to create
        err = store.mismatch(project, got)
        if err is not None:  # its items could be taken in, but never written back
            raise err
        await store.team_indexes(gid)
    query = schema.CHANGED_TOMBSTONES if tombstones else schema.CHANGED_ITEMS
    rows: list[list] = []
    t, u = after
    while True:
        res = await store.query(gid, query, {"t": t, "u": u, "page": PAGE}, ro=True)
        page = res.result_set if res is not None else []
        if not page:
            return rows
        rows.extend(page)
        t, u = page[-1][-1], page[-1][0]


async def server_ms(store: Any, project: str) -> int:
    """The server's clock (ms), the one ``gm_written`` stamps come from."""
    res = await store.query(schema.group_id(project), "RETURN timestamp()", ro=True)
    return int(res.result_set[0][0])


FETCH_CHARS = 8_000_000  # characters of node text one read asks for at most


async def item_sizes(store: Any, project: str, ids: list[str]) -> dict[str, tuple[int, int]]:
    """(longest field, all fields) in characters of the given items (those still in the
    graph), without sending them."""
    return await _sizes(store, schema.group_id(project), ids)


async def _sizes(store: Any, gid: str, ids: list[str]) -> dict[str, tuple[int, int]]:
    rows = await _by_id(store, gid, schema.ITEM_SIZES, list(dict.fromkeys(ids)))
    return {r[0]: (int(r[1]), int(r[2])) for r in rows}


async def items_by_id(store: Any, project: str, ids: list[str], max_chars: int | None = None,
                      sizes: dict[str, tuple[int, int]] | None = None
                      ) -> tuple[list[list], dict[str, int]]:
    """``HIT_FIELDS`` rows of the given items (those still in the graph; a field that is not
    a string comes back None), and the ids whose longest field is over ``max_chars`` (each with
    that size): those are never sent whole. ``sizes``: ``item_sizes`` already read."""
    return await fetch_items(store, schema.group_id(project), ids, max_chars, sizes)


async def fetch_items(store: Any, gid: str, ids: list[str], max_chars: int | None = None,
                      sizes: dict[str, tuple[int, int]] | None = None
                      ) -> tuple[list[list], dict[str, int]]:
    """``items_by_id`` of one graph: sizes first (unless given), then the nodes within the
    limit, in reads of at most ``FETCH_CHARS`` characters; with a limit and no sizes, for a few
    ids, one read in which a field over the limit comes back empty (the node is then over)."""
    if sizes is None and max_chars is not None and len(ids) <= 64:
        rows = await _by_id(store, gid, schema.CLIPPED_ITEMS_BY_ID, list(dict.fromkeys(ids)),
                            {"max": max_chars})
        over = {r[0]: max_chars + 1 for r in rows if any(v == [None] for v in r[1:])}
        return [[r[0], *(v[0] if v else None for v in r[1:])] for r in rows if r[0] not in over], over
    if sizes is None:
        sizes = await _sizes(store, gid, ids)
    over = {u: n[0] for u, n in sizes.items() if max_chars is not None and n[0] > max_chars}
    rows, chunk, chars = [], [], 0
    for uuid in [u for u in dict.fromkeys(ids) if u in sizes and u not in over]:
        chunk.append(uuid)
        chars += sizes[uuid][1]
        if chars >= FETCH_CHARS or len(chunk) >= BATCH:
            rows += await _by_id(store, gid, schema.CHECKED_ITEMS_BY_ID, chunk)
            chunk, chars = [], 0
    if chunk:
        rows += await _by_id(store, gid, schema.CHECKED_ITEMS_BY_ID, chunk)
    return [[r[0], *(v[0] if v else None for v in r[1:])] for r in rows], over


async def node_hashes(store: Any, gid: str, ids: list[str]) -> dict[str, str]:
    """uuid -> ``str`` of its ``gm_hash`` (as the change feed gives it to a pull) for the given
    nodes of one graph."""
    return {r[0]: str(r[1]) for r in await _by_id(store, gid, schema.HASHES_BY_ID, ids)}


async def _by_id(store: Any, gid: str, query: str, ids: list[str],
                 params: dict[str, Any] | None = None) -> list[list]:
    """Rows of ``query`` for ``ids``, in chunks; a chunk cut short by the server's
    RESULTSET_SIZE is asked for again without what came back."""
    rows: list[list] = []
    pending = list(ids)
    while pending:
        chunk, pending = pending[:BATCH], pending[BATCH:]
        res = await store.query(gid, query, {"ids": chunk, **(params or {})}, ro=True)
        got = res.result_set if res is not None else []
        rows.extend(got)
        if got:  # an empty answer: the rest of the chunk was deleted meanwhile
            seen = {r[0] for r in got}
            pending = [i for i in chunk if i not in seen] + pending
    return rows


async def item_ids(store: Any, project: str, spec: str | None = None,
                   owner: tuple[str, str] | None = None) -> set[str]:
    """Ids of the items a project graph holds (optionally of one spec, or written by one home:
    ``owner``, its (writer, host) as ``team.owner`` gives them)."""
    where = "n.gm_kind IS NOT NULL" + (" AND n.gm_spec = $spec" if spec is not None else "")
    if owner is not None:
        where += " AND " + schema.MINE
    writer, host = owner or ("", "")
    ids: set[str] = set()
    gid, after = schema.group_id(project), ""
    while True:
        res = await store.query(gid, f"MATCH (n:Entity) WHERE {where} AND n.uuid > $after "
                                f"RETURN n.uuid ORDER BY n.uuid LIMIT {PAGE}",
                                {"spec": spec or "", "after": after, "writer": writer,
                                 "host": host}, ro=True)
        page = [r[0] for r in res.result_set] if res is not None else []
        if not page:
            return ids
        ids.update(page)
        after = page[-1]
