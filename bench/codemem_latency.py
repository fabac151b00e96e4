"""Search and context latency of the codemem replay, without replaying the whole history each run.

The first run replays a dataset (``bench/codemem.py``'s protocol) up to ``--at`` sessions before
its last task and keeps that state (project repository, spec folder, index) in ``--state``.
Each run copies the kept state, opens it in a new process, writes ``--warm`` sessions untimed
(process caches fill as they would in a long replay), then goes on to the last task as the bench
does: each session is committed and written, and at a task's point a warm-up search runs and
each task is timed cold: ``search`` on even tasks, ``context`` at 4,000 tokens on odd ones (the
other call follows, untimed). With ``--profile N`` each stage's milliseconds and cProfile's N costliest
functions are printed (see ``codemem.Profiled``); with ``--slowest N`` the stages of the search
(``SEARCH_STAGES`` too) are clocked without a profiler and the N slowest calls of each kind are
printed stage by stage, beside the median call. With ``--pause SECONDS`` each timed call waits
that long first, as an agent's searches minutes apart do (past ``untracked_ttl``: the code
snapshot's untracked list is then checked or read again); ``git ls-files -o`` runs are counted
and the snapshot's listing (``tree._untracked``) is clocked as a stage. Quality is not scored
here: ``codemem.py``.

    .venv/bin/python bench/codemem_latency.py --dataset pytest [--at 60] [--profile 30]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _codemem_replay import SPEC, Repo, load_dataset, write_session
from _common import ListingCounter, need, pct, table, write_json
from codemem import DATA, Profiled

# the local index's half of a search, clocked with ``--slowest`` (module, function)
SEARCH_STAGES = (("graphmem.facade.episode_log", "EpisodeLog.settle"),
                 ("graphmem.facade.derived_sync", "DerivedSync.adopt"),
                 ("graphmem.facade.derived", "DerivedStores.replay_index"),
                 ("graphmem.facade.derived", "DerivedStores.localise"),
                 ("graphmem.index.local_index", "LocalIndex.snapshot"),
                 ("graphmem.index.ranker", "lexical"),
                 ("graphmem.index.local_search", "_late_stage"),
                 ("graphmem.index.late", "token_rows"), ("graphmem.index.late", "token_best"),
                 ("graphmem.index.storage", "IndexStore.rows"),
                 ("graphmem.index.storage", "IndexStore.rows_by_id"),
                 ("graphmem.index.local_search", "hit_of"), ("graphmem.code.tree", "snapshot"),
                 ("graphmem.code.tree", "_untracked"), ("graphmem.code.freshness", "named_code"))


def keep_state(name: str, data: dict, state: Path, stop: int) -> None:
    """Replay sessions ``[0, stop)`` into ``state`` (project, home, ``repo.json``)."""
    from graphmem import Memory, Settings

    tmp = state.with_name(state.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    root = tmp / "project"
    repo = Repo(root, data["tree0"], data["symbols0"])
    (root / SPEC).mkdir(parents=True)
    t0 = time.perf_counter()
    with Memory(root / SPEC, root, settings=Settings.load(home=str(tmp / "home"))) as mem:
        for i, s in enumerate(data["sessions"][:stop]):
            repo.apply(s)
            repo.commit(s["id"], s["time"])
            write_session(mem, i, s)
            if i % 100 == 0:
                print(f"{name}: kept state, session {i}/{stop}, {time.perf_counter() - t0:.0f} s",
                      flush=True)
    (tmp / "repo.json").write_text(json.dumps({"next": stop, **repo.state()}))
    tmp.rename(state)


def run(name: str, args) -> dict:
    from graphmem import Memory, Settings

    data = load_dataset(DATA / name)
    sessions = data["sessions"]
    last = max(t["after"] for t in data["tasks"] if t["after"] < len(sessions))
    state = Path(args.state) / name
    if not (state / "repo.json").exists():
        keep_state(name, data, state, max(1, last + 1 - args.at))
    saved = json.loads((state / "repo.json").read_text())
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp) / name
        shutil.copytree(state, work, symlinks=True)
        root = work / "project"
        repo = Repo.resume(root, saved)
        prof = Profiled(args.profile, SEARCH_STAGES if args.slowest or args.pause else (),
                        bool(args.slowest or args.pause))
        listings = ListingCounter()
        kinds: list[str] = []  # "search" or "context", per timed call
        lat: dict[str, list[float]] = {"search": [], "context": [], "write": []}
        start = saved["next"]
        n = 0
        by_after: dict[int, list[str]] = {}
        for t in data["tasks"]:
            by_after.setdefault(t["after"], []).append(t["text"])
        with Memory(root / SPEC, root, settings=Settings.load(home=str(work / "home"))) as mem:
            for i in range(start, min(len(sessions), last + 1)):
                s = sessions[i]
                t0 = time.perf_counter()
                repo.apply(s)
                repo.commit(s["id"], s["time"])
                write_session(mem, i, s)
                timed = i >= start + args.warm
                if timed:
                    lat["write"].append((time.perf_counter() - t0) * 1000)
                if not timed or i not in by_after:
                    continue
                mem.search("warm up before the tasks of this point", scope="project", limit=1)
                for text in by_after[i]:  # as codemem.py times them: one cold call per task
                    time.sleep(args.pause)
                    t = time.perf_counter()
                    with prof:
                        if n % 2 == 0:
                            mem.search(text, scope="project", limit=20)
                        else:
                            mem.context(text, max_tokens=4000)
                    lat["search" if n % 2 == 0 else "context"].append(
                        (time.perf_counter() - t) * 1000)
                    kinds.append("search" if n % 2 == 0 else "context")
                    if n % 2 == 0:
                        mem.context(text, max_tokens=4000)
                    else:
                        mem.search(text, scope="project", limit=20)
                    n += 1
        prof.report(name)
        listings.stop()
    if args.slowest:
        for kind in ("search", "context"):
            stages = [c for c, k in zip(prof.calls, kinds) if k == kind]
            slowest(name, kind, list(zip(lat[kind], stages)), args.slowest)
    out = {k: {"p50": pct(v, 50), "p95": pct(v, 95), "n": len(v)} for k, v in lat.items()}
    out["spans"] = {k: {"p50": pct(v, 50), "p95": pct(v, 95)} for k, v in prof.spans.items()}
    out["ls_files_o_runs"] = listings.runs
    if args.pause:
        table(f"{name}: stages of the timed calls, {args.pause} s apart (ms; git ls-files -o ran "
              f"{listings.runs} times in the run)", ["stage", "calls", "p50", "p95"],
              [[k, len(v), pct(v, 50), pct(v, 95)] for k, v in sorted(prof.spans.items())
               if k in ("snapshot", "_untracked", "DerivedStores.search_local")])
    return out



def slowest(name: str, kind: str, calls: list[tuple[float, dict]], n: int) -> None:
    """Print the ``n`` slowest calls' stage times beside the median call's (ms; stages nest:
    ``DerivedStores.search_local`` holds ``_encode`` ... ``hit_of``)."""
    if not calls:
        return
    ranked = sorted(calls, key=lambda c: -c[0])
    median = sorted(calls, key=lambda c: c[0])[len(calls) // 2]
    shown = [median, *ranked[:n]]
    stages = sorted({k for _, c in calls for k in c}, key=lambda k: -max(c.get(k, 0) for _, c in shown))
    rows = [[k, *(c.get(k, 0.0) for _, c in shown)] for k in stages]
    table(f"{name}: the {n} slowest of {len(calls)} {kind} calls, ms per stage (first: median)",
          ["stage", *(f"{ms:.1f}" for ms, _ in shown)], rows)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dataset", default="pytest")
    ap.add_argument("--state", default=os.path.join(tempfile.gettempdir(), "graphmem-codemem-state"),
                    help="where the replayed state is kept between runs")
    ap.add_argument("--at", type=int, default=60, help="sessions before the last task to stop at")
    ap.add_argument("--warm", type=int, default=5, help="sessions written untimed first")
    ap.add_argument("--profile", type=int, default=None, metavar="N")
    ap.add_argument("--slowest", type=int, default=None, metavar="N",
                    help="clock the stages (no profiler) and print the N slowest calls' times")
    ap.add_argument("--pause", type=float, default=0.0, metavar="SECONDS",
                    help="wait before each timed call (an agent's spacing; > untracked_ttl)")
    ap.add_argument("--out", default="codemem_latency")
    args = ap.parse_args()
    need(DATA, "the codemem datasets", "GRAPHMEM_CODEMEM_DATA")
    results = {}
    for name in args.dataset.split(","):
        res = results[name] = run(name, args)
        table(f"{name}: cold calls after a commit (load {os.getloadavg()[0]:.1f})",
              ["call", "n", "p50 ms", "p95 ms"],
              [[k, v["n"], v["p50"], v["p95"]] for k, v in res.items()
               if k in ("search", "context", "write")])
    results["load_average"] = os.getloadavg()
    write_json(args.out, results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
