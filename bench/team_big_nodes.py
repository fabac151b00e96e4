"""Memory of a search that takes in oversized nodes a teammate wrote to the shared graph.

    .venv/bin/python bench/team_big_nodes.py [--mb 2] [--nodes 3] [--searches 2] [--guard-gb 6]

Home A writes one gotcha (the project graph exists); then ``--nodes`` nodes of ``--mb`` MB of
words each are written straight to the graph with the team password, as anyone holding it can.
Home B then runs ``graphmem search --scope project`` ``--searches`` times as a subprocess,
each under an address-space limit (``--guard-gb``, ``RLIMIT_AS``) so that the machine is never
at risk; the table shows each search's exit code, peak resident memory and time, and how many
warnings it printed about the nodes.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "tests"))
from _common import table, write_json  # noqa: E402
from compose_helpers import ComposeServer  # noqa: E402


def _clone(root: Path, remote: str) -> Path:
    root.mkdir(parents=True)
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    subprocess.run(["git", "remote", "add", "origin", remote], cwd=root, check=True)
    return root


def _search(env: dict[str, str], repo: Path, guard: int) -> dict:
    """One ``graphmem search`` under an address-space limit -> exit code, peak RSS, time."""
    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (guard, guard))

    start = time.perf_counter()
    # a fresh parent per search: its RUSAGE_CHILDREN peak is this search's alone
    peak = ("import resource, subprocess, sys; rc = subprocess.call(sys.argv[1:]); "
            "print('PEAK', resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, "
            "file=sys.stderr); sys.exit(rc)")
    proc = subprocess.Popen([sys.executable, "-c", peak, sys.executable, "-m", "graphmem.cli",
                             "search", "webhook retries",
                             "--project-dir", str(repo), "--scope", "project"],
                            env={**os.environ, **env}, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, preexec_fn=limit)
    out, err = proc.communicate(timeout=600)
    lines = err.strip().splitlines()
    kb = next((int(x.split()[1]) for x in lines if x.startswith("PEAK ")), 0)
    lines = [x for x in lines if not x.startswith("PEAK ")]
    return {"rc": proc.returncode, "seconds": time.perf_counter() - start, "peak_mb": kb / 1024,
            "warnings": err.count("big-"), "stderr_tail": lines[-1:], "stderr": lines[:6] + ["..."] + lines[-3:]}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=float, default=2.0)
    ap.add_argument("--nodes", type=int, default=3)
    ap.add_argument("--searches", type=int, default=2)
    ap.add_argument("--guard-gb", type=float, default=6.0)
    args = ap.parse_args()
    os.environ["GRAPHITI_TELEMETRY_ENABLED"] = "false"
    from graphmem import Memory
    from graphmem.graph import schema
    from graphmem.settings import Settings

    tmp = Path(tempfile.mkdtemp(prefix="gm-bignodes-"))
    srv = ComposeServer(tmp)
    try:
        repos = {w: _clone(tmp / w / "shop", "git@github.com:acme/shop.git") for w in "ab"}
        envs = {w: {"GRAPHMEM_HOME": str(tmp / f"home-{w}"), "GRAPHMEM_GRAPH": "on",
                    "GRAPHMEM_FALKORDB_URL": srv.url, "GRAPHMEM_HOST": f"machine-{w}",
                    "GRAPHMEM_SEARCH_SERVER": "off"} for w in "ab"}
        spec = repos["a"] / "auto-claude" / "specs" / "001-a"
        spec.mkdir(parents=True)
        with Memory(spec, settings=Settings.load(env=envs["a"])) as a:
            a.append_gotcha("stripe webhooks retry for three days")
            gid = schema.group_id(a.aio.project.key)
        words = "webhook retries payload handler idempotent ledger invoice tenant ".split()
        size = int(args.mb * 1_000_000)
        text = " ".join(words[i % len(words)] for i in range(size // 7))[:size]
        client = srv.client()
        for i in range(args.nodes):
            client.execute_command(
                "GRAPH.QUERY", gid,
                f"CYPHER t='{text}' CREATE (:Entity:Gotcha {{uuid: 'big-{i}', gm_kind: 'gotcha', "
                f"summary: $t, gm_hash: 'h{i}', gm_project: 'x', gm_spec: 'auto-claude/specs/001-a', "
                f"gm_meta: '{{}}', gm_source: '', gm_time: '2026-01-01T00:00:00+00:00', "
                f"gm_written: timestamp() - 60000}})")
        rows, errs = [], []
        for n in range(1, args.searches + 1):
            got = _search(envs["b"], repos["b"], int(args.guard_gb * 2**30))
            rows.append([n, got["rc"], round(got["peak_mb"]), round(got["seconds"], 1),
                         got["warnings"], " ".join(got["stderr_tail"])[:70]])
            errs.append(got["stderr"])
        table(f"search after {args.nodes} node(s) of {args.mb} MB (guard {args.guard_gb} GB)",
              ["search", "exit", "peak MB", "s", "warnings", "last stderr line"], rows)
        write_json("team_big_nodes", {"mb": args.mb, "nodes": args.nodes, "guard_gb": args.guard_gb,
                                      "searches": [dict(zip(["n", "rc", "peak_mb", "s", "warnings",
                                                             "stderr"], r)) for r in rows],
                                      "stderr": errs})
    finally:
        srv.stop()


if __name__ == "__main__":
    main()
