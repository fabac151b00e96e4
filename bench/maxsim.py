"""The late stage's MaxSim product: one product of the whole pool against row chunks.

Pools of packed token matrices (as the index stores them) of several sizes; for each, the two
ways are timed call by call, alternating, so another process's load falls on both alike. The
chunked way (``maxsim.best_matches``) is checked to give the same float32 values, bit for bit.

    .venv/bin/python bench/maxsim.py [--calls 300] [--rows 2000,6000,12000]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import pct, table, write_json
from codemem_exact import one_product


def pool(rng, rows: int):
    """Packed matrices of 5-256 tokens (codemem's items: a line to a long insight) summing to
    about ``rows`` token rows, and a 24-token query."""
    import numpy as np

    from graphmem.providers.local_colbert import DIM, pack, unpack

    mats, total = [], 0
    while total < rows:
        n = int(rng.integers(5, 257))
        m = rng.standard_normal((n, DIM)).astype(np.float32)
        mats.append(unpack(pack(m / np.linalg.norm(m, axis=1, keepdims=True))))
        total += n
    qm = rng.standard_normal((24, DIM)).astype(np.float32)
    return mats, qm / np.linalg.norm(qm, axis=1, keepdims=True)


def main() -> int:
    import numpy as np

    from graphmem.index import maxsim

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--calls", type=int, default=300, help="timed calls of each way per pool")
    ap.add_argument("--rows", default="2000,6000,12000", help="token rows per pool")
    ap.add_argument("--out", default="maxsim")
    args = ap.parse_args()
    session = maxsim.maxsim_session()
    if session is None:
        print("no onnxruntime session for the product: nothing to compare")
        return 1
    rng = np.random.default_rng(0)
    rows, results = [], {}
    for size in (int(x) for x in args.rows.split(",")):
        mats, qm = pool(rng, size)
        same = np.array_equal(one_product(mats, qm, session), maxsim.best_matches(mats, qm))
        times: dict[str, list[float]] = {"one product": [], "chunks": []}
        for i in range(2 * args.calls):
            name = ("one product", "chunks")[i % 2]
            t = time.perf_counter()
            if i % 2:
                maxsim.best_matches(mats, qm)
            else:
                one_product(mats, qm, session)
            times[name].append((time.perf_counter() - t) * 1000)
        n = sum(len(m[0]) for m in mats)
        for name, v in times.items():
            rows.append([n, len(mats), name, pct(v, 50), pct(v, 95), sum(v) / len(v), same])
            results.setdefault(str(n), {})[name] = {"p50": pct(v, 50), "p95": pct(v, 95),
                                                    "mean": sum(v) / len(v), "identical": same}
    table(f"MaxSim product per call, ms ({args.calls} calls each, alternating; load "
          f"{os.getloadavg()[0]:.1f})", ["rows", "matrices", "way", "p50", "p95", "mean",
                                         "identical"], rows)
    write_json(args.out, {"calls": args.calls, "pools": results, "load_average": os.getloadavg()})
    return 0


if __name__ == "__main__":
    sys.exit(main())
