"""What a durable write costs on this disk: the floor under a compat write (issue 33 item 5).

Each row is one way of putting a ~300-byte session file on disk, timed ``--runs`` times in a
folder on the same file system as ``--dir`` (default: a temp folder): no sync; a new file with
``fsync`` or ``fdatasync``; graphmem's atomic replace (temp file synced, renamed, folder synced)
with and without the folder sync; the folder sync alone; an appended line with ``fdatasync``;
graphmem's own ``atomic_write_json`` and index-journal entry with ``sync`` on and off; and
``--threads`` writers syncing new files at once (whether the file system commits them
together: per-write latency and writes per second).

    .venv/bin/python bench/fsync_floor.py [--runs 60] [--threads 4] [--dir /path/on/the/disk]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import median, pct, table, write_json

DATA = json.dumps({"session_number": 7, "what_worked": ["retry the pool with a fresh socket " * 4]},
                  indent=2).encode()


def _new_file(path: Path, sync) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.write(fd, DATA)
        if sync is not None:
            sync(fd)
    finally:
        os.close(fd)


def _dir_sync(folder: Path) -> None:
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _atomic(folder: Path, i: int, dir_sync: bool) -> None:
    tmp = folder / f".s{i}.tmp"
    _new_file(tmp, os.fsync)
    os.replace(tmp, folder / f"s{i}.json")
    if dir_sync:
        _dir_sync(folder)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=60)
    ap.add_argument("--threads", type=int, default=4)
    ap.add_argument("--dir", type=Path, default=None)
    args = ap.parse_args()
    from graphmem.files.atomic import atomic_write_json
    from graphmem.index.journal import Journal

    with tempfile.TemporaryDirectory(dir=args.dir) as tmp:
        root = Path(tmp)
        cases = {
            "write, no sync": lambda d, i: _new_file(d / f"n{i}", None),
            "new file + fsync": lambda d, i: _new_file(d / f"f{i}", os.fsync),
            "new file + fdatasync": lambda d, i: _new_file(d / f"d{i}", os.fdatasync),
            "atomic replace (temp fsync, rename, folder fsync)": lambda d, i: _atomic(d, i, True),
            "atomic replace without the folder fsync": lambda d, i: _atomic(d, i, False),
            "folder fsync alone": lambda d, i: _dir_sync(d),
            "append a line + fdatasync": lambda d, i: _append(d / "log.md"),
            "graphmem atomic_write_json (sync)": lambda d, i: atomic_write_json(d / f"g{i}.json", {"i": i}),
            "graphmem atomic_write_json (sync=False)": lambda d, i: atomic_write_json(
                d / f"h{i}.json", {"i": i}, sync=False),
            "graphmem journal entry (sync)": lambda d, i: _entry(Journal(d), True),
            "graphmem journal entry (sync=False)": lambda d, i: _entry(Journal(d), False),
        }
        rows, out = [], {}
        for name, fn in cases.items():
            folder = root / str(len(out))
            folder.mkdir()
            xs = []
            for i in range(args.runs):
                t = time.perf_counter()
                fn(folder, i)
                xs.append((time.perf_counter() - t) * 1000)
            rows.append([name, round(median(xs), 2), round(pct(xs, 95), 2)])
            out[name] = {"p50_ms": median(xs), "p95_ms": pct(xs, 95)}
        folder = root / "threads"
        folder.mkdir()
        lat: list[float] = []
        lock = threading.Lock()

        def writer(w: int) -> None:
            for i in range(args.runs):
                t = time.perf_counter()
                _new_file(folder / f"t{w}-{i}", os.fsync)
                with lock:
                    lat.append((time.perf_counter() - t) * 1000)

        t0 = time.perf_counter()
        threads = [threading.Thread(target=writer, args=(w,)) for w in range(args.threads)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        rate = len(lat) / (time.perf_counter() - t0)
        name = f"{args.threads} threads, new file + fsync each ({rate:.0f} writes/s)"
        rows.append([name, round(median(lat), 2), round(pct(lat, 95), 2)])
        out["threads"] = {"threads": args.threads, "p50_ms": median(lat), "p95_ms": pct(lat, 95),
                          "writes_per_s": rate}
        load = os.getloadavg()[0]
    table(f"durable write floor ({args.runs} runs; ms; load {load:.1f})", ["write", "p50", "p95"], rows)
    write_json("fsync_floor", {"runs": args.runs, "load": load, "results": out})


def _append(path: Path) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    try:
        os.write(fd, b"- close the pool before forking a worker\n")
        os.fdatasync(fd)
    finally:
        os.close(fd)


def _entry(journal, sync: bool) -> None:
    entry = journal.begin("/project", "/project/specs/001", sync=sync)
    if entry is not None:
        entry.finish()


if __name__ == "__main__":
    main()
