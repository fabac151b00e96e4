"""The first use of a new ``GRAPHMEM_HOME``: open a Memory, write one gotcha, run one
``rerank=True`` search (the ColBERT model and the cross-encoder load), in a fresh process.

Model files built on this machine (onnxruntime's optimised graphs, the fused copies) live in
one per-user model cache (``GRAPHMEM_MODEL_CACHE``) shared by every home, so a new home neither
rebuilds nor stores them; the table shows the seconds and what the home holds after the run.
Until this cache was one, each home kept its own ``models/`` folder of optimised graphs (65 MB:
the home held 67.3 MB after this run, now 0.1 MB; 0.98-1.16 s then, 0.85-1.09 s now, load 7.5).

    .venv/bin/python bench/new_home.py [--runs 5]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import median, table, write_json

FIRST_USE = r"""
import json, os, pathlib, sys, time
root = pathlib.Path(sys.argv[1])
os.environ["GRAPHMEM_HOME"] = str(root / "home")
from graphmem import Memory
spec = root / "project" / "specs" / "001"
spec.mkdir(parents=True)
t = time.perf_counter()
with Memory(spec) as m:
    m.append_gotcha("Stripe webhooks retry for three days, so handlers must be idempotent")
    hits = m.search("webhook retries", rerank=True)
seconds = time.perf_counter() - t
size = sum(p.stat().st_size for p in (root / "home").rglob("*") if p.is_file())
print(json.dumps({"seconds": seconds, "home_mb": size / 1e6, "hits": len(hits),
                  "home": sorted(p.name for p in (root / "home").iterdir())}))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    env = dict(os.environ, GRAPHITI_TELEMETRY_ENABLED="false", GRAPHMEM_SEARCH_SERVER="off")
    runs = []
    for _ in range(args.runs):
        with tempfile.TemporaryDirectory(prefix="gm-bench-home-") as root:
            out = subprocess.run([sys.executable, "-c", FIRST_USE, root], env=env, text=True,
                                 capture_output=True, timeout=600)
            if out.returncode != 0:
                raise SystemExit(out.stderr)
            runs.append(dict(json.loads(out.stdout.strip().splitlines()[-1]),
                             load=os.getloadavg()[0]))
    rows = [[i + 1, f"{r['seconds']:.2f}", f"{r['home_mb']:.1f}", " ".join(r["home"]),
             f"{r['load']:.1f}"] for i, r in enumerate(runs)]
    table("first use of a new home (open, one write, one rerank=True search)",
          ["run", "seconds", "home MB", "home holds", "load avg"], rows)
    write_json("new_home", {"runs": runs, "median_seconds": median([r["seconds"] for r in runs])})


if __name__ == "__main__":
    main()
