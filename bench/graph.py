"""Graph benchmark: embedded FalkorDB cold start, structured ingest, graph search, vs Graphiti.

    .venv/bin/python bench/graph.py [--sizes 1000,10000] [--queries 100] [--embedder wordllama]

Everything runs on a fresh embedded FalkorDB in a temporary GRAPHMEM_HOME with the local
embedder. graphmem's paths (``GraphStore.save`` / ``GraphStore.search``) are compared with
Graphiti's own (one-by-one ``EntityNode/EntityEdge.save`` and ``Graphiti.search``) on the same data.
Quality proxy: a query made of 3 words of one item (in another order) should find that item in
the top 10 ("hit@10"). Targets: cold start < 1 s, ingest >= 1000 items/s, project search p50 < 30 ms
at 10k items, 10-graph search < 100 ms.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import WORDS, median, pct, table, write_json


def make_items(project: str, n: int, rnd: random.Random):
    from graphmem.models import MemoryItem, stable_id

    kinds = ["gotcha", "pattern", "file", "insight"]
    conds = WORDS["cond"]
    out = []
    for i in range(n):
        text = (f"the {rnd.choice(WORDS['adj'])} {rnd.choice(WORDS['what'])} {rnd.choice(WORDS['verb'])} "
                f"{rnd.choice(WORDS['obj'])} {rnd.choice(conds)} (case {i})")
        kind = kinds[i % 4]
        meta = {"path": f"src/mod_{i}.py"} if kind == "file" else (
            {"field": "what_worked"} if kind == "insight" else {})
        out.append(MemoryItem(id=stable_id(project, kind, text), kind=kind, text=text,
                              project=project, spec=f"{project}/specs/001",
                              session=str(i // 50 + 1) if i % 3 else None, metadata=meta))
    return out


def make_queries(items, k: int, rnd: random.Random):
    qs = []
    for it in rnd.sample(items, min(k, len(items))):
        # content words only: "case" (in every item) would make most queries ambiguous
        words = [w for w in it.text.replace("(", " ").replace(")", " ").split()
                 if len(w) > 3 and w != "case"]
        picked = rnd.sample(words, min(3, len(words)))
        qs.append((" ".join(reversed(picked)), it.id))
    return qs


async def cold_start(settings) -> dict:
    from graphmem.graph import server

    srv = server.EmbeddedServer(settings)
    t = time.perf_counter()
    srv.ensure()
    cold = time.perf_counter() - t
    t = time.perf_counter()
    srv.ensure()
    warm = time.perf_counter() - t
    return {"cold_start_s": cold, "reuse_s": warm}


async def graphiti_ingest(store, items, embedder) -> float:
    """Graphiti's own save path, one object at a time (the order that works, per the notes)."""
    from graphiti_core.edges import EntityEdge, EpisodicEdge
    from graphiti_core.nodes import EntityNode, EpisodeType, EpisodicNode

    g = store.graphiti(items[0].project)
    await store.extraction.settle(g)
    drv, gid = g.driver, g.driver._database
    now = datetime.now(timezone.utc)
    t = time.perf_counter()
    vecs = await embedder.embed([i.text for i in items] + ["session"])
    ep = EpisodicNode(name="bench", group_id=gid, source=EpisodeType.text, source_description="bench",
                      content="bench", valid_at=now, created_at=now)
    await ep.save(drv)
    anchor = EntityNode(name="session", group_id=gid, labels=["Session"], summary="session",
                        name_embedding=vecs[-1], created_at=now)
    await anchor.save(drv)
    for it, v in zip(items, vecs):
        node = EntityNode(name=it.text[:120], group_id=gid, labels=["Gotcha"], summary=it.text,
                          name_embedding=v, created_at=now)
        await node.save(drv)
        await EntityEdge(source_node_uuid=anchor.uuid, target_node_uuid=node.uuid, name="FOUND",
                         fact=it.text, fact_embedding=v, group_id=gid, episodes=[ep.uuid],
                         created_at=now, valid_at=now).save(drv)
        await EpisodicEdge(source_node_uuid=ep.uuid, target_node_uuid=node.uuid, group_id=gid,
                           created_at=now).save(drv)
    return len(items) / (time.perf_counter() - t)


async def search_runs(store, projects, queries, graphiti_too: bool = True) -> dict:
    from graphmem.graph.schema import group_id

    ours, theirs, hit_ours, hit_theirs = [], [], 0, 0
    g = store.graphiti(projects[0]) if graphiti_too else None
    if g is not None:
        await store.extraction.settle(g)
    gids = [group_id(p) for p in projects]
    for q, target in queries:
        t = time.perf_counter()
        hits = await store.search(q, projects, None, 10)
        ours.append((time.perf_counter() - t) * 1000)
        hit_ours += any(h.id == target for h in hits)
        if g is not None:
            t = time.perf_counter()
            edges = await g.search(q, group_ids=gids, num_results=10)
            theirs.append((time.perf_counter() - t) * 1000)
            # Graphiti returns up to 10 per group, concatenated in group order: a caller asking
            # for 10 sees the first 10.
            edges = edges[:10]
            hit_theirs += any(e.attributes.get("gm_id") == target for e in edges)
    # Graphiti's multi-group search clones a driver per group, and each clone fires index
    # creation as a background task: wait for them here so none outlives the server.
    await asyncio.gather(*(t for t in asyncio.all_tasks() if t is not asyncio.current_task()),
                         return_exceptions=True)
    n = len(queries)
    out = {"p50_ms": median(ours), "p95_ms": pct(ours, 95), "hit@10": hit_ours / n}
    if theirs:
        out.update({"graphiti_p50_ms": median(theirs), "graphiti_p95_ms": pct(theirs, 95),
                    "graphiti_hit@10": hit_theirs / n})
    return out


async def main(args) -> None:
    import logging

    logging.getLogger("graphiti_core").setLevel(logging.WARNING)  # clone() logs every index
    home = Path(tempfile.mkdtemp(prefix="gm-bench-"))
    os.environ["GRAPHMEM_HOME"] = str(home)
    os.environ["GRAPHMEM_LOCAL_EMBEDDING_MODEL"] = args.embedder
    from graphmem.graph import server
    from graphmem.graph.store import open_graph
    from graphmem.providers import get_embedder
    from graphmem.settings import Settings

    settings = Settings.load(graph__mode="on", graph__timeout=600.0)
    results: dict = {"embedder": args.embedder}
    results.update(await cold_start(settings))
    embedder = get_embedder(settings)
    await embedder.embed(["warm up"])
    store = await open_graph(settings, embedder)
    rnd = random.Random(7)
    rows = []
    try:
        for n in args.sizes:
            project = f"/bench/project-{n}"
            items = make_items(project, n, rnd)
            await store.save(items[:1])  # graph creation (indexes) is not ingest
            t = time.perf_counter()
            for start in range(0, n, 1000):
                await store.save(items[start:start + 1000])
            rate = n / (time.perf_counter() - t)
            t = time.perf_counter()
            await store.save(items[: min(n, 1000)])
            replay = min(n, 1000) / (time.perf_counter() - t)
            s = await search_runs(store, [project], make_queries(items, args.queries, rnd), args.graphiti)
            gi = (await graphiti_ingest(store, make_items(f"/bench/graphiti-{n}", min(n, 300), rnd), embedder)
                  if args.graphiti else float("nan"))
            res = {"items": n, "ingest_items_s": rate, "replay_items_s": replay,
                   "graphiti_ingest_items_s": gi, **s}
            results[f"project_{n}"] = res
            rows.append([f"1 project, {n}", rate, gi, s["p50_ms"], s["p95_ms"], s["hit@10"],
                         s.get("graphiti_p50_ms", "-"), s.get("graphiti_p95_ms", "-"),
                         s.get("graphiti_hit@10", "-")])
            print("measured:", res, flush=True)  # partial results survive a later failure
        projects = [f"/bench/multi-{k}" for k in range(10)]
        all_items = []
        for p in projects:
            items = make_items(p, args.per_graph, rnd)
            await store.save(items)
            all_items += items
        s = await search_runs(store, projects, make_queries(all_items, args.queries, rnd), args.graphiti)
        results["ten_graphs"] = {"items_per_graph": args.per_graph, **s}
        print("measured:", results["ten_graphs"], flush=True)
        rows.append([f"10 graphs x {args.per_graph}", "", "", s["p50_ms"], s["p95_ms"], s["hit@10"],
                     s.get("graphiti_p50_ms", "-"), s.get("graphiti_p95_ms", "-"),
                     s.get("graphiti_hit@10", "-")])
        srv = server.EmbeddedServer(settings)
        await store.aclose()
        srv.stop()
        t = time.perf_counter()
        srv.ensure()
        results["restart_with_data_s"] = time.perf_counter() - t
    finally:
        await store.aclose()
        server.EmbeddedServer(settings).stop()
    table(f"Embedded server ({args.embedder})", ["measure", "seconds", "target"],
          [["cold start (spawn to first query)", results["cold_start_s"], "< 1 s"],
           ["second process reuses it", results["reuse_s"], ""],
           ["restart with all bench data", results["restart_with_data_s"], ""]])
    table("Ingest (items/s) and search (ms; hit@10 = the item a query came from is in the top 10)",
          ["data", "graphmem ingest", "graphiti ingest", "p50", "p95", "hit@10",
           "graphiti p50", "graphiti p95", "graphiti hit@10"], rows)
    print("\ntargets: ingest >= 1000 items/s; p50 < 30 ms at 10k; 10-graph search < 100 ms")
    write_json("graph", results)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1000,10000", help="items per project graph, comma separated")
    ap.add_argument("--per-graph", type=int, default=1000, help="items in each of the 10 graphs")
    ap.add_argument("--queries", type=int, default=100)
    ap.add_argument("--no-graphiti", dest="graphiti", action="store_false",
                    help="skip Graphiti's own paths (they take most of the run time)")
    ap.add_argument("--embedder", default="wordllama", help="local embedding model (wordllama, bge-small-en-v1.5)")
    a = ap.parse_args()
    a.sizes = [int(x) for x in a.sizes.split(",")]
    asyncio.run(main(a))
