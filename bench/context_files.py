"""What ``context(task, files=[...])`` costs to pull the memories anchored to the given files.

Replays each dataset of ``../shared/data/codemem`` as ``bench/codemem.py`` does (the project is a
git repository evolving session by session, each session written through the public API), and
at each task that names files, times the step that finds the memories anchored there
(``freshness.anchored_to`` by the names the memories used, ``about.moved_here`` by the files'
new names): the first call after the session's write (the anchor book has new lines) and a
second one, then the whole ``context(task, files=...)`` call at 4,000 tokens. Prints a table and
writes JSON.

    .venv/bin/python bench/context_files.py [--datasets pytest,entire-cli] [--tasks N] [--out NAME]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _codemem_replay import load_dataset, start, write_session
from _common import pct, table, write_json
from codemem import DATA, spread


def pinned_ids(spec: Path, root: Path, files: list[str]) -> list[str]:
    """The lookup ``context(files=...)`` runs before reading the hits (see the docstring)."""
    from graphmem.code.about_answer import moved_here
    from graphmem.code.freshness import anchored_to
    from graphmem.code.tree import snapshot

    ids = anchored_to([spec], files)
    return ids + [i for i in moved_here([spec], files, snapshot(root)) if i not in ids]


def run_dataset(name: str, args, tmp: Path) -> dict:
    from graphmem import Memory, Settings
    from graphmem.code.anchors import book

    data = load_dataset(DATA / name)
    sessions = data["sessions"]
    tasks = spread([t for t in data["tasks"] if t["after"] < len(sessions) and t["files"]],
                   args.tasks)
    by_after, last, repo, spec = start(tmp / name / "project", data, tasks)
    root = repo.root
    times: dict[str, list[float]] = {"first": [], "again": [], "context": []}
    found: list[int] = []
    t_start = time.perf_counter()
    with Memory(spec, root, settings=Settings.load(home=str(tmp / name / "home"))) as mem:
        for i, s in enumerate(sessions[:last + 1]):
            repo.apply(s)
            repo.commit(s["id"], s["time"])
            write_session(mem, i, s)
            for task in by_after.get(i, []):
                files = task["files"][:50]  # the most context(files=) takes
                mem.search(task["text"], limit=1)  # the snapshot of this commit, as a search reads it
                for key in ("first", "again"):
                    t0 = time.perf_counter()
                    ids = pinned_ids(spec, root, files)
                    times[key].append((time.perf_counter() - t0) * 1000)
                found.append(len(ids))
                t0 = time.perf_counter()
                mem.context(task["text"], max_tokens=4000, files=files)
                times["context"].append((time.perf_counter() - t0) * 1000)
        book_lines = book(spec).lines
    print(f"{name}: {len(tasks)} tasks with files, {last + 1} sessions, "
          f"{time.perf_counter() - t_start:.0f} s", flush=True)
    return {"tasks": len(tasks), "anchor_lines": book_lines,
            "pinned_mean": sum(found) / len(found) if found else 0.0,
            **{f"{k}_p50": pct(v, 50) for k, v in times.items()},
            **{f"{k}_p95": pct(v, 95) for k, v in times.items()}}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--datasets", default="pytest,entire-cli")
    ap.add_argument("--tasks", type=int, default=None, help="at most N tasks, spread evenly")
    ap.add_argument("--out", default="context_files")
    args = ap.parse_args()
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.datasets.split(","):
            results[name] = run_dataset(name, args, Path(tmp))
    cols = ["dataset", "tasks", "anchor lines", "pinned", "lookup p50", "lookup p95",
            "again p50", "again p95", "context p50", "context p95"]
    table("context(files=...): finding the memories anchored to the task's files (ms)", cols,
          [[n, r["tasks"], r["anchor_lines"], r["pinned_mean"], r["first_p50"], r["first_p95"],
            r["again_p50"], r["again_p95"], r["context_p50"], r["context_p95"]]
           for n, r in results.items()])
    write_json(args.out, {"datasets": results})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
