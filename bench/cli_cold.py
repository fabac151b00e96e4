"""Cold ``graphmem search`` / ``context`` processes: wall and CPU time, as an agent's tool call sees.

Three cases on one home (default 2000 items, the bundled default embedder, default settings):
- ``first``: no server runs (each run stops the one the previous run started); the CLI answers
  in-process, then starts a server in the background.
- ``server``: later calls, answered by the server the CLI started.
- ``off``: ``GRAPHMEM_SEARCH_SERVER=off``, every call loads everything itself.

Also where an in-process call spends its time (``-X importtime`` grouped by package, and phases
timed in a fresh process). Target: < 400 ms wall. Latency on a busy 2-core box is inflated:
the load average is printed beside every figure, and CPU time (user+sys) is less sensitive to it.

    .venv/bin/python bench/cli_cold.py [--items 2000] [--runs 7]
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import median, table, write_json

PHASES = r"""
import time, os, sys, json
t0 = time.perf_counter(); marks = []
def mark(name): marks.append((name, time.perf_counter()))
import graphmem.cli.app, graphmem.cli.search_commands; mark("import cli")
from graphmem.settings import Settings; mark("import settings (pydantic)")
from graphmem.facade.memory import Memory; mark("import memory (models, files)")
import graphmem.index.local_search; mark("import index.local_search (numpy)")
import graphmem.providers.local, onnxruntime, tokenizers; mark("import onnxruntime, tokenizers")
s = Settings.load(); m = Memory(None, os.getcwd(), settings=s); mark("Settings.load + Memory")
m.aio.derived.local.index; mark("open index + load model (ORT session, tokenizer)")
hits = m.search(sys.argv[1], scope="project"); mark("first search (snapshot, embed, rank)")
json.dumps([h.model_dump(mode="json") for h in hits]); m.close(); mark("output + close")
prev = t0
for name, t in marks:
    print(f"{(t - prev) * 1000:.1f}\t{name}"); prev = t
"""
GROUPS = ("pydantic", "pydantic_core", "numpy", "onnxruntime", "tokenizers", "asyncio", "sqlite3",
          "rich", "graphmem", "annotated_types", "typing_extensions")


def timed(cmd: list[str], env: dict, cwd: Path) -> tuple[float, float, str]:
    """Wall and CPU (user+sys of the child) in ms."""
    before = os.times()
    t = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, env=env, cwd=cwd)
    wall = (time.perf_counter() - t) * 1000
    after = os.times()
    if r.returncode != 0:
        raise SystemExit(r.stderr.decode())
    cpu = ((after.children_user - before.children_user) +
           (after.children_system - before.children_system)) * 1000
    return wall, cpu, r.stdout.decode()


def stop_server(env: dict, cwd: Path) -> None:
    """Stop the server of these settings, if one runs, and wait until it is gone."""
    from graphmem.cli.search_client import client_config, holder

    cfg = client_config(env=env, cwd=str(cwd))
    pid = holder(cfg)
    if pid and pid > 0:
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + 60
    while holder(cfg) is not None and time.monotonic() < deadline:
        time.sleep(0.05)


def wait_server(env: dict, cwd: Path) -> None:
    from graphmem.cli.search_client import ask, client_config

    cfg = client_config(env=env, cwd=str(cwd))
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if (ask(cfg, {"op": "ping"}) or {}).get("pid"):
            return
        time.sleep(0.1)
    raise SystemExit(f"no server started; log: {cfg.log.read_text()}")


def import_groups(cmd: list[str], env: dict, cwd: Path) -> dict[str, float]:
    """Cumulative import ms of the top-level packages an in-process search loads."""
    r = subprocess.run([sys.executable, "-X", "importtime", *cmd[1:]], capture_output=True,
                       env=env, cwd=cwd, text=True)
    own: dict[str, float] = {}
    for line in r.stderr.splitlines():
        if not line.startswith("import time:") or "|" not in line:
            continue
        try:
            self_us = int(line.split("|")[0].split(":")[1])
        except ValueError:
            continue
        top = line.split("|")[2].strip().split(".")[0]
        own[top] = own.get(top, 0.0) + self_us / 1000
    groups = {g: round(own.pop(g, 0.0), 1) for g in GROUPS}
    groups["everything else"] = round(sum(own.values()), 1)
    groups["total"] = round(sum(groups.values()), 1)
    return groups


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--items", type=int, default=2000)
    ap.add_argument("--runs", type=int, default=7)
    args = ap.parse_args()
    from search import ingest

    from graphmem import Settings

    out: dict = {"items": args.items, "runs": args.runs}
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp) / "home"
        settings = Settings.load(home=str(home))
        n, _secs, specs = ingest(Path(tmp), settings, args.items, random.Random(7))
        project = specs[0].parent.parent
        env = {k: v for k, v in os.environ.items() if not k.startswith("GRAPHMEM_")}
        env.update(GRAPHMEM_HOME=str(home), GRAPHMEM_SEARCH_SERVER_IDLE="300")
        off = dict(env, GRAPHMEM_SEARCH_SERVER="off")
        gm = [sys.executable, "-m", "graphmem.cli"]
        queries = [f"postgres timeout in {a}" for a in ("billing", "auth", "cart", "queue",
                                                        "search", "api", "ui", "cache", "s3")]
        cases = {
            "search --json": lambda q: [*gm, "search", q, "--json"],
            "search": lambda q: [*gm, "search", q],
            "context": lambda q: [*gm, "context", q],
        }
        try:
            timed(cases["search --json"]("warm the page cache"), off, project)
            floor = [timed([sys.executable, "-c", "pass"], env, project) for _ in range(args.runs)]
            walls, cpus = [r[0] for r in floor], [r[1] for r in floor]
            out["interpreter"] = {"wall_median_ms": median(walls), "cpu_median_ms": median(cpus)}
            rows.append(["python -c pass", "(the floor)", median(walls), min(walls), median(cpus),
                         os.getloadavg()[0]])
            for name, make in cases.items():
                res: dict = {}
                first, server, disabled = [], [], []
                for i in range(args.runs):
                    stop_server(env, project)
                    first.append(timed(make(queries[i % len(queries)]), env, project))
                    wait_server(env, project)
                    server.append(timed(make(queries[(i + 1) % len(queries)]), env, project))
                    disabled.append(timed(make(queries[(i + 2) % len(queries)]), off, project))
                load = os.getloadavg()[0]
                for label, runs in (("first (no server)", first), ("server", server),
                                    ("off", disabled)):
                    walls, cpus = [r[0] for r in runs], [r[1] for r in runs]
                    res[label] = {"wall_median_ms": median(walls), "wall_min_ms": min(walls),
                                  "cpu_median_ms": median(cpus), "load": load}
                    rows.append([name, label, median(walls), min(walls), median(cpus), load])
                same = server[0][2] == timed(make(queries[1]), off, project)[2]
                res["server_output_identical"] = same
                out[name] = res
                print(f"{name}: done (server output identical to in-process: {same})", flush=True)
        finally:
            stop_server(env, project)
        out["imports_ms"] = import_groups([*gm, "search", "postgres", "--json"], off, project)
        phases = subprocess.run([sys.executable, "-c", PHASES, "postgres timeout"],
                                capture_output=True, text=True, env=off, cwd=project)
        out["phases_ms"] = [line.split("\t") for line in phases.stdout.splitlines()]
    table(f"Cold CLI, {n} items, {args.runs} runs (ms; target < 400 wall)",
          ["command", "case", "wall p50", "wall min", "cpu p50", "load"], rows)
    table("Imports of an in-process search (-X importtime, ms, own time per top package)",
          ["package", "ms"], [[k, v] for k, v in out["imports_ms"].items()])
    table("Phases of an in-process search (fresh process, ms)", ["ms", "phase"],
          out["phases_ms"])
    write_json("cli_cold", out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
