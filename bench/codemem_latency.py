"""Search and context latency of the codemem replay, without replaying the whole history each run.

The first run replays a dataset (``bench/codemem.py``'s protocol) up to ``--at`` sessions before
its last task and keeps that state (project repository, spec folder, index) in ``--state``.
Each run copies the kept state, opens it in a new process, writes ``--warm`` sessions untimed
(process caches fill as they would in a long replay), then goes on to the last task as the bench
does: each session is committed and written, and at a task's point a warm-up search runs and
each task is timed cold: ``search`` on even tasks, ``context`` at 4,000 tokens on odd ones (the
other call follows, untimed). With ``--profile N`` each stage's milliseconds and cProfile's N costliest
functions are printed (see ``codemem.Profiled``). Quality is not scored here: ``codemem.py``.

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
from _codemem_replay import SPEC, Repo, load_dataset, write_session  # noqa: E402
from _common import need, pct, table, write_json  # noqa: E402
from codemem import DATA, Profiled  # noqa: E402


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
        prof = Profiled(args.profile)
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
                    t = time.perf_counter()
                    with prof:
                        if n % 2 == 0:
                            mem.search(text, scope="project", limit=20)
                        else:
                            mem.context(text, max_tokens=4000)
                    lat["search" if n % 2 == 0 else "context"].append(
                        (time.perf_counter() - t) * 1000)
                    if n % 2 == 0:
                        mem.context(text, max_tokens=4000)
                    else:
                        mem.search(text, scope="project", limit=20)
                    n += 1
        prof.report(name)
    out = {k: {"p50": pct(v, 50), "p95": pct(v, 95), "n": len(v)} for k, v in lat.items()}
    out["spans"] = {k: {"p50": pct(v, 50), "p95": pct(v, 95)} for k, v in prof.spans.items()}
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dataset", default="pytest")
    ap.add_argument("--state", default=os.path.join(tempfile.gettempdir(), "graphmem-codemem-state"),
                    help="where the replayed state is kept between runs")
    ap.add_argument("--at", type=int, default=60, help="sessions before the last task to stop at")
    ap.add_argument("--warm", type=int, default=5, help="sessions written untimed first")
    ap.add_argument("--profile", type=int, default=None, metavar="N")
    ap.add_argument("--out", default="codemem_latency")
    args = ap.parse_args()
    need(DATA, "the codemem datasets", "GRAPHMEM_CODEMEM_DATA")
    results = {}
    for name in args.dataset.split(","):
        res = results[name] = run(name, args)
        table(f"{name}: cold calls after a commit (load {os.getloadavg()[0]:.1f})",
              ["call", "n", "p50 ms", "p95 ms"],
              [[k, v["n"], v["p50"], v["p95"]] for k, v in res.items() if k != "spans"])
    results["load_average"] = os.getloadavg()
    write_json(args.out, results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
