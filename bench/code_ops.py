"""Code-memory operations: freshness of a result list, ``about``, and what the code graph adds to
a write, on a synthetic git project that evolves (edits, renames, deletions).

    .venv/bin/python bench/code_ops.py [--files 300] [--memories 400] [--commits 20] [--no-graph]

A project of ``--files`` Python modules (8 functions and a class each) is committed; ``--memories``
gotchas naming a function, a method or a path are written through ``Memory``; then ``--commits``
commits each edit 3% of the files, rename 1% and delete one. After each commit it times, per
call, through the public API unless said otherwise:

- ``freshness``: ``graphmem.code.with_freshness`` over 20 hits, first list after the commit
  (cold: git read again) and the same list again (warm);
- ``about``: ``Memory.about`` of a path and of a symbol, from the files (graph off) and from the
  embedded FalkorDB (graph on, wordllama embedder);
- ``write``: ``append_gotcha`` with the graph on, for a note naming code and one naming none; the
  code graph's own share (``graph.code_graph.write_code``) and the anchors' (``record_anchors``);
- ``refresh``: ``Memory.refresh_anchors`` (what the git hooks run) after the last commit.
"""

from __future__ import annotations

import argparse
import os
import random
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import pct, table, write_json


def git(root: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True)


def module(i: int, version: int) -> str:
    funcs = "".join(f"def f{i}_{k}(x):\n    return x + {version if k == version % 8 else k}\n\n\n"
                    for k in range(8))
    return f'"""Module {i}."""\n\n\n{funcs}class C{i}:\n    def run(self):\n        return {i}\n'


def build(root: Path, n: int) -> list[str]:
    paths = [f"src/pkg{i % 10}/mod_{i}.py" for i in range(n)]
    for i, p in enumerate(paths):
        (root / p).parent.mkdir(parents=True, exist_ok=True)
        (root / p).write_text(module(i, 0))
    git(root, "init", "-q")
    git(root, "config", "user.email", "bench@example.invalid")
    git(root, "config", "user.name", "bench")
    (root / ".git" / "info" / "exclude").write_text("specs/\n")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "start")
    return paths


def evolve(root: Path, paths: list[str], rnd: random.Random, step: int) -> None:
    live = [p for p in paths if (root / p).exists()]
    for p in rnd.sample(live, max(1, len(live) * 3 // 100)):
        i = int(re.search(r"mod_(\d+)", p).group(1))
        (root / p).write_text(module(i, step + 1))
    for p in rnd.sample(live, max(1, len(live) // 100)):
        if (root / p).exists():
            new = p.replace(".py", f"_v{step}.py")
            git(root, "mv", p, new)
            paths.append(new)
    gone = rnd.choice([p for p in live if (root / p).exists()])
    (root / gone).unlink()
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", f"step {step}")


def timed_wrap(module_obj, name: str, sink: list[float]):
    plain = getattr(module_obj, name)

    def wrapper(*a, **kw):
        t = time.perf_counter()
        try:
            return plain(*a, **kw)
        finally:
            sink.append((time.perf_counter() - t) * 1000)

    async def awrapper(*a, **kw):
        t = time.perf_counter()
        try:
            return await plain(*a, **kw)
        finally:
            sink.append((time.perf_counter() - t) * 1000)

    import inspect

    setattr(module_obj, name, awrapper if inspect.iscoroutinefunction(plain) else wrapper)


def run(args, tmp: Path) -> dict:
    os.environ["GRAPHMEM_HOME"] = str(tmp / "home")
    os.environ["GRAPHMEM_LOCAL_EMBEDDING_MODEL"] = "wordllama"
    os.environ["GRAPHMEM_GRAPH"] = "off" if args.no_graph else "on"
    import graphmem.code
    import graphmem.graph.code_graph as code_graph
    from graphmem import Memory, Settings

    rnd = random.Random(7)
    root = tmp / "project"
    root.mkdir()
    paths = build(root, args.files)
    spec = root / "specs" / "001"
    spec.mkdir(parents=True)
    lat: dict[str, list[float]] = {k: [] for k in (
        "freshness_cold", "freshness_warm", "about_path_files", "about_symbol_files",
        "about_path_graph", "about_symbol_graph", "write_code_note", "write_plain_note",
        "code_graph_share", "anchors_share", "refresh")}
    timed_wrap(code_graph, "write_code", lat["code_graph_share"])
    timed_wrap(graphmem.code, "record_anchors", lat["anchors_share"])
    notes = []
    for m in range(args.memories):
        i = rnd.randrange(args.files)
        notes.append(rnd.choice([f"`f{i}_{m % 8}` must stay pure (note {m})",
                                 f"C{i}.run is called once per request (note {m})",
                                 f"{paths[i]} holds the pricing rules (note {m})"]))
    with Memory(spec, root) as mem:
        t0 = time.perf_counter()
        for text in notes:
            mem.append_gotcha(text)
        ingest_s = time.perf_counter() - t0
        lat["code_graph_share"].clear()
        lat["anchors_share"].clear()
        hits = mem.search("must stay pure pricing rules request", scope="project", limit=20)
        settings = mem.settings
        off = Settings.load(graph__mode="off")
        for step in range(args.commits):
            evolve(root, paths, rnd, step)
            for key in ("freshness_cold", "freshness_warm"):
                t = time.perf_counter()
                graphmem.code.with_freshness(hits, root)
                lat[key].append((time.perf_counter() - t) * 1000)
            i = rnd.randrange(args.files)
            targets = {"path": paths[i], "symbol": f"f{i}_{step % 8}"}
            with Memory(spec, root, settings=off) as plain:
                for kind, target in targets.items():
                    t = time.perf_counter()
                    plain.about(target)
                    lat[f"about_{kind}_files"].append((time.perf_counter() - t) * 1000)
            if settings.graph.mode != "off":
                for kind, target in targets.items():
                    t = time.perf_counter()
                    mem.about(target)
                    lat[f"about_{kind}_graph"].append((time.perf_counter() - t) * 1000)
                for key, text in (("write_code_note", f"`f{i}_1` rounds half up (step {step})"),
                                  ("write_plain_note", f"deploys wait for the queue (step {step})")):
                    t = time.perf_counter()
                    mem.append_gotcha(text)
                    lat[key].append((time.perf_counter() - t) * 1000)
        t = time.perf_counter()
        refreshed = mem.refresh_anchors()
        lat["refresh"].append((time.perf_counter() - t) * 1000)
    return {"files": args.files, "memories": args.memories, "commits": args.commits,
            "graph": settings.graph.mode, "ingest_s": ingest_s, "refresh": refreshed,
            "anchors_bytes": (spec / "memory" / "anchors.jsonl").stat().st_size,
            "latency_ms": {k: {"n": len(v), "p50": pct(v, 50), "p95": pct(v, 95)}
                           for k, v in lat.items()}}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--files", type=int, default=300)
    ap.add_argument("--memories", type=int, default=400)
    ap.add_argument("--commits", type=int, default=20)
    ap.add_argument("--no-graph", action="store_true", help="files only (no embedded FalkorDB)")
    ap.add_argument("--out", default="code_ops")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        try:
            res = run(args, Path(tmp))
        finally:
            if not args.no_graph:
                from graphmem import Settings
                from graphmem.graph import server

                server.EmbeddedServer(Settings.load()).stop()
    rows = [[k, v["n"], v["p50"], v["p95"]] for k, v in res["latency_ms"].items() if v["n"]]
    table(f"code operations: {res['files']} files, {res['memories']} memories, {res['commits']} "
          f"commits, graph {res['graph']}; ingest {res['ingest_s']:.1f} s, anchors.jsonl "
          f"{res['anchors_bytes'] / 1000:.0f} kB; refresh {res['refresh']}",
          ["operation (ms)", "n", "p50", "p95"], rows)
    res["load_average"] = os.getloadavg()
    write_json(args.out, res)
    return 0


if __name__ == "__main__":
    sys.exit(main())
