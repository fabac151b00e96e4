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


async def items_by_id(store: Any, project: str, ids: list[str]) -> list[list]:
    """``HIT_FIELDS`` rows of the given items (those still in the graph), in chunks; a chunk
    cut short by the server's RESULTSET_SIZE is asked for again without what came back."""
    gid, rows, pending = schema.group_id(project), [], list(dict.fromkeys(ids))
    while pending:
        chunk, pending = pending[:BATCH], pending[BATCH:]
        res = await store.query(gid, schema.ITEMS_BY_ID, {"ids": chunk}, ro=True)
        got = res.result_set if res is not None else []
        rows.extend(got)
        if got:  # an empty answer: the rest of the chunk was deleted meanwhile
            seen = {r[0] for r in got}
            pending = [i for i in chunk if i not in seen] + pending
    return rows


async def item_ids(store: Any, project: str, spec: str | None = None,
                   host: str | None = None) -> set[str]:
    """Ids of the items a project graph holds (optionally of one spec, or written from one
    machine: ``host``)."""
    where = ("n.gm_kind IS NOT NULL" + (" AND n.gm_spec = $spec" if spec is not None else "")
             + (" AND n.gm_host = $host" if host is not None else ""))
    gid, ids, after = schema.group_id(project), set(), ""
    while True:
        res = await store.query(gid, f"MATCH (n:Entity) WHERE {where} AND n.uuid > $after "
                                f"RETURN n.uuid ORDER BY n.uuid LIMIT {PAGE}",
                                {"spec": spec or "", "after": after, "host": host or ""}, ro=True)
        page = [r[0] for r in res.result_set] if res is not None else []
        if not page:
            return ids
        ids.update(page)
        after = page[-1]
