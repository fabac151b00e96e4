"""File-store latency: append_gotcha and save_session_insights with 100 / 1,000 / 10,000 items.

Compares graphmem's file store (atomic replace / whole-line append, fsync, cross-process lock,
validation and redaction) with the reference implementation (no fsync, no lock, rereads the whole
file per append), both run here in the same process. The reference is loaded from
``../shared/reference`` for this benchmark only.

Columns: ``files`` is the file store alone (validation + redaction + SpecStore, what every write
pays); ``memory`` is the full ``Memory`` façade including the derived local index (and the graph
when ``GRAPHMEM_GRAPH=on``).

Targets (issue 2): append_gotcha p50 within 3x of the reference at 100 items, and 5x faster
than it at 10,000 items.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import shutil
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import need, pct, table, timed, write_json

SIZES = (100, 1_000, 10_000)
REFERENCE = Path(os.environ.get("GRAPHMEM_REFERENCE_DIR")
                 or Path(__file__).resolve().parents[1].parent / "shared" / "reference"
                 ) / "auto-claude-memory.py.txt"


def load_reference(tmp: Path):
    text = REFERENCE.read_text()
    mod_path = tmp / "reference_memory.py"
    mod_path.write_text(text[text.index("#!/usr/bin/env python3"):])
    spec = importlib.util.spec_from_file_location("reference_memory", mod_path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def seed(spec: Path, n: int) -> None:
    """n gotchas and n session files, in the reference format."""
    mem = spec / "memory"
    (mem / "session_insights").mkdir(parents=True)
    lines = "".join(f"- existing gotcha number {i} about some subsystem\n" for i in range(n))
    (mem / "gotchas.md").write_text("# Gotchas and Pitfalls\n\nThings to watch out for in this codebase:\n\n" + lines)
    for i in range(1, n + 1):
        (mem / "session_insights" / f"session_{i:03d}.json").write_text('{"session_number": %d}' % i)


INSIGHTS = {"subtasks_completed": ["s1"], "what_worked": ["validated tokens in middleware"],
            "discoveries": {"files_understood": {"src/auth.py": "JWT checks"},
                            "patterns_found": ["inject clients"], "gotchas_encountered": ["close pools"]}}


def run(reps: int) -> dict:
    from graphmem import Memory
    from graphmem.files import SpecStore
    from graphmem.models import Note, SessionInsights, parse
    from graphmem.redact import redact

    results: dict = {}
    tmp = Path(tempfile.mkdtemp(prefix="gm-bench-"))
    try:
        ref = load_reference(tmp)

        def files_append(store, text):
            store.append_bullet("gotcha", redact(parse(Note, {"text": text}, "gotcha", wrapped=True).text))

        def files_session(store, num):
            store.save_session_insights(num, redact(parse(SessionInsights, INSIGHTS, "insights").model_dump()))

        for n in SIZES:
            row = {}
            for impl in ("reference", "files", "memory"):
                spec = tmp / impl / str(n) / "specs" / "001"
                seed(spec, n)
                store = SpecStore(spec)
                mem = Memory(spec) if impl == "memory" else None
                if mem is not None:
                    mem.append_gotcha("warm-up: loads models and opens the index")
                g, s = [], []
                for i in range(reps):
                    text = f"new gotcha {i} found while benchmarking"
                    num = n + 1 + i
                    if impl == "reference":
                        g.append(timed(ref.append_gotcha, spec, text))
                        s.append(timed(ref.save_session_insights, spec, num, INSIGHTS))
                    elif impl == "files":
                        g.append(timed(files_append, store, text))
                        s.append(timed(files_session, store, num))
                    else:
                        g.append(timed(mem.append_gotcha, text))
                        s.append(timed(mem.save_session_insights, num, INSIGHTS))
                if mem is not None:
                    mem.close()
                row[impl] = {"append_gotcha": {"p50": pct(g, 50), "p95": pct(g, 95)},
                             "save_session_insights": {"p50": pct(s, 50), "p95": pct(s, 95)}}
            results[n] = row
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return results


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=200)
    args = ap.parse_args()
    need(REFERENCE, "the reference memory module", "GRAPHMEM_REFERENCE_DIR")
    res = run(args.reps)
    rows = []
    for n, r in res.items():
        for op in ("append_gotcha", "save_session_insights"):
            ref = r["reference"][op]["p50"]
            rows.append([n, op, ref, r["reference"][op]["p95"], r["files"][op]["p50"], r["files"][op]["p95"],
                         r["memory"][op]["p50"], r["memory"][op]["p95"], f"{r['files'][op]['p50'] / ref:.2f}x"])
    table("File store latency, ms (reference: no fsync, no lock; graphmem: fsync + lock + validation)",
          ["items", "operation", "ref p50", "ref p95", "files p50", "files p95", "memory p50",
           "memory p95", "files/ref"], rows)
    a100 = res[100]["files"]["append_gotcha"]["p50"] / res[100]["reference"]["append_gotcha"]["p50"]
    a10k = res[10_000]["reference"]["append_gotcha"]["p50"] / res[10_000]["files"]["append_gotcha"]["p50"]
    targets = {"append_gotcha_100_within_3x": a100 <= 3.0, "append_gotcha_10k_5x_faster": a10k >= 5.0,
               "ratio_100": a100, "speedup_10k": a10k}
    print(f"\nappend_gotcha at 100 items: {a100:.2f}x the reference (target <= 3x) -> "
          f"{'met' if targets['append_gotcha_100_within_3x'] else 'MISSED'}")
    print(f"append_gotcha at 10,000 items: {a10k:.1f}x faster than the reference (target >= 5x) -> "
          f"{'met' if targets['append_gotcha_10k_5x_faster'] else 'MISSED'}")
    write_json("file_store", {"reps": args.reps, "results_ms": res, "targets": targets})


if __name__ == "__main__":
    main()
