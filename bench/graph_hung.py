"""What a stopped (SIGSTOP, not dead) embedded FalkorDB costs: fresh search, first save, a
connected process's save, and ``sync`` after SIGCONT (issue 14 finding 12).

Each case runs on a fresh home with the graph on and the light wordllama embedder; the server is
always let go on (SIGCONT) and stopped at the end. Times are wall seconds, including process start
and model load for the fresh processes (``idle`` is the same command with the server running).

    .venv/bin/python bench/graph_hung.py
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import table, write_json

SAVE = ("import sys, time; from graphmem import Memory\nm = Memory(sys.argv[1])\n"
        "t = time.monotonic(); r = m.append_gotcha(sys.argv[2]); print(time.monotonic() - t, r.graph)")
CONNECTED = ("import os, sys, time, json, signal; from graphmem import Memory\n"
             "m = Memory(sys.argv[1]); m.append_gotcha('connected warm'); time.sleep(1.2)\n"
             "pid = json.load(open(sys.argv[2]))['pid']; os.kill(pid, signal.SIGSTOP)\n"
             "try:\n  t = time.monotonic(); r = m.append_gotcha('connected hung')\n"
             "  print(time.monotonic() - t, r.graph, flush=True)\n"
             "finally:\n  os.kill(pid, signal.SIGCONT)\nm.close()")


def main() -> int:
    base = Path(tempfile.mkdtemp(prefix="gm-hung-"))
    spec = base / "proj" / "specs" / "s1"
    spec.mkdir(parents=True)
    env = dict(os.environ, GRAPHMEM_HOME=str(base / "home"), GRAPHMEM_GRAPH="on",
               GRAPHMEM_SEARCH_SERVER="off", GRAPHMEM_LOCAL_EMBEDDING_MODEL="wordllama",
               GRAPHMEM_LOCAL_LATE_INTERACTION="off", GRAPHITI_TELEMETRY_ENABLED="false")
    gm = [sys.executable, "-m", "graphmem.cli"]
    state = base / "home" / "falkordb" / "server.json"

    def run(cmd: list[str]) -> tuple[float, subprocess.CompletedProcess]:
        t = time.monotonic()
        p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
        return time.monotonic() - t, p

    rows, out = [], {}
    try:
        run([*gm, "db", "start"])
        idle, _ = run([*gm, "search", "--spec-dir", str(spec), "warm"])
        run([sys.executable, "-c", SAVE, str(spec), "warm gotcha"])
        pid = json.loads(state.read_text())["pid"]
        os.kill(pid, signal.SIGSTOP)
        try:
            search, p = run([*gm, "search", "--spec-dir", str(spec), "warm gotcha"])
            out["search_s"], out["search_idle_s"] = round(search, 2), round(idle, 2)
            rows.append(["fresh `graphmem search` (process exit)", f"{search:.2f}", f"{idle:.2f}",
                         "local hits" if "warm gotcha" in p.stdout else "no hits"])
            (base / "home" / "graph-breaker.json").unlink(missing_ok=True)  # pay the deadline again
            total, p = run([sys.executable, "-c", SAVE, str(spec), "fresh process gotcha"])
            save, graph = p.stdout.split()
            out["first_save_s"] = round(float(save), 2)
            rows.append(["first save in a fresh process (the call)", f"{float(save):.2f}", "",
                         f"graph {graph}"])
            alive = Path(f"/proc/{pid}").exists()
        finally:
            os.kill(pid, signal.SIGCONT)
        out["server_kept"] = alive and json.loads(state.read_text())["pid"] == pid
        sync, p = run([*gm, "sync", "--spec-dir", str(spec), "--json"])
        rows.append(["`graphmem sync` after SIGCONT", f"{sync:.2f}", "",
                     p.stdout and f"remaining {json.loads(p.stdout)['remaining']}"])
        (base / "home" / "graph-breaker.json").unlink(missing_ok=True)
        _, p = run([sys.executable, "-c", CONNECTED, str(spec), str(state)])
        took, graph = p.stdout.split()
        out["connected_save_s"] = round(float(took), 2)
        rows.append(["save in a process connected before the stop", f"{float(took):.2f}", "",
                     f"graph {graph}"])
    finally:
        subprocess.run([*gm, "db", "stop"], env=env, capture_output=True, timeout=120)
        shutil.rmtree(base, ignore_errors=True)
    table("stopped FalkorDB (SIGSTOP)", ["case", "seconds", "running server", "outcome"], rows)
    print(f"stopped server kept (not killed or replaced): {out['server_kept']}; "
          f"load {os.getloadavg()[0]:.1f}")
    write_json("graph_hung", out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
