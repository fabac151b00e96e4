"""What review's steps cost an export and an import (issue 36): a held project of N memories.

A project in ``review.mode = hold`` whose N gotchas the agent hooks' path wrote held (N/5 sessions
of five), a third of them accepted, a third rejected (two review steps), and ``--episodes E``
episodic sessions of ``--turns T`` turns and T/2 steps each (ended), is exported; the export
is imported into a fresh project as it is (every review step replayed; the gotchas arrive in
their session files, export version 3) and with its review lines taken out (what an export
without review state costs), each twice (cold, then again: the idempotent path). The imports
index by words (``embed="later"``) so the model stays out of the figures. Prints a table and
writes ``results/export_review.json``.

    python bench/export_review.py [--memories 500] [--episodes 0] [--turns 20]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import table, write_json


def project(path: Path) -> Path:
    """A fresh git project."""
    (path / "src").mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(path)], check=True)
    return path


def main() -> None:
    """Run the benchmark and print its table."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--memories", type=int, default=500, help="memories held (default 500)")
    ap.add_argument("--episodes", type=int, default=0,
                    help="episodic sessions recorded in the source (default 0)")
    ap.add_argument("--turns", type=int, default=20, help="turns per episode (default 20)")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="gm-export-review-"))
    os.environ["GRAPHMEM_HOME"] = str(tmp / "home")
    os.environ.setdefault("GRAPHMEM_SEARCH_SERVER", "off")
    os.environ["GRAPHMEM_AUTHOR"] = "bench@example.invalid"
    from graphmem import Memory

    src = project(tmp / "src")
    t = time.perf_counter()
    with Memory(None, src) as m:
        for s in range(args.memories // 5):
            notes = [f"The ledger-{s}-{k} importer must not retry batch {s * 5 + k} on a timeout"
                     for k in range(5)]
            m.save_session_insights(s + 1, {"discoveries": {"gotchas_encountered": notes}},
                                    hold=True)
        ids = [x["id"] for x in m.review_pending()["pending"] if x["kind"] == "gotcha"]
        third = len(ids) // 3
        m.accept(ids[:third])
        m.reject(ids[third:2 * third])
        for e in range(args.episodes):
            sid = m.start_session(model="bench-model")
            m.record_turns(sid, [{"role": ("user", "assistant")[k % 2], "content":
                                  f"Episode {e} turn {k}: the ledger-{e} batch {k} timed out "
                                  "twice, retry with a smaller page", "tokens": 40}
                                 for k in range(args.turns)])
            for k in range(args.turns // 2):
                m.record_step(sid, "pytest", "ok" if k % 3 else "failed",
                              {"tests": k, "file": f"tests/test_ledger_{e}.py"})
            m.end_session(sid)
        setup_s = time.perf_counter() - t
        t = time.perf_counter()
        text = m.export(tmp / "full.jsonl")
        export_s = time.perf_counter() - t
    lines = text.splitlines()
    review = [x for x in lines if '"act": ' in x]
    episodes = [x for x in lines if x.startswith('{"type": "episode"') or
                '"kind": "turn"' in x or '"kind": "step"' in x]
    (tmp / "bare.jsonl").write_text("".join(x + "\n" for x in lines if '"act": ' not in x))
    data: dict = {"memories": len(ids), "setup_seconds": round(setup_s, 2),
                  "export_seconds": round(export_s, 3), "export_lines": len(lines),
                  "review_lines": len(review), "export_bytes": len(text.encode()),
                  "review_bytes": sum(len(x.encode()) + 1 for x in review),
                  "episodes": args.episodes, "turns_per_episode": args.turns,
                  "episode_lines": len(episodes),
                  "episode_bytes": sum(len(x.encode()) + 1 for x in episodes),
                  "load_average": os.getloadavg(), "cpus": os.cpu_count()}
    rows = []
    for name in ("bare", "full"):
        target = project(tmp / f"to-{name}")
        for run in ("cold", "again"):
            t, cpu = time.perf_counter(), time.process_time()
            with Memory(None, target) as m:
                r = m.import_paths([tmp / f"{name}.jsonl"], embed="later")
            s, cpu = time.perf_counter() - t, time.process_time() - cpu
            rows.append([name, run, r["added"]["gotcha"], r["added"].get("session", 0),
                         r["added"]["validity"], r["added"].get("episode", 0),
                         sum(e["turns"] for e in r.get("episodes", []) if e["new"]),
                         r["review"]["pending"], r["review"]["rejected"], len(r["skipped"]), s, cpu])
            data[f"{name}_{run}"] = {"seconds": round(s, 3), "cpu_seconds": round(cpu, 3),
                                     "added": r["added"], "review": r["review"]}
        log = target / ".graphmem" / "memory" / "validity.jsonl"
        data[f"{name}_log_lines"] = len(log.read_text().splitlines()) if log.exists() else 0
    table(f"export/import of a held project ({len(ids)} memories; export {export_s:.3f} s, "
          f"{len(lines)} lines, {len(review)} of them review steps, "
          f"{data['review_bytes'] / 1024:.0f} of {data['export_bytes'] / 1024:.0f} KiB; "
          f"{len(episodes)} episode lines, {data['episode_bytes'] / 1024:.0f} KiB)",
          ["export", "run", "gotchas", "sessions", "log lines", "episodes", "turns", "pending",
           "rejected", "skipped", "seconds", "cpu s"], rows)
    print(f"\nreview lines: +{data['full_cold']['seconds'] - data['bare_cold']['seconds']:.3f} s "
          f"cold, +{data['full_again']['seconds'] - data['bare_again']['seconds']:.3f} s again; "
          f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    write_json("export_review", data)
    import shutil

    shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
