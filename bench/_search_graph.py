"""The graph side of ``bench/search.py``: the same items in embedded FalkorDB graphs.

Items are the ones the local side ingested (``Memory.items()`` of each spec), written with
``GraphStore.save`` in batches of 1000 (the path ``bench/graph.py`` measures). Searches go
through ``GraphStore.search`` (graph only) and through ``Memory.search`` with the graph on
(local index + graph, fused: what an agent sees).

Graph writes embed their texts themselves. Up to ``embed_max`` items that runs the real model,
so the ingest rate includes embedding; above it, a wrapper hands back the vectors the local index
already computed for the same texts (the rate then is the graph write alone: said in the output).
Queries always run the real model. Searches are timed once the server has finished the
background work that a big ingest sets off (``settle``; ``settle_s`` says how long it took).
"""

from __future__ import annotations

import asyncio
import time
from array import array
from pathlib import Path
from typing import Any

from _common import pct


class ReusedVectors:
    """The real embedder, except that texts the local index embedded reuse their vector."""

    def __init__(self, real: Any, known: dict[str, bytes]):
        self.real, self.known = real, known
        self.name, self.dimension = real.name, real.dimension
        self.embedded = 0  # texts the real model had to run for (anchor names, queries)

    async def embed(self, texts):
        missing = [t for t in dict.fromkeys(texts) if t not in self.known]
        if missing:
            self.embedded += len(missing)
            for t, v in zip(missing, await self.real.embed(missing)):
                self.known[t] = array("f", v).tobytes()
        return [array("f", self.known[t]).tolist() for t in texts]


def local_vectors(home: Path) -> dict[str, bytes]:
    """text -> float32 vector bytes from the local index (read-only, from its SQLite file).

    Kept as bytes: 100k vectors as Python float lists would take over a gigabyte."""
    import sqlite3

    from graphmem.index.db import db_path

    conn = sqlite3.connect(f"file:{db_path(home)}?mode=ro", uri=True)
    try:
        rows = conn.execute("SELECT i.text, v.vec FROM search_items i "
                            "JOIN search_vectors v ON v.hash = i.hash").fetchall()
    finally:
        conn.close()
    return {t: bytes(blob) for t, blob in rows}


async def _items(specs: list[Path], settings) -> list:
    from graphmem import AsyncMemory

    out = []
    for spec in specs:
        m = AsyncMemory(spec, settings=settings)
        out += await m.items()
        await m.aclose()
    return out


async def _time_store(store, queries: list[str], projects) -> list[float]:
    lat = []
    for q in queries:
        t = time.perf_counter()
        await store.search(q, projects, None, 10)
        lat.append((time.perf_counter() - t) * 1000)
    return lat


async def _time_memory(spec: Path, settings, queries: list[str], scope: str) -> list[float]:
    from graphmem import AsyncMemory
    from graphmem.index import local_search as local_query
    from graphmem.providers import get_embedder

    lat = []
    m = AsyncMemory(spec, settings=settings)
    recent = getattr(getattr(get_embedder(settings), "encoder", None), "recent", {})
    try:
        await m.search("warm up", scope=scope)
        for q in queries:
            # A new query: the model runs (once for graph and local with the default model).
            local_query.forget_query_vectors()
            recent.clear()
            t = time.perf_counter()
            await m.search(q, scope=scope, limit=10)
            lat.append((time.perf_counter() - t) * 1000)
    finally:
        await m.aclose()
    return lat


def settle(settings, quiet: float = 3.0, limit: float = 600.0) -> float:
    """Wait until the server's background work after a big ingest is over; returns the seconds
    waited. That work forks the server, and each fork competes for the same 2 cores: the log's
    rewrite, and the full-text indexes' garbage collection after items were written again
    (hundreds of forks over minutes after re-saving 100k items). Settled = no fork started or
    running for ``quiet`` seconds. Searches are then timed on a server at rest."""
    from graphmem.graph import server

    client = server.sync_client(server.EmbeddedServer(settings).endpoint(), timeout=5.0)
    t = last_change = time.perf_counter()
    forks = None
    try:
        while time.perf_counter() - t < limit:
            info = {**client.info("persistence"), **client.info("stats")}
            busy = any(info.get(k) for k in ("aof_rewrite_in_progress", "aof_rewrite_scheduled",
                                              "rdb_bgsave_in_progress", "module_fork_in_progress"))
            now = time.perf_counter()
            if busy or info.get("total_forks") != forks:
                forks, last_change = info.get("total_forks"), now
            elif now - last_change >= quiet:
                break
            time.sleep(0.25)
    finally:
        client.close()
    return time.perf_counter() - t


async def run(home: Path, specs: list[Path], base_settings, queries: list[str],
              embed_max: int) -> dict[str, Any]:
    """Ingest rate and search p50/p95 of the graph side; stops the embedded server it started."""
    import logging

    from graphmem.graph import server
    from graphmem.graph.store import open_graph
    from graphmem.providers import get_embedder

    logging.getLogger("graphiti_core").setLevel(logging.WARNING)
    settings = base_settings.model_copy(deep=True)
    settings.graph.mode, settings.graph.timeout = "on", 600.0
    items = await _items(specs, settings)
    if len(items) > 50_000:  # "all" searches 50 graphs each time: keep the run in minutes
        queries = queries[:40]
    real = get_embedder(settings)
    reuse = len(items) > embed_max
    embedder = ReusedVectors(real, local_vectors(home)) if reuse else real
    t = time.perf_counter()
    server.EmbeddedServer(settings).ensure()
    out: dict[str, Any] = {"items": len(items), "server_start_s": time.perf_counter() - t,
                           "queries": len(queries),
                           "vectors": "reused from the local index" if reuse else "embedded"}
    store = await open_graph(settings, embedder)
    try:
        t = time.perf_counter()
        for start in range(0, len(items), 1000):
            await store.save(items[start:start + 1000], extract=False)
        secs = time.perf_counter() - t
        out["ingest_items_per_s"] = len(items) / secs
        out["settle_s"] = settle(settings)
        if reuse:
            out["texts_embedded_during_ingest"] = embedder.embedded
        store.embedder = real  # queries: the real model, every time
        project = items[0].project  # items come spec by spec: the first spec's project
        for scope, projects in (("project", [project]), ("all", None)):
            await store.search("warm up", projects, None, 10)
            lat = await _time_store(store, queries, projects)
            out[f"graph_{scope}"] = {"p50_ms": pct(lat, 50), "p95_ms": pct(lat, 95)}
    finally:
        await store.aclose()
    try:
        for scope in ("project", "all"):
            lat = await _time_memory(specs[0], settings, queries, scope)
            out[f"fused_{scope}"] = {"p50_ms": pct(lat, 50), "p95_ms": pct(lat, 95)}
    finally:
        server.EmbeddedServer(settings).stop()
    return out


def measure(home: Path, specs: list[Path], settings, queries: list[str], embed_max: int) -> dict:
    """Synchronous entry for ``bench/search.py``."""
    return asyncio.run(run(home, specs, settings, queries, embed_max))
