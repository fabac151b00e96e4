"""One spec of 3,000+ sessions in today's Auto-Claude shape (a QA retry loop): every operation.

The spec is generated (``_autoclaude_spec.py``: 40 productive sessions, then a QA loop failing
the same way). Timed on it, in this process: ``reindex``, ``summary``, ``load_all_insights``,
``load_codebase_map``, ``search``, ``context``, ``save_session_insights`` (one more round of the
loop: its item's count is recomputed over every session) and ``consolidate``. ``first``
is the first call of a fresh ``Memory`` in a process that has not read the spec yet (what a CLI
call pays, imports and model load excluded: the model is loaded by a warm-up search in another
spec first); ``p50`` is the median of later calls (what a long-lived MCP server pays: session files
are cached until they change). ``cli`` is a whole ``graphmem <command>`` process, imports included.
Also reported: sessions, items indexed, and the retry loop's collapsed item with its count.

Target (issue 18): every operation interactive (summary was 0.2 s on the real 3,347-session
folder, where it counted nothing).

    .venv/bin/python bench/autoclaude.py [--sessions 3347] [--runs 5]
    .venv/bin/python bench/autoclaude.py --compat-only [--compat-writes 200] [--pause 0.3]
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
from _autoclaude_spec import LOOP_SUBTASK, write_spec
from _common import median, table, write_json


def ms(fn) -> tuple[float, object]:
    t = time.perf_counter()
    out = fn()
    return (time.perf_counter() - t) * 1000, out


def cli_ms(args: list[str], env: dict) -> float:
    t = time.perf_counter()
    r = subprocess.run([sys.executable, "-m", "graphmem.cli", *args], capture_output=True, env=env)
    if r.returncode != 0:
        raise SystemExit(r.stderr.decode())
    return (time.perf_counter() - t) * 1000


def spec_facts(spec: Path, counts: dict, gen_s: float) -> dict:
    """What the spec holds, as graphmem reports it."""
    from graphmem import Memory

    with Memory(spec) as m:
        s = m.summary()
        items = m.files.insight_items()
        hits = m.search("failed to complete the QA subtask", limit=5)
    loop = next(it for it in items if it.text == f"Failed to complete subtask: {LOOP_SUBTASK}")
    return {"sessions": s["total_sessions"], "files": s["total_files_mapped"],
            "patterns": s["total_patterns"], "gotchas": s["total_gotchas"],
            "insight items": len(items), "items indexed": counts.get("items"),
            "loop item count": loop.metadata["count"],
            "loop rounds as items": sum(1 for it in items if int(it.metadata["last_session"]) > 40),
            "top hit": f"{hits[0].text[:60]} (count {hits[0].metadata.get('count')})",
            "generate s": round(gen_s, 2)}


FIRST_SAVE = """
import os, sys, time
t = time.perf_counter()
from graphmem import compat
t_import = time.perf_counter() - t
t = time.perf_counter()
compat.save_session_insights(sys.argv[1], int(sys.argv[2]), {
    "what_failed": ["Failed to complete subtask: qa-fix-3"], "subtask_id": "qa-fix-3", "success": False})
print(t_import * 1000, (time.perf_counter() - t) * 1000, flush=True)
"""

# (label, GRAPHMEM_FILES_FSYNC): graphmem's default (durable when a call returns), then the opt-in
MODES = (("durable", None), ("files.fsync=false", "false"))


def percentile(xs: list[float], p: float) -> float:
    """The ``p`` quantile (nearest rank)."""
    xs = sorted(xs)
    return xs[max(0, min(len(xs) - 1, round(p * len(xs)) - 1))]


def compat_costs(root: Path, big_spec: Path, writes: int, pause: float) -> tuple[list[list], dict]:
    """What Auto-Claude pays per call through ``graphmem.compat`` (issue 33): each write function
    (p50/p95 over ``writes`` rounds, index on: it follows in the background, ``write_behind``),
    a search right after the last write of a round (it waits for the index to catch up), and the
    first save of a fresh process on a new spec and on the big one (imports apart); in graphmem's
    durable default and with the opt-in ``GRAPHMEM_FILES_FSYNC=false``. ``pause``: seconds
    between rounds (an agent works between its saves; 0: back to back)."""
    from graphmem import compat
    from graphmem.compat import _store

    rows: list[list] = []
    out: dict = {}
    for label, fsync in MODES:
        if fsync is None:
            os.environ.pop("GRAPHMEM_FILES_FSYNC", None)
        else:
            os.environ["GRAPHMEM_FILES_FSYNC"] = fsync
        spec = root / "proj" / "specs" / f"008-compat-{label.split('=')[0]}"
        spec.mkdir(parents=True)
        compat.save_session_insights(spec, 1, {"what_worked": ["warm"]})
        with _store.memory(spec) as m:
            m.search("warm")  # the model loaded outside the timings
        times: dict[str, list[float]] = {k: [] for k in (
            "save_session_insights", "update_codebase_map", "append_gotcha", "append_pattern",
            "search right after the writes")}
        calls = {
            "save_session_insights": lambda i, spec=spec: compat.save_session_insights(spec, i, {
                "what_worked": [f"approach {i} worked"],
                "discoveries": {"files_understood": {f"src/m{i}.py": "module"}}}),
            "update_codebase_map": lambda i, spec=spec: compat.update_codebase_map(
                spec, {f"src/pkg{i}/mod.py": f"module {i} of the package"}),
            "append_gotcha": lambda i, spec=spec: compat.append_gotcha(
                spec, f"gotcha {i}: close the pool before fork"),
            "append_pattern": lambda i, spec=spec: compat.append_pattern(
                spec, f"pattern {i}: one service per module"),
        }
        for i in range(2, writes + 2):
            for name, call in calls.items():
                t = time.perf_counter()
                call(i)
                times[name].append((time.perf_counter() - t) * 1000)
            if i % 10 == 0:  # every tenth round: what a read right after pays
                with _store.memory(spec) as m:
                    t = time.perf_counter()
                    m.search("close the pool before fork", limit=5)
                    times["search right after the writes"].append((time.perf_counter() - t) * 1000)
            if pause:
                time.sleep(pause)
        for name, xs in times.items():
            rows.append([f"{label}: compat {name}" if "search" not in name else f"{label}: {name}",
                         round(median(xs), 2), round(percentile(xs, .95), 2)])
            out[f"{label} {name}"] = {"p50_ms": median(xs), "p95_ms": percentile(xs, .95), "n": len(xs)}
        for name, target, num in (("new spec", root / "proj" / "specs" / f"009-first-{label[:4]}", 1),
                                  ("3,000-session spec", big_spec, 100_000 + len(out))):
            target.mkdir(parents=True, exist_ok=True)
            r = subprocess.run([sys.executable, "-c", FIRST_SAVE, str(target), str(num)],
                               capture_output=True, text=True, env=dict(os.environ))
            if r.returncode != 0:
                raise SystemExit(r.stderr)
            imp, first = (float(x) for x in r.stdout.split())
            rows.append([f"{label}: first save in a process ({name})", round(first, 1),
                         f"import {imp:.0f}"])
            out[f"{label} first save {name}"] = {"first_ms": first, "import_ms": imp}
    os.environ.pop("GRAPHMEM_FILES_FSYNC", None)
    return rows, out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sessions", type=int, default=3347)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--compat-writes", type=int, default=200)
    ap.add_argument("--compat-only", action="store_true", help="only the compat costs")
    ap.add_argument("--pause", type=float, default=0.0,
                    help="seconds between compat write rounds (an agent works between saves)")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        os.environ["GRAPHMEM_HOME"] = str(root / "home")
        os.environ.setdefault("GRAPHMEM_SEARCH_SERVER", "off")
        from graphmem import Memory
        from graphmem.files import spec_store

        spec = root / "proj" / "specs" / "007-qa-loop"
        t = time.perf_counter()
        write_spec(spec, total=args.sessions)
        gen_s = time.perf_counter() - t
        if args.compat_only:
            load0 = os.getloadavg()[0]
            rows, out = compat_costs(root, spec, args.compat_writes, args.pause)
            load = f"{load0:.1f}-{os.getloadavg()[0]:.1f}"
            table(f"compat costs ({args.sessions} sessions in the big spec; pause {args.pause} s; ms; "
                  f"load {load})", ["operation", "p50 / first", "p95"], rows)
            write_json("autoclaude_compat", {"sessions": args.sessions, "pause": args.pause,
                                             "load": load, "results": out})
            return
        warm = root / "proj" / "specs" / "000-warm"
        warm.mkdir(parents=True)
        with Memory(warm) as m:  # load the embedding model outside the timings
            m.append_gotcha("warm-up")
            m.search("warm-up")

        query = "failed to complete the QA subtask"
        rounds = iter(range(args.sessions + 1, args.sessions + 1000))

        def one_more_round(m):
            n = next(rounds)
            return m.save_session_insights(n, {
                "what_failed": [f"Failed to complete subtask: {LOOP_SUBTASK}"],
                "subtask_id": LOOP_SUBTASK, "success": False})
        ops = {
            "reindex": lambda m: m.reindex(),
            "summary": lambda m: m.summary(),
            "load_all_insights": lambda m: m.load_all_insights(),
            "load_codebase_map": lambda m: m.load_codebase_map(),
            "search": lambda m: m.search(query, limit=10),
            "context": lambda m: m.context("why does the QA fix keep failing", max_tokens=1500),
            "consolidate (50 latest, default)": lambda m: m.consolidate(),
            "consolidate (all sessions)": lambda m: m.consolidate(sessions=10_000),
            "save_session_insights (one more round)": one_more_round,  # last: it adds sessions
        }
        rows, results = [], {}
        counts = None
        for name, op in ops.items():
            if name.startswith("save_session_insights"):
                facts = spec_facts(spec, counts, gen_s)  # before the rounds it adds
            spec_store._SESSIONS.clear()  # "first": the spec's session files not read yet
            with Memory(spec) as m:
                first, out = ms(lambda op=op: op(m))
                if name == "reindex":
                    counts = out
                later = [ms(lambda op=op: op(m))[0] for _ in range(args.runs)]
            rows.append([name, round(first, 1), round(median(later), 1)])
            results[name] = {"first_ms": first, "p50_ms": median(later), "runs": later}

        env = dict(os.environ)
        cli = {
            "summary": ["summary", "--spec-dir", str(spec), "--json"],
            "search": ["search", query, "--spec-dir", str(spec), "--json"],
            "context": ["context", "why does the QA fix keep failing", "--spec-dir", str(spec)],
        }
        for name, argv in cli.items():
            walls = [cli_ms(argv, env) for _ in range(max(1, args.runs // 2))]
            results[f"cli {name}"] = {"wall_ms": median(walls), "runs": walls}
            rows.append([f"cli {name} (process)", "", round(median(walls), 1)])

        load = os.getloadavg()[0]
    table(f"{args.sessions} sessions in one spec (ms; load {load:.1f})", ["operation", "first", "p50"], rows)
    table("what the spec holds", ["fact", "value"], [[k, v] for k, v in facts.items()])
    write_json("autoclaude", {"sessions": args.sessions, "runs": args.runs, "load": load,
                              "results": results, "facts": facts})


if __name__ == "__main__":
    main()
