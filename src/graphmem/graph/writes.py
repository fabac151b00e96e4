"""Writing memories to their project graphs: batched Cypher in Graphiti's schema, and deletes.

Items are embedded with the configured embedder and written by ``schema.py``'s batched queries,
idempotent on ``MemoryItem.id``; each batch also writes its code nodes (``code_graph.py``).
Deletes leave a tombstone per item so that other machines sharing the server drop it too.
"""

from __future__ import annotations

import asyncio
from typing import Any, Iterable

from ..errors import GraphError
from ..models import MemoryItem
from ..redact import redact_items
from graphmem.graph import schema

BATCH = 1000  # items per Cypher batch: big enough to amortise round trips, small enough to parse


async def save(store: Any, items: Iterable[MemoryItem], extract: bool = True) -> str | None:
    """``GraphStore.save``: write items to their project graphs (a GraphmemError when any could
    not be written); a note when LLM extraction failed, else None."""
    items = list(items)
    if not items:
        return None
    settings = store.settings
    if settings.redact:  # whichever path brings them (write, outbox, rebuild, doctor --fix)
        items = redact_items(items)
    await store.conn.check_alive()
    try:
        await asyncio.wait_for(_save(store, items), timeout=settings.graph.timeout)
    except asyncio.TimeoutError:
        reason = f"graph write timed out after {settings.graph.timeout:.0f}s"
        await store.conn.drop(reason)  # the next connection's ping tells slow from hung
        raise GraphError(reason) from None
    if store.llm is not None and extract:
        return await store.extraction.run(items)
    return None


async def _save(store: Any, items: list[MemoryItem]) -> None:
    by_project: dict[str, list[MemoryItem]] = {}
    for item in items:
        by_project.setdefault(item.project, []).append(item)
    for project, group in by_project.items():
        gid = schema.group_id(project)
        await store.prepare(gid, project)
        for start in range(0, len(group), BATCH):
            await write_batch(store, gid, group[start:start + BATCH])


async def write_batch(store: Any, gid: str, items: list[MemoryItem]) -> None:
    """One batch of one project: anchors and item nodes, the episode, the fact edges, the code."""
    embedder = store.embedder
    texts = schema.texts_to_embed(items)
    vectors = await embedder.embed(texts)
    try:
        vectors = schema.as_vectors(vectors)
    except ValueError as exc:
        raise GraphError(f"embedder {embedder.name}: {exc}") from None
    if len(vectors) != len(texts) or any(len(v) != embedder.dimension for v in vectors):
        raise GraphError(f"embedder {embedder.name} returned vectors of the wrong shape")
    rows = schema.build_batch(gid, items, dict(zip(texts, vectors)))
    anchors: dict[str, list[dict]] = {}
    for a in rows["anchors"]:
        anchors.setdefault(a["label"], []).append(a)
    # Order matters for readers: nodes first, then the episode, the fact edges last.
    for label, group in [*anchors.items(), *rows["nodes"].items()]:
        await store.query(gid, schema.nodes_query(label), {"rows": group})
    await store.query(gid, schema.EPISODE, {"episode": rows["episode"], "mentions": rows["mentions"]})
    await store.query(gid, schema.EDGES, {"rows": rows["edges"]})
    from .code_graph import write_code

    await write_code(store, gid, items[0].project, items)


async def delete_spec(store: Any, project: str, spec: str) -> None:
    """Remove one spec's items, anchors and episodes from its project graph (leaving a
    tombstone per item, so that other machines drop them too)."""
    gid = schema.group_id(project)
    await store.team_indexes(gid)
    await store.query(gid, schema.TOMBSTONE_SPEC, {"spec": spec})
    await store.query(gid, "MATCH (n) WHERE n.gm_spec = $spec DETACH DELETE n", {"spec": spec})


async def delete_items(store: Any, project: str, ids: list[str]) -> None:
    """Remove items (and their fact edges) by id from their project graph, leaving tombstones."""
    gid = schema.group_id(project)
    await store.team_indexes(gid)
    await store.query(gid, schema.TOMBSTONE_IDS, {"ids": list(ids)})
    await store.query(gid, "MATCH (n:Entity) WHERE n.uuid IN $ids DETACH DELETE n", {"ids": list(ids)})
