"""velune-cli's side of bench/episodic.py; runs in bench/.venv-velune, never in graphmem's venv.

Usage: python _velune_episodic.py <folder> <turns> <window>  -> one JSON object on stdout.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
import uuid

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _episodic_workload import TURNS_PER_SESSION, queries, role, turn_text

from velune.memory.storage.sqlite_pool import SQLiteConnectionPool
from velune.memory.tiers.episodic import EpisodicMemory


def pct(values, q):
    s = sorted(values)
    return s[min(len(s) - 1, max(0, round(q / 100 * (len(s) - 1))))]


async def main(folder: str, n: int, window: int) -> dict:
    pool = SQLiteConnectionPool(os.path.join(folder, "velune.db"))
    await pool.startup()
    mem = EpisodicMemory(pool)
    await mem.initialize()
    ws = "/bench/workspace"
    sessions = [await mem.start_session(ws, "bench-model", "chat") for _ in range(n // TURNS_PER_SESSION)]
    # Prefill through the pool's write connection in bulk (its API would take minutes at 100k);
    # the rows are exactly what record_turn writes.
    t0 = time.perf_counter()
    now = time.time()
    async with pool.write() as conn:
        rows = []
        for i in range(n):
            sid = sessions[i // TURNS_PER_SESSION]
            rows.append((f"trn-{uuid.uuid4().hex[:12]}", sid, i % TURNS_PER_SESSION, role(i),
                         turn_text(i), None, 10, now - (n - i) * 0.01))
        await conn.executemany("INSERT INTO turns (id, session_id, turn_index, role, content, "
                               "model_used, tokens_used, created_at) VALUES (?,?,?,?,?,?,?,?)", rows)
    prefill = time.perf_counter() - t0
    target = sessions[-1]
    seq = []
    for i in range(window):
        t = time.perf_counter()
        await mem.record_turn(target, role(i), turn_text(n + i), tokens=10)
        seq.append((time.perf_counter() - t) * 1000)
    t = time.perf_counter()
    for start in range(0, window, 64):
        await asyncio.gather(*[mem.record_turn(target, role(i), turn_text(n + window + i), tokens=10)
                               for i in range(start, min(window, start + 64))])
    conc = time.perf_counter() - t
    recent = []
    for _ in range(200):
        t = time.perf_counter()
        await mem.get_recent_turns(target, 20)
        recent.append((time.perf_counter() - t) * 1000)
    sessions_ms = []
    for _ in range(50):
        t = time.perf_counter()
        await mem.list_recent_sessions(ws, 20)
        sessions_ms.append((time.perf_counter() - t) * 1000)
    search, found = [], 0
    for q in queries():
        t = time.perf_counter()
        found += bool(await mem.search_by_content(q, ws, 10))
        search.append((time.perf_counter() - t) * 1000)
    await pool.shutdown()
    return {"turns": n, "prefill_s": prefill,
            "record_seq_per_s": window / (sum(seq) / 1000), "record_seq_p50_ms": pct(seq, 50),
            "record_seq_p95_ms": pct(seq, 95), "record_conc_per_s": window / conc,
            "recent_p50_ms": pct(recent, 50), "recent_p95_ms": pct(recent, 95),
            "sessions_p50_ms": pct(sessions_ms, 50),
            "search_p50_ms": pct(search, 50), "search_p95_ms": pct(search, 95),
            "search_queries_with_hits": found, "search_queries": len(search)}


if __name__ == "__main__":
    print(json.dumps(asyncio.run(main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3])))))
