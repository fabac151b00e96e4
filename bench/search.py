"""Search at scale: ingest rate and search latency of the local index at 1k, 10k and 100k items.

A generator writes realistic coding-agent memories (many projects x specs x sessions, each
session file with files understood, patterns, gotchas, what worked/failed, recommendations, plus
episodic conversation turns) through the public API, then times ``Memory.search`` with scope
``project`` and ``all``, and ``graphmem search`` as a new process (in-process models and index,
and through a running ``graphmem search-server``).

Every timed search uses a query vector cache emptied first (a new query each time, the model
runs); the "repeat" columns time the same queries again (cached vector: ranking only).

    .venv/bin/python bench/search.py [--sizes 1000,10000,100000] [--queries 200]
                                     [--embedder default|wordllama] [--cli-runs 7]
"""

from __future__ import annotations

import argparse
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import pct, table, write_json  # noqa: E402

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


def time_searches(specs: list[Path], settings, scope: str, queries: int,
                  rng) -> tuple[list[float], list[float]]:
    """(latencies with a fresh query vector, latencies of the same queries repeated) in ms."""
    from graphmem import Memory
    from graphmem.index import query as local_query

    qs = []
    for _ in range(queries):
        x = _words(rng)
        qs.append(rng.choice([f"{x['tech']} {x['area']} timeout", f"why is {x['area']} data stale",
                              f"how to call {x['tech']} safely", x["mod"],
                              f"payments charged twice after a retry in {x['area']}"]))
    lat, again = [], []
    with Memory(specs[0], settings=settings) as m:
        m.search("warm up", scope=scope)
        for q in qs:
            local_query._VECTORS.clear()  # a new query: the embedder runs
            t = time.perf_counter()
            m.search(q, scope=scope, limit=10)
            lat.append((time.perf_counter() - t) * 1000)
        for q in qs:
            m.search(q, scope=scope, limit=10)  # vector cached: what ranking alone costs
            t = time.perf_counter()
            m.search(q, scope=scope, limit=10)
            again.append((time.perf_counter() - t) * 1000)
    return lat, again


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


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1000,10000,100000")
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--embedder", default="default",
                    help="local embedding model (default: bge-small; wordllama ingests faster)")
    ap.add_argument("--cli-runs", type=int, default=7)
    args = ap.parse_args()
    from graphmem import Settings

    env_extra = {"GRAPHMEM_LOCAL_EMBEDDING_MODEL": args.embedder}
    rows, out = [], {"sizes": {}, "embedder": args.embedder, "load_before": os.getloadavg()}
    for size in (int(s) for s in args.sizes.split(",")):
        rng = random.Random(size)
        with tempfile.TemporaryDirectory() as tmp:
            settings = Settings.load(home=str(Path(tmp) / "home"))
            settings.providers.local.embedding_model = args.embedder
            n, secs, specs = ingest(Path(tmp), settings, size, rng)
            t = time.perf_counter()
            time_searches(specs, settings, "all", 0, rng)  # first search builds the saved base
            build_ms = (time.perf_counter() - t) * 1000
            res = {"items": n, "ingest_items_per_s": n / secs, "first_search_ms": build_ms,
                   "load": os.getloadavg()}
            for scope in ("project", "all"):
                lat, again = time_searches(specs, settings, scope, args.queries, rng)
                res[scope] = {"p50_ms": pct(lat, 50), "p95_ms": pct(lat, 95),
                              "repeat_p50_ms": pct(again, 50), "repeat_p95_ms": pct(again, 95)}
                rows.append([n, scope, n / secs, pct(lat, 50), pct(lat, 95), pct(again, 50),
                             pct(again, 95)])
            res["cli"] = cli_runs(specs[0], Path(tmp) / "home", env_extra, args.cli_runs)
            out["sizes"][str(size)] = res
            print(f"{n} items: ingest {n / secs:.0f}/s, first search {build_ms:.0f} ms, "
                  f"graphmem search process: cold {res['cli']['cold_ms']['median']:.0f} ms, "
                  f"with search-server {res['cli']['warm_ms']['median']:.0f} ms (medians); "
                  f"load {res['load'][0]:.1f}", flush=True)
    table("Local search at scale (ms; repeat = same query again, vector cached)",
          ["items", "scope", "ingest/s", "p50", "p95", "repeat p50", "repeat p95"], rows)
    write_json("search", out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
