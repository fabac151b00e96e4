"""``graphmem diff`` on a real history: the memories each commit made stale, moved or gone.

Replays ``--sessions`` sessions of a codemem dataset (``bench/codemem.py``'s protocol: each
session's code committed, then its memories written), then walks the history commit by commit
as ``graphmem diff C~1..C`` does: the memories learned before C~1 and anchored to a file C
touched are judged on both trees. Prints the milliseconds per commit (the finder alone, and the
whole ``Memory.diff`` on ``--full`` commits, which also reads the memory files and the committed
ones at both commits) and how many memories were named; writes ``bench/results/memory_diff.json``.

    nice -n 10 .venv/bin/python bench/memory_diff.py --dataset pytest --sessions 300
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("GRAPHITI_TELEMETRY_ENABLED", "false")
sys.path.insert(0, str(Path(__file__).resolve().parent))
from _codemem_replay import SPEC, Repo, load_dataset, write_session
from _common import need, pct, table, write_json
from codemem import DATA


def run(name: str, sessions: int, full: int) -> dict:
    from graphmem import Memory, Settings
    from graphmem.code.memory_diff import StaleFinder

    data = load_dataset(DATA / name)
    todo = data["sessions"][:sessions]
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp) / "project"
        repo = Repo(root, data["tree0"], data["symbols0"])
        (root / SPEC).mkdir(parents=True)
        heads = [repo._git("rev-parse", "HEAD").strip()]
        t0 = time.perf_counter()
        settings = Settings.load(home=str(Path(tmp) / "home"))
        with Memory(root / SPEC, root, settings=settings) as mem:
            for i, s in enumerate(todo):
                repo.apply(s)
                repo.commit(s["id"], s["time"])
                heads.append(repo._git("rev-parse", "HEAD").strip())
                write_session(mem, i, s)
                if i % 100 == 0:
                    print(f"{name}: replay, session {i}/{len(todo)}, "
                          f"{time.perf_counter() - t0:.0f} s", flush=True)
        replay_s = time.perf_counter() - t0
        finder = StaleFinder(root, [root / SPEC])
        per, named, states = [], 0, {"stale": 0, "moved": 0, "gone": 0}
        busiest = (0, "")
        for base, head in zip(heads, heads[1:]):
            t = time.perf_counter()
            rows = finder.find(base, head)
            per.append((time.perf_counter() - t) * 1000)
            named += len(rows)
            for r in rows:
                states[r["state"]] += 1
            busiest = max(busiest, (len(rows), head[:10]))
        whole = []
        with Memory(None, root, settings=settings) as mem:
            for base, head in list(zip(heads, heads[1:]))[-full:]:
                t = time.perf_counter()
                mem.diff(f"{base}..{head}")
                whole.append((time.perf_counter() - t) * 1000)
    return {"dataset": name, "commits": len(per), "replay_s": round(replay_s, 1),
            "finder_ms_p50": round(pct(per, 50), 1), "finder_ms_p95": round(pct(per, 95), 1),
            "finder_ms_max": round(max(per), 1), "full_commits": len(whole),
            "full_ms_p50": round(pct(whole, 50), 1) if whole else None,
            "full_ms_max": round(max(whole), 1) if whole else None,
            "named": named, **states, "busiest_commit": {"named": busiest[0], "head": busiest[1]}}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dataset", default="pytest")
    ap.add_argument("--sessions", type=int, default=300, help="sessions replayed (commits walked)")
    ap.add_argument("--full", type=int, default=20, help="last commits timed through Memory.diff")
    args = ap.parse_args()
    need(DATA / args.dataset, "the codemem dev data", "GRAPHMEM_CODEMEM_DATA")
    r = run(args.dataset, args.sessions, args.full)
    table(f"graphmem diff, commit by commit ({r['dataset']}, {r['commits']} commits)",
          ["stage", "p50 ms", "p95 ms", "max ms"],
          [["stale finder", r["finder_ms_p50"], r["finder_ms_p95"], r["finder_ms_max"]],
           [f"Memory.diff (last {r['full_commits']})", r["full_ms_p50"], "", r["full_ms_max"]]])
    print(f"named {r['named']} memories: {r['stale']} stale, {r['moved']} moved, {r['gone']} gone;"
          f" busiest commit {r['busiest_commit']['head']} named {r['busiest_commit']['named']}")
    write_json("memory_diff", r)


if __name__ == "__main__":
    main()
