"""Episodic memory: record_turn throughput and recent/search latency, graphmem beside velune-cli.

graphmem's record_turn appends human-readable JSON Lines (fdatasync'ed before it returns, by
default; group-committed when calls overlap) and queues the derived rows (episodes index, search
index and vectors) to its background writer; every read waits for that queue first.
velune-cli's ``EpisodicMemory`` writes SQLite rows through its ``SQLiteConnectionPool`` (WAL,
synchronous=NORMAL: no fsync per commit). velune runs in its own venv (bench/.venv-velune,
created on first run with pip) in a subprocess, on the same workload (bench/_episodic_workload.py).

Both stores are prefilled to N turns in sessions of 1000 (graphmem through its public API with
``record_turns``, 500 turns a call, then waiting until every turn is searchable; velune in bulk
through its pool, since its API would take minutes), then a window of turns is recorded one at a
time (sequential) and 64 at a time (concurrent), and recent turns, recent sessions and search are
timed. After each window the time until the index has caught up (every turn searchable) is
measured too, and "sustained" rates count it. graphmem's search is its ranked hybrid search (BM25 +
vectors of the embedder named below); velune's is ``LIKE '%query%'``. graphmem is timed with
``episodes.fsync`` on (the default) and off (``GRAPHMEM_EPISODES_FSYNC=false``: one write(2),
velune's durability class), and through the sync ``Memory`` as well as ``AsyncMemory``.

    .venv/bin/python bench/episodic.py [--sizes 10000,100000] [--window 1000]
        [--embedder default,wordllama] [--late off]

The defaults embed the 10k turns with the default local model and the 100k ones with wordllama
(a transformer would take ~15 min), both without storing the index's ColBERT token vectors
(``--late default`` stores them: with the default model they come from the same pass). None of
this is on record_turn's path: the background writer does it, and the table shows how long it
took to catch up.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from _common import pct, table, write_json  # noqa: E402
from _episodic_workload import TURNS_PER_SESSION, queries, role, turn_text  # noqa: E402

VENV = HERE / ".venv-velune"
VELUNE = "velune-cli==0.9.8"


def ensure_velune() -> Path:
    """The benchmark's own venv with velune-cli; never graphmem's."""
    py = VENV / "bin" / "python"
    if not py.exists():
        print(f"creating {VENV} with {VELUNE} (benchmark only)", flush=True)
        subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
        subprocess.run([str(py), "-m", "pip", "install", "-q", VELUNE], check=True)
    return py


def du(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def load() -> float:
    return os.getloadavg()[0]


def fdatasync_floor(folder: Path, n: int = 300) -> float:
    """p50 ms of appending one turn-sized line + fdatasync on this disk: record_turn's floor."""
    path = folder / "floor.jsonl"
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    line = (json.dumps({"content": turn_text(1)}) + "\n").encode()
    out = []
    try:
        for _ in range(n):
            t = time.perf_counter()
            os.write(fd, line)
            os.fdatasync(fd)
            out.append((time.perf_counter() - t) * 1000)
    finally:
        os.close(fd)
        path.unlink()
    return pct(out, 50)


def _env(folder: Path, embedder: str, fsync: str = "true") -> dict:
    env = {"GRAPHMEM_HOME": str(folder / "home"), "GRAPHMEM_EPISODES_FSYNC": fsync}
    if embedder != "default":
        env["GRAPHMEM_LOCAL_EMBEDDING_MODEL"] = embedder
    return env


def set_late(choice: str) -> None:
    """"off": the index without the ColBERT second stage, whose token matrices cost ~60 ms per
    turn to write here (a 100k prefill would take hours). Bench only, said in the table."""
    import graphmem.index.local_backend as gi

    if not hasattr(gi, "_bench_late"):
        gi._bench_late = gi.late_encoder
    gi.late_encoder = (lambda settings: None) if choice == "off" else gi._bench_late


async def graphmem_side(folder: Path, n: int, window: int, embedder: str, late: str) -> dict:
    from graphmem import AsyncMemory, Memory, Settings

    settings = Settings.load(env=_env(folder, embedder))
    spec = folder / "project" / ".auto-claude" / "specs" / "001-bench"
    spec.mkdir(parents=True)
    out: dict = {"turns": n, "embedder": embedder, "late": late, "load_start": load()}
    async with AsyncMemory(spec, settings=settings) as m:
        sessions = [await m.start_session(model="bench-model", mode="chat")
                    for _ in range(n // TURNS_PER_SESSION)]
        t0 = time.perf_counter()
        now = time.time()
        for i0 in range(0, n, 500):
            sid = sessions[i0 // TURNS_PER_SESSION]
            await m.record_turns(sid, [{"role": role(i), "content": turn_text(i), "tokens": 10,
                                        "at": now - (n - i) * 0.01}
                                       for i in range(i0, min(n, i0 + 500))])
        out["prefill_files_s"] = time.perf_counter() - t0
        await m.get_recent_turns(1)  # waits until every prefilled turn is indexed and embedded
        out["prefill_s"] = time.perf_counter() - t0
        target = sessions[-1]
        base = n
        out["fdatasync_p50_ms"] = fdatasync_floor(folder)
        for mode, fsync in (("", "true"), ("_nofsync", "false")):
            async with AsyncMemory(spec, settings=Settings.load(env=_env(folder, embedder, fsync))) as w:
                await w.get_recent_turns(1)
                seq = []
                for i in range(window):
                    t = time.perf_counter()
                    await w.record_turn(target, role(i), turn_text(base + i), tokens=10)
                    seq.append((time.perf_counter() - t) * 1000)
                t = time.perf_counter()
                await w.get_recent_turns(1)  # the index catches up with the window
                seq_catch_up = time.perf_counter() - t
                t = time.perf_counter()
                for start in range(0, window, 64):
                    await asyncio.gather(*[w.record_turn(target, role(i), turn_text(base + window + i),
                                                         tokens=10)
                                           for i in range(start, min(window, start + 64))])
                conc = time.perf_counter() - t
                t = time.perf_counter()
                await w.get_recent_turns(1)
                conc_catch_up = time.perf_counter() - t
            base += 2 * window
            out.update({f"record_seq_per_s{mode}": window / (sum(seq) / 1000),
                        f"record_seq_p50_ms{mode}": pct(seq, 50),
                        f"record_seq_p95_ms{mode}": pct(seq, 95),
                        f"record_conc_per_s{mode}": window / conc,
                        f"catch_up_seq_s{mode}": seq_catch_up,
                        f"catch_up_conc_s{mode}": conc_catch_up,
                        f"record_seq_sustained_per_s{mode}": window / (sum(seq) / 1000 + seq_catch_up),
                        f"record_conc_sustained_per_s{mode}": window / (conc + conc_catch_up)})
        # The sync façade (what a plain script calls): no event loop on the write path.
        sync = Memory(spec, settings=settings)
        sync.get_recent_turns(1)
        seq = []
        for i in range(window):
            t = time.perf_counter()
            sync.record_turn(target, role(i), turn_text(base + i), tokens=10)
            seq.append((time.perf_counter() - t) * 1000)
        sync.close()
        out.update({"record_seq_p50_ms_sync": pct(seq, 50), "record_seq_p95_ms_sync": pct(seq, 95)})
        recent, recent_all, listing = [], [], []
        for _ in range(200):
            t = time.perf_counter()
            await m.get_recent_turns(20, session_id=target)
            recent.append((time.perf_counter() - t) * 1000)
            t = time.perf_counter()
            await m.get_recent_turns(20)
            recent_all.append((time.perf_counter() - t) * 1000)
        for _ in range(50):
            t = time.perf_counter()
            await m.list_recent_sessions(limit=20)
            listing.append((time.perf_counter() - t) * 1000)
        qs = queries()
        t = time.perf_counter()
        await m.search(qs[0], kinds=["turn"], limit=10)
        out["search_first_ms"] = (time.perf_counter() - t) * 1000  # builds the ranking snapshot
        search, found = [], 0
        for q in qs:
            t = time.perf_counter()
            found += bool(await m.search(q, kinds=["turn"], limit=10))
            search.append((time.perf_counter() - t) * 1000)
    out.update({
        "recent_p50_ms": pct(recent, 50), "recent_p95_ms": pct(recent, 95),
        "recent_spec_p50_ms": pct(recent_all, 50), "sessions_p50_ms": pct(listing, 50),
        "search_p50_ms": pct(search, 50), "search_p95_ms": pct(search, 95),
        "search_queries_with_hits": found, "search_queries": len(search),
        "episode_files_mb": du(spec / "memory" / "episodes") / 1e6, "load_end": load()})
    return out


def velune_side(py: Path, folder: Path, n: int, window: int) -> dict:
    folder.mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("VIRTUAL_ENV")}
    res = subprocess.run([str(py), str(HERE / "_velune_episodic.py"), str(folder), str(n), str(window)],
                         capture_output=True, text=True, env=env, timeout=3600)
    if res.returncode != 0:
        raise SystemExit(f"velune side failed:\n{res.stderr}")
    return json.loads(res.stdout.strip().splitlines()[-1])


ROWS = [("record_turn p50, fsync (ms)", "record_seq_p50_ms", False),
        ("record_turn p95, fsync (ms)", "record_seq_p95_ms", False),
        ("record_turn sequential, fsync (turns/s)", "record_seq_per_s", True),
        ("  same, until searchable (turns/s)", "record_seq_sustained_per_s", True),
        ("record_turn 64 in flight, fsync (turns/s)", "record_conc_per_s", True),
        ("  same, until searchable (turns/s)", "record_conc_sustained_per_s", True),
        ("sync Memory.record_turn p50, fsync (ms)", "record_seq_p50_ms_sync", False),
        ("sync Memory.record_turn p95, fsync (ms)", "record_seq_p95_ms_sync", False),
        ("record_turn p50, no fsync (ms)", "record_seq_p50_ms_nofsync", False),
        ("record_turn 64 in flight, no fsync (turns/s)", "record_conc_per_s_nofsync", True),
        ("recent turns of a session p50 (ms)", "recent_p50_ms", False),
        ("recent turns p95 (ms)", "recent_p95_ms", False),
        ("recent sessions p50 (ms)", "sessions_p50_ms", False),
        ("search p50 (ms)", "search_p50_ms", False),
        ("search p95 (ms)", "search_p95_ms", False),
        ("queries with hits", "search_queries_with_hits", True)]
VELUNE_KEY = {"record_seq_sustained_per_s": "record_seq_per_s",
              "record_conc_sustained_per_s": "record_conc_per_s"}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="10000,100000")
    ap.add_argument("--window", type=int, default=1000)
    ap.add_argument("--embedder", default="default,wordllama",
                    help="graphmem's local embedding model, one for all sizes or one per size "
                         "(default = answerai-colbert-small mean vectors; bge-small-en-v1.5; "
                         "wordllama)")
    ap.add_argument("--late", default="off",
                    help="the index's ColBERT second stage: default or off, one for all sizes or "
                         "one per size")
    args = ap.parse_args()
    py = ensure_velune()
    results = []
    sizes = [int(s) for s in args.sizes.split(",")]
    embedders, lates = args.embedder.split(","), args.late.split(",")
    for i, n in enumerate(sizes):
        embedder, late = embedders[min(i, len(embedders) - 1)], lates[min(i, len(lates) - 1)]
        with tempfile.TemporaryDirectory(prefix="gm-bench-episodic-") as tmp:
            print(f"\n{n} turns: graphmem ({embedder}, ColBERT {late}) ...", flush=True)
            set_late(late)
            ours = asyncio.run(graphmem_side(Path(tmp) / "gm", n, args.window, embedder, late))
            print(f"{n} turns: velune-cli ...", flush=True)
            theirs = velune_side(py, Path(tmp) / "velune", n, args.window)
        rows = []
        for label, key, higher in ROWS:
            a = ours[key]
            b = theirs[VELUNE_KEY.get(key, key.removesuffix("_nofsync").removesuffix("_sync"))]
            better = (a > b) if higher else (a < b)
            ratio = (a / b if higher else b / a) if a and b else float("nan")
            rows.append([label, a, b, f"{ratio:.1f}x {'faster' if better else 'SLOWER'}"
                         if key != "search_queries_with_hits" else ""])
        table(f"{n} turns (graphmem embedder: {embedder}, ColBERT stage {late}; files "
              f"{ours['episode_files_mb']:.1f} MB; prefill {ours['prefill_s']:.0f} s until searchable; "
              f"catch-up after the windows {ours['catch_up_seq_s']:.1f} / {ours['catch_up_conc_s']:.1f} s; "
              f"append + fdatasync alone p50 {ours['fdatasync_p50_ms']:.2f} ms; "
              f"load {ours['load_start']:.1f} -> {ours['load_end']:.1f})",
              ["metric", "graphmem", "velune-cli", ""], rows)
        results.append({"turns": n, "graphmem": ours, "velune": theirs})
        write_json("episodic", {"window": args.window, "results": results})  # after every size


if __name__ == "__main__":
    main()
