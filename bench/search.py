"""Search at scale: ingest rate and search latency at 1k, 10k and 100k items, local index and graph.

A generator writes realistic coding-agent memories (many projects x specs x sessions, each
session file with files understood, patterns, gotchas, what worked/failed, recommendations, plus
episodic conversation turns) through the public API, then times ``Memory.search`` with scope
``project`` and ``all``, and ``graphmem search`` as a new process (in-process models and index,
and through a running ``graphmem search-server``).

Every timed search uses a query vector cache emptied first (a new query each time, the model
runs); the "repeat" columns time the same queries again (cached vector: ranking only).

    .venv/bin/python bench/search.py [--sizes 1000,10000,100000] [--queries 200]
                                     [--embedder default|bge-small-en-v1.5|wordllama] [--cli-runs 7]
                                     [--graph-sizes 1000,10000,100000] [--graph-embed-max 10000]

It measures the settings in force: with the defaults, every text gets one ColBERT pass at ingest
(its vector and its token vectors) and every search re-scores its pool by late interaction; run
with ``GRAPHMEM_LOCAL_LATE_INTERACTION=off`` to time the first stage alone. Building 100k items
with a transformer takes long (about 90 items/s here): ``--keep DIR`` keeps the corpus,
``--reuse DIR`` measures it again without ingesting.

"embed" times the query embedding alone; "serial" encodes the query here first and then searches
(what a search costs when the model does not run beside the word scoring, as on 2 cores:
``Tuning.overlap``). The graph side (``_search_graph.py``) writes
the same items to embedded FalkorDB graphs and times graph search and the fused search.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import pct, table, write_json

AREAS = ["auth", "billing", "cart", "search", "cache", "queue", "scheduler", "api", "storage",
         "ui", "metrics", "notifications", "uploads", "payments", "sessions", "reports"]
TECH = ["postgres", "redis", "kafka", "s3", "stripe", "graphql", "celery", "nginx", "docker",
        "terraform", "react", "fastapi", "sqlalchemy", "pytest", "webpack", "grpc"]
PROBLEMS = ["times out after {n} seconds under load", "returns stale data for {n} minutes",
            "drops messages when the consumer restarts", "leaks connections on error paths",
            "fails silently when the config key is missing", "double-charges on retry",
            "breaks on non-ASCII file names", "needs a migration before deploy",
            "caches per worker, not globally", "rejects payloads over {n} KB"]
FIXES = ["wrap the call in a retry with jitter", "use the shared client from {mod}",
         "validate inputs at the boundary in {mod}", "add an index on {col}",
         "pass an idempotency key", "read settings once at start-up", "stream instead of buffering",
         "pin the version to {n}.x", "use a transaction around the two writes"]
COLS = ["user_id", "created_at", "tenant_id", "order_id", "status", "email"]


def _words(rng: random.Random) -> dict:
    area, tech = rng.choice(AREAS), rng.choice(TECH)
    return dict(area=area, tech=tech, n=rng.randint(2, 500), col=rng.choice(COLS),
                mod=f"src/{area}/{rng.choice(['client', 'service', 'models', 'views'])}.py")


def session_insights(rng: random.Random) -> dict:
    """One session's insights: about 12 items."""
    w = [_words(rng) for _ in range(6)]
    return {
        "subtasks_completed": [f"implement {x['area']} {rng.choice(['endpoint', 'job', 'form'])} "
                               f"#{x['n']}" for x in w[:2]],
        "discoveries": {
            "files_understood": {f"src/{x['area']}/{x['tech']}_{x['n']}.py":
                                 f"{x['tech']} adapter for {x['area']}" for x in w[:3]},
            "patterns_found": [f"In {x['area']}, {rng.choice(FIXES).format(**x)}" for x in w[3:5]],
            "gotchas_encountered": [f"{x['tech']} in {x['area']} "
                                    f"{rng.choice(PROBLEMS).format(**x)}" for x in w[1:3]],
        },
        "what_worked": [f"{rng.choice(FIXES).format(**w[4])} fixed the {w[4]['area']} tests"],
        "what_failed": [f"mocking {w[5]['tech']} hid a bug in {w[5]['area']}"],
        "recommendations_for_next_session": [f"check {w[0]['mod']} before touching {w[0]['area']}"],
    }


def turns(rng: random.Random, k: int) -> list[tuple[str, str]]:
    out = []
    for _ in range(k):
        x = _words(rng)
        out.append(("user", f"why does {x['tech']} in {x['area']} {rng.choice(PROBLEMS).format(**x)}?"))
        out.append(("assistant", f"Because of {x['mod']}; {rng.choice(FIXES).format(**x)}."))
    return out


def ingest(root: Path, settings, target: int, rng: random.Random) -> tuple[int, float, list[Path]]:
    """Write about ``target`` items over projects of ~2000 items; returns (items, secs, specs)."""
    from graphmem import Memory

    n_projects = max(2, target // 2000)
    specs = []
    items, t0 = 0, time.perf_counter()
    per_project = target // n_projects
    for p in range(n_projects):
        spec = root / f"project-{p:03d}" / "specs" / "001-work"
        spec.mkdir(parents=True)
        specs.append(spec)
        with Memory(spec, settings=settings) as m:
            got, num = 0, 1
            while got < per_project:
                got += m.save_session_insights(num, session_insights(rng)).items
                if num % 5 == 0:  # every fifth session also keeps its conversation
                    sid = m.start_session(model="bench")
                    for role, text in turns(rng, 3):
                        m.record_turn(sid, role, text)
                    got += 6
                num += 1
        items += got
    return items, time.perf_counter() - t0, specs


def make_queries(rng: random.Random, n: int) -> list[str]:
    """Queries an agent would ask of these memories: topics, questions, a file path."""
    qs = []
    for _ in range(n):
        x = _words(rng)
        qs.append(rng.choice([f"{x['tech']} {x['area']} timeout", f"why is {x['area']} data stale",
                              f"how to call {x['tech']} safely", x["mod"],
                              f"payments charged twice after a retry in {x['area']}"]))
    return qs


def time_searches(specs: list[Path], settings, scope: str,
                  qs: list[str]) -> dict[str, list[float]]:
    """Latencies in ms per query: "new" (a fresh query: the search runs the model), "serial" (the
    model here first, then the search) and "repeat" (query encoded already: ranking only). The three
    are interleaved so other processes' load hits them alike."""
    import numpy as np

    from graphmem import Memory
    from graphmem.index import local_search as local_query
    from graphmem.providers import get_embedder
    from graphmem.providers.base import InProcessEmbedder

    emb = get_embedder(settings)
    in_process = isinstance(emb, InProcessEmbedder)
    shared = emb.token_encoder  # the default model: one pass, vector and tokens

    def forget() -> None:  # a new query: the models run
        local_query.forget_query_vectors()
        if shared is not None:
            shared.recent.clear()

    out: dict[str, list[float]] = {"new": [], "serial": [], "repeat": []}
    with Memory(specs[0], settings=settings) as m:
        m.search("warm up", scope=scope)
        for q in qs:
            forget()
            t = time.perf_counter()
            m.search(q, scope=scope, limit=10)
            out["new"].append((time.perf_counter() - t) * 1000)
            if in_process:
                forget()
                t = time.perf_counter()
                if shared is not None:
                    v = shared.query_sync(q).mean(axis=0)  # remembered by the encoder
                else:
                    v = np.asarray(emb.embed_query_sync(q), np.float32)
                local_query.remember_query_vector((emb.name, q), v)  # unit length, as a search keeps it
                m.search(q, scope=scope, limit=10)
                out["serial"].append((time.perf_counter() - t) * 1000)
            t = time.perf_counter()
            m.search(q, scope=scope, limit=10)  # vector cached: what ranking alone costs
            out["repeat"].append((time.perf_counter() - t) * 1000)
    return out


def embed_ms(settings, qs: list[str]) -> list[float]:
    """The query embedding alone (the model in this thread, nothing else running), in ms."""
    from graphmem.providers import get_embedder
    from graphmem.providers.base import InProcessEmbedder

    emb = get_embedder(settings)
    if not isinstance(emb, InProcessEmbedder):
        return []
    one = emb.embed_query_sync
    one("warm up")
    lat = []
    for q in qs:
        t = time.perf_counter()
        one(q)
        lat.append((time.perf_counter() - t) * 1000)
    return lat


def cli_ms(spec: Path, home: Path, env_extra: dict, *extra: str) -> float:
    env = dict(os.environ, GRAPHMEM_HOME=str(home), **env_extra)
    t = time.perf_counter()
    r = subprocess.run([sys.executable, "-m", "graphmem.cli", "search", "postgres timeout",
                        "--spec-dir", str(spec), "--scope", "project", "--json", *extra],
                       capture_output=True, env=env)
    took = (time.perf_counter() - t) * 1000
    if r.returncode != 0:
        raise SystemExit(r.stderr.decode())
    return took


def cli_runs(spec: Path, home: Path, env_extra: dict, runs: int) -> dict:
    """Median and min wall time of ``graphmem search`` as a new process, cold and warm."""
    from _common import median

    out = {"cold_ms": [cli_ms(spec, home, env_extra, "--no-server") for _ in range(runs)]}
    server = subprocess.Popen([sys.executable, "-m", "graphmem.cli", "search-server", "--idle",
                               "120"], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                              env=dict(os.environ, GRAPHMEM_HOME=str(home), **env_extra), text=True)
    try:
        server.stdout.readline()  # the server is listening
        out["warm_ms"] = [cli_ms(spec, home, env_extra) for _ in range(runs)]
    finally:
        server.terminate()
        server.wait(timeout=30)
    return {k: {"median": median(v), "min": min(v), "runs": v} for k, v in out.items()}


@contextlib.contextmanager
def _folder(base: str, size: int):
    """A temporary folder, or ``base/<size>`` kept for later runs."""
    if not base:
        with tempfile.TemporaryDirectory() as tmp:
            yield tmp
        return
    path = Path(base) / str(size)
    path.mkdir(parents=True, exist_ok=True)
    yield str(path)


def _reused(root: Path, size: int) -> tuple[int, float, list[Path]]:
    """(items, ingest seconds, specs) of a kept folder; an ingest cut short counts its rows."""
    specs = sorted(root.glob("project-*/specs/001-work"))
    info = root / "ingest.json"
    if info.is_file():
        data = json.loads(info.read_text())
        return data["items"], data["secs"], specs
    import sqlite3

    from graphmem.index.db import db_path

    conn = sqlite3.connect(f"file:{db_path(root / 'home')}?mode=ro", uri=True)
    n = conn.execute("SELECT count(*) FROM search_items").fetchone()[0]
    conn.close()
    return n, float("nan"), specs


def _load() -> float:
    return round(os.getloadavg()[0], 2)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1000,10000,100000")
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--embedder", default="default",
                    help="local embedding model (default: answerai-colbert-small mean vectors; "
                         "bge-small-en-v1.5; wordllama ingests faster)")
    ap.add_argument("--cli-runs", type=int, default=7)
    ap.add_argument("--graph-sizes", default="1000,10000,100000",
                    help="sizes that also run the graph side ('' for none)")
    ap.add_argument("--graph-embed-max", type=int, default=10000,
                    help="above this many items the graph reuses the local index's vectors")
    ap.add_argument("--out", default="search", help="results file: bench/results/<out>.json")
    ap.add_argument("--keep", default="",
                    help="build the data in this new folder and keep it (re-measure without "
                         "re-ingesting: --reuse DIR)")
    ap.add_argument("--reuse", default="", help="a folder --keep left: skip the ingest")
    args = ap.parse_args()
    from graphmem import Settings

    graph_sizes = {int(x) for x in args.graph_sizes.split(",") if x}
    env_extra = {"GRAPHMEM_LOCAL_EMBEDDING_MODEL": args.embedder}
    rows, grows, out = [], [], {"sizes": {}, "embedder": args.embedder, "load_before": os.getloadavg()}
    for size in (int(s) for s in args.sizes.split(",")):
        rng = random.Random(size)
        with _folder(args.keep or args.reuse, size) as tmp:
            home = Path(tmp) / "home"
            settings = Settings.load(home=str(home))
            settings.providers.local.embedding_model = args.embedder
            load0 = _load()
            if args.reuse:  # the rate is the one measured when the folder was built
                n, secs, specs = _reused(Path(tmp), size)
            else:
                n, secs, specs = ingest(Path(tmp), settings, size, rng)
                if args.keep:
                    (Path(tmp) / "ingest.json").write_text(json.dumps({"items": n, "secs": secs}))
            t = time.perf_counter()
            time_searches(specs, settings, "all", [])  # first search builds the saved base
            build_ms = (time.perf_counter() - t) * 1000
            res = {"items": n, "ingest_items_per_s": n / secs, "ingest_s": secs,
                   "first_search_ms": build_ms, "load_ingest": [load0, _load()]}
            qs = make_queries(rng, args.queries)
            emb = embed_ms(settings, qs)
            res["query_embed"] = {"p50_ms": pct(emb, 50), "p95_ms": pct(emb, 95), "load": _load()}
            for scope in ("project", "all"):
                lat = time_searches(specs, settings, scope, qs)
                res[scope] = {"p50_ms": pct(lat["new"], 50), "p95_ms": pct(lat["new"], 95),
                              "serial_p50_ms": pct(lat["serial"], 50),
                              "serial_p95_ms": pct(lat["serial"], 95),
                              "repeat_p50_ms": pct(lat["repeat"], 50),
                              "repeat_p95_ms": pct(lat["repeat"], 95), "load": _load()}
                rows.append([n, scope, f"{n / secs:.0f}", pct(lat["new"], 50), pct(lat["new"], 95),
                             pct(lat["serial"], 50), pct(lat["serial"], 95),
                             pct(lat["repeat"], 50), pct(lat["repeat"], 95), pct(emb, 50),
                             res[scope]["load"]])
            print(f"{n} items: local ingest {n / secs:.0f}/s ({secs:.0f} s), first search "
                  f"{build_ms:.0f} ms, query embed p50 {pct(emb, 50):.1f} ms, project p50 "
                  f"{res['project']['p50_ms']:.1f} / p95 {res['project']['p95_ms']:.1f} ms; "
                  f"load {_load()}", flush=True)
            if size in graph_sizes:
                import _search_graph

                g = _search_graph.measure(home, specs, settings, qs[:max(20, len(qs) // 2)],
                                          args.graph_embed_max)
                g["load"] = _load()
                res["graph"] = g
                for scope in ("project", "all"):
                    grows.append([n, scope, f"{g['ingest_items_per_s']:.0f}", g["vectors"],
                                  g[f"graph_{scope}"]["p50_ms"], g[f"graph_{scope}"]["p95_ms"],
                                  g[f"fused_{scope}"]["p50_ms"], g[f"fused_{scope}"]["p95_ms"],
                                  g["load"]])
                print(f"{n} items, graph: {g}", flush=True)
            if args.cli_runs:
                res["cli"] = cli_runs(specs[0], home, env_extra, args.cli_runs)
                print(f"{n} items: graphmem search process: cold "
                      f"{res['cli']['cold_ms']['median']:.0f} ms, with search-server "
                      f"{res['cli']['warm_ms']['median']:.0f} ms (medians); load {_load()}",
                      flush=True)
            out["sizes"][str(size)] = res
            write_json(args.out, out)  # partial results survive a later failure
    table(f"Local search at scale ({args.embedder}; ms; new = a fresh query, the search runs "
          "the model; serial = the model first, then the search; repeat = query encoded "
          "already; embed = the model alone)",
          ["items", "scope", "ingest/s", "new p50", "new p95", "serial p50", "serial p95",
           "repeat p50", "repeat p95", "embed p50", "load"], rows)
    if grows:
        table("Graph (embedded FalkorDB; ms; graph = GraphStore.search alone; fused = "
              "Memory.search with the graph on: local + graph)",
              ["items", "scope", "ingest/s", "vectors", "graph p50", "graph p95", "fused p50",
               "fused p95", "load"], grows)
    print("\ntargets: local p50 < 5 ms and p95 < 20 ms at 100k items")
    write_json(args.out, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
