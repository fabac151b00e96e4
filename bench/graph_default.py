"""What the default graph mode (``auto``) costs a write and a search (issue 33, item 6).

    .venv/bin/python bench/graph_default.py [--writes 200] [--searches 200] [--rounds 2]
                                            [--embedder wordllama|default] [--probes 20000]

Every condition has its own GRAPHMEM_HOME and project and its own ``Memory``, all in one
process, called in turn (in a shuffled order) write by write and search by search with the same
texts, so the host's speed drifts alike for each: ``append_gotcha`` timed one by one, then
``search`` (scope spec) timed one by one.

- ``off``: the graph off (what the default was before);
- ``auto, no server``: the default with nothing running (the probe: one or two ``stat`` calls);
- ``auto, embedded``: the default after ``graphmem db start`` (writes go to the graph too,
  searches ask it beside the local index);
- ``auto, restart``: the first write after the idle watcher stopped the server (``db start``
  with ``GRAPHMEM_GRAPH_IDLE=1``, then waiting for the stop): the on-demand restart.

Each round is a new process on new homes. ``probe`` times ``graph.presence.in_use`` alone. Prints
a table and writes ``bench/results/graph_default.json``.
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
    """Every condition in this process, one ``Memory`` each (own home, own project), called in
    turn write by write and search by search, so the host's speed drifts alike for all of
    them; prints JSON."""
    from graphmem import Memory, Settings

    conds = json.loads(args.child_conditions)
    items = texts(args.writes)
    rnd = random.Random(11)
    queries = [" ".join(rnd.sample(t.split()[1:6], 3)) for t in rnd.choices(items, k=args.searches)]
    mems = {}
    for c in conds:
        settings = Settings.load(env={**os.environ, **c["env"]})
        mems[c["name"]] = Memory(c["spec"], settings=settings)
    out = {n: {"writes": [], "searches": [], "graph": {}} for n in mems}
    try:
        for m in mems.values():
            m.search("warm up the models")  # model loading is not what is measured
        for t in items:
            order = list(mems.items())
            rnd.shuffle(order)
            for name, m in order:
                s = time.perf_counter()
                r = m.append_gotcha(t)
                out[name]["writes"].append((time.perf_counter() - s) * 1000)
                out[name]["graph"][r.graph] = out[name]["graph"].get(r.graph, 0) + 1
        for q in queries:
            order = list(mems.items())
            rnd.shuffle(order)
            for name, m in order:
                s = time.perf_counter()
                m.search(q)
                out[name]["searches"].append((time.perf_counter() - s) * 1000)
        for c in conds:
            if not c.get("restart"):
                continue
            m, home = mems[c["name"]], Path(c["env"]["GRAPHMEM_HOME"])
            for _ in range(c["restart"]):
                deadline = time.monotonic() + 60
                while (home / "falkordb" / "server.json").exists() and time.monotonic() < deadline:
                    time.sleep(0.05)  # the idle watcher stops the server
                s = time.perf_counter()
                r = m.append_gotcha(f"written after an idle stop {time.time()}")
                out[c["name"]].setdefault("restart", []).append((time.perf_counter() - s) * 1000)
                out[c["name"]]["graph"][r.graph] = out[c["name"]]["graph"].get(r.graph, 0) + 1
    finally:
        for m in mems.values():
            m.close()
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


def run_round(args: argparse.Namespace) -> dict:
    """Fresh homes and projects for every condition, one child process running them all."""
    graphmem = str(Path(sys.executable).with_name("graphmem"))
    base = {k: v for k, v in os.environ.items() if not k.startswith(("GRAPHMEM_", "GRAPHITI_"))}
    base.update(GRAPHITI_TELEMETRY_ENABLED="false", GRAPHMEM_SEARCH_SERVER="off")
    if args.embedder != "default":
        base["GRAPHMEM_LOCAL_EMBEDDING_MODEL"] = args.embedder
    with tempfile.TemporaryDirectory(prefix="gm-default-") as tmp:
        conds, started = [], []
        for n, name in enumerate(CONDITIONS + (["auto, restart"] if args.restarts else [])):
            home, spec = Path(tmp) / f"home{n}", Path(tmp) / f"proj{n}" / "specs" / "001-bench"
            spec.mkdir(parents=True)
            env = {"GRAPHMEM_HOME": str(home)}
            if name == "off":
                env["GRAPHMEM_GRAPH"] = "off"
            c: dict = {"name": name, "spec": str(spec), "env": env}
            if name == "auto, restart":
                env["GRAPHMEM_GRAPH_IDLE"] = "1"
                c["restart"] = args.restarts
            if name in ("auto, embedded", "auto, restart"):
                subprocess.run([graphmem, "db", "start"], env={**base, **env}, check=True,
                               capture_output=True)
                started.append(env)
            conds.append(c)
        try:
            cmd = [sys.executable, __file__, "--child-conditions", json.dumps(conds), "--writes",
                   str(args.writes), "--searches", str(args.searches)]
            p = subprocess.run(cmd, env=base, capture_output=True, text=True, timeout=3600)
            line = next((ln for ln in p.stdout.splitlines() if ln.startswith("RESULT ")), None)
            if line is None:
                raise SystemExit(f"the child failed:\n{p.stderr[-3000:]}")
            return json.loads(line[len("RESULT "):])
        finally:
            for env in started:
                subprocess.run([graphmem, "db", "stop"], env={**base, **env}, capture_output=True)


CONDITIONS = ["off", "auto, no server", "auto, embedded"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--writes", type=int, default=200)
    ap.add_argument("--searches", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--restarts", type=int, default=3, help="first writes after an idle stop")
    ap.add_argument("--probes", type=int, default=20000)
    ap.add_argument("--embedder", default="wordllama",
                    help="GRAPHMEM_LOCAL_EMBEDDING_MODEL (`default`: the ColBERT model)")
    ap.add_argument("--child-conditions", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child_conditions:
        child(args)
        return
    conditions = CONDITIONS
    got: dict[str, dict] = {c: {"writes": [], "searches": [], "graph": {}} for c in conditions}
    restart: dict = {"restart": []}
    for n in range(args.rounds):
        r = run_round(args) if n == 0 else run_round(argparse.Namespace(**{**vars(args), "restarts": 0}))
        for c in conditions:
            got[c]["writes"] += r[c]["writes"]
            got[c]["searches"] += r[c]["searches"]
            for k, v in r[c]["graph"].items():
                got[c]["graph"][k] = got[c]["graph"].get(k, 0) + v
        if "auto, restart" in r:
            restart = r["auto, restart"]
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
