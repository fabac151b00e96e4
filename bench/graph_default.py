"""What the default graph mode (``auto``) costs a write and a search (issue 33, item 6).

    .venv/bin/python bench/graph_default.py [--writes 200] [--searches 200] [--rounds 2]
                                            [--embedder wordllama|default] [--probes 20000]

Each condition runs in its own process on a fresh GRAPHMEM_HOME and project, with the same
texts: ``append_gotcha`` timed one by one, then ``search`` (scope spec) timed one by one.

- ``off``: the graph off (what the default was before);
- ``auto, no server``: the default with nothing running (the probe: one or two ``stat`` calls);
- ``auto, embedded``: the default after ``graphmem db start`` (writes go to the graph too,
  searches ask it beside the local index);
- ``auto, restart``: the first write after the idle watcher stopped the server (``db start``
  with ``GRAPHMEM_GRAPH_IDLE=1``, then waiting for the stop): the on-demand restart.

Rounds alternate the conditions (off, auto, embedded, off, ...) so a drift of the host's speed
touches each. ``probe`` times ``graph.presence.in_use`` alone. Prints a table and writes
``bench/results/graph_default.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import WORDS, pct, table, write_json

HERE = Path(__file__).resolve().parent


def texts(n: int, seed: int = 7) -> list[str]:
    """Gotcha-like sentences, each unique."""
    rnd = random.Random(seed)
    return [f"the {rnd.choice(WORDS['adj'])} {rnd.choice(WORDS['what'])} "
            f"{rnd.choice(WORDS['verb'])} {rnd.choice(WORDS['obj'])} {rnd.choice(WORDS['cond'])} "
            f"(case {i})" for i in range(n)]


def child(args: argparse.Namespace) -> None:
    """One condition, in this process: time the writes and the searches, print JSON."""
    from graphmem import Memory

    spec = Path(args.child_spec)
    items = texts(args.writes)
    rnd = random.Random(11)
    queries = [" ".join(rnd.sample(t.split()[1:6], 3)) for t in rnd.choices(items, k=args.searches)]
    out: dict = {"writes": [], "searches": [], "graph": {}}
    with Memory(spec) as mem:
        mem.search("warm up the models")  # model loading is not what is measured
        for t in items:
            s = time.perf_counter()
            r = mem.append_gotcha(t)
            out["writes"].append((time.perf_counter() - s) * 1000)
            out["graph"][r.graph] = out["graph"].get(r.graph, 0) + 1
        for q in queries:
            s = time.perf_counter()
            mem.search(q)
            out["searches"].append((time.perf_counter() - s) * 1000)
        if args.restart:
            for _ in range(args.restart):
                idle = Path(os.environ["GRAPHMEM_HOME"]) / "falkordb" / "server.json"
                deadline = time.monotonic() + 60
                while idle.exists() and time.monotonic() < deadline:
                    time.sleep(0.05)  # the idle watcher stops the server
                s = time.perf_counter()
                r = mem.append_gotcha(f"written after an idle stop {time.time()}")
                out.setdefault("restart", []).append((time.perf_counter() - s) * 1000)
                out["graph"][r.graph] = out["graph"].get(r.graph, 0) + 1
    print("RESULT " + json.dumps(out))


def probes(n: int) -> dict:
    """``presence.in_use`` alone, in µs: no server; the marker of `db start`; a configured URL
    (cached after its one probe)."""
    from graphmem import Settings
    from graphmem.graph import presence

    out = {}
    with tempfile.TemporaryDirectory(prefix="gm-probe-") as tmp:
        cases = {"auto, no server": {},
                 "auto, after db start": {"marker": True},
                 "auto, configured URL (cached)": {"GRAPHMEM_FALKORDB_URL": "redis://127.0.0.1:9"}}
        for name, extra in cases.items():
            env = {"GRAPHMEM_HOME": tmp}
            if extra.get("marker"):
                (Path(tmp) / "falkordb").mkdir(exist_ok=True)
                (Path(tmp) / "falkordb" / "wanted").write_text("1")
            env.update({k: v for k, v in extra.items() if k != "marker"})
            settings = Settings.load(env=env)
            presence.in_use(settings)  # the configured URL's one probe
            times = []
            for _ in range(n):
                s = time.perf_counter()
                presence.in_use(settings)
                times.append((time.perf_counter() - s) * 1e6)
            out[name] = {"p50_us": pct(times, 50), "p95_us": pct(times, 95)}
            (Path(tmp) / "falkordb" / "wanted").unlink(missing_ok=True)
    return out


def run_condition(name: str, args: argparse.Namespace) -> dict:
    """A fresh home and project, one child process."""
    graphmem = str(Path(sys.executable).with_name("graphmem"))
    with tempfile.TemporaryDirectory(prefix="gm-default-") as tmp:
        home, spec = Path(tmp) / "home", Path(tmp) / "proj" / "specs" / "001-bench"
        spec.mkdir(parents=True)
        env = {k: v for k, v in os.environ.items() if not k.startswith(("GRAPHMEM_", "GRAPHITI_"))}
        env.update(GRAPHMEM_HOME=str(home), GRAPHITI_TELEMETRY_ENABLED="false",
                   GRAPHMEM_SEARCH_SERVER="off")
        if args.embedder != "default":
            env["GRAPHMEM_LOCAL_EMBEDDING_MODEL"] = args.embedder
        if name == "off":
            env["GRAPHMEM_GRAPH"] = "off"
        restart = 0
        if name in ("auto, embedded", "auto, restart"):
            if name == "auto, restart":
                env["GRAPHMEM_GRAPH_IDLE"] = "1"
                restart = args.restarts
            subprocess.run([graphmem, "db", "start"], env=env, check=True, capture_output=True)
        try:
            cmd = [sys.executable, __file__, "--child-spec", str(spec), "--writes",
                   str(args.writes if not restart else 5), "--searches",
                   str(args.searches if not restart else 5), "--restart", str(restart)]
            p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=3600)
            line = next((ln for ln in p.stdout.splitlines() if ln.startswith("RESULT ")), None)
            if line is None:
                raise SystemExit(f"{name}: the child failed:\n{p.stderr[-3000:]}")
            return json.loads(line[len("RESULT "):])
        finally:
            subprocess.run([graphmem, "db", "stop"], env=env, capture_output=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--writes", type=int, default=200)
    ap.add_argument("--searches", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--restarts", type=int, default=3, help="first writes after an idle stop")
    ap.add_argument("--probes", type=int, default=20000)
    ap.add_argument("--embedder", default="wordllama",
                    help="GRAPHMEM_LOCAL_EMBEDDING_MODEL (`default`: the ColBERT model)")
    ap.add_argument("--child-spec", help=argparse.SUPPRESS)
    ap.add_argument("--restart", type=int, default=0, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child_spec:
        child(args)
        return
    conditions = ["off", "auto, no server", "auto, embedded"]
    got: dict[str, dict] = {c: {"writes": [], "searches": [], "graph": {}} for c in conditions}
    for _ in range(args.rounds):
        for c in conditions:
            r = run_condition(c, args)
            got[c]["writes"] += r["writes"]
            got[c]["searches"] += r["searches"]
            for k, v in r["graph"].items():
                got[c]["graph"][k] = got[c]["graph"].get(k, 0) + v
    restart = run_condition("auto, restart", args) if args.restarts else {"restart": []}
    load = os.getloadavg()[0]
    rows, summary = [], {}
    for c in conditions:
        w, s = got[c]["writes"], got[c]["searches"]
        summary[c] = {"write_p50_ms": pct(w, 50), "write_p95_ms": pct(w, 95),
                      "search_p50_ms": pct(s, 50), "search_p95_ms": pct(s, 95),
                      "writes": len(w), "searches": len(s), "graph_outcomes": got[c]["graph"]}
        rows.append([c, pct(w, 50), pct(w, 95), pct(s, 50), pct(s, 95),
                     ", ".join(f"{k} {v}" for k, v in sorted(got[c]["graph"].items()))])
    table(f"write and search, {args.writes} x {args.rounds} each, embedder {args.embedder}, "
          f"load {load:.1f} (ms)", ["condition", "write p50", "write p95", "search p50",
                                    "search p95", "graph outcome"], rows)
    rs = restart.get("restart", [])
    if rs:
        table("first write after an idle stop (the server started again on demand), ms",
              ["runs", "min", "p50", "max"], [[len(rs), min(rs), pct(rs, 50), max(rs)]])
    pr = probes(args.probes)
    table("graph.presence.in_use alone (µs)", ["case", "p50", "p95"],
          [[k, v["p50_us"], v["p95_us"]] for k, v in pr.items()])
    write_json("graph_default", {"args": vars(args), "load": load, "conditions": summary,
                                 "restart_write_ms": rs, "probe_us": pr})


if __name__ == "__main__":
    main()
