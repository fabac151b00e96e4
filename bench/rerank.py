"""``search(..., rerank=True)`` on LoCoMo, and what the local cross-encoder costs per pair.

Quality goes through the public API (``Memory.search``), ingesting like ``bench/locomo.py``.
The second stage has a deadline, so on a busy machine it scores fewer pairs and quality drops:
``--no-deadline`` measures the quality the token budget alone gives (load-independent), the
default run measures what a caller gets now. The cost table scores the same real pairs one at a
time and in length-sorted batches (int8 dynamic quantisation makes batched scores depend on
the batch, so the search path scores pairs one at a time; this shows what that costs).

    .venv/bin/python bench/rerank.py [--convs 0,1,2,3,4] [--no-deadline] [--cost-only]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import pct, table, write_json
import locomo


def load_avg() -> float:
    return os.getloadavg()[0]


def quality(data, convs, no_deadline: bool) -> dict:
    from dataclasses import asdict, replace

    from graphmem import Memory, Settings

    tuning = None  # the index's own
    per = {"tuned": [], "unseen": []}
    lat, loads, samples = [], [], []
    with tempfile.TemporaryDirectory() as tmp:
        for ci in convs:
            spec = Path(tmp) / f"c{ci}" / "project" / "specs" / "001"
            spec.mkdir(parents=True)
            settings = Settings.load(home=str(Path(tmp) / f"c{ci}" / "home"))
            with Memory(spec, settings=settings) as mem:
                index = mem.aio.derived.local.index
                if no_deadline:
                    index.tuning = replace(index.tuning, rerank_deadline=1e9)
                tuning = index.tuning
                locomo.ingest(mem, data[ci])
                mem.search("warm up the models", scope="spec", rerank=True)
                qs = locomo.questions(data[ci])
                _, ms, rows = locomo.evaluate(mem, qs, True)
                if not samples:  # real (query, passage) pairs for the cost table
                    samples = pairs_of(mem, qs[:6])
            lat.extend(ms)
            loads.append(load_avg())
            per["tuned" if ci in locomo.TUNED else "unseen"].extend(rows)
            s = locomo.summarise(rows)["overall"]
            print(f"conv {ci}: R@5 {s['r@5']:.3f} R@10 {s['r@10']:.3f} MRR {s['mrr']:.3f} "
                  f"p50 {pct(ms, 50):.0f} ms p95 {pct(ms, 95):.0f} ms (load {loads[-1]:.1f})",
                  flush=True)
    out = {split: locomo.summarise(rows) for split, rows in per.items() if rows}
    out["latency_ms"] = {"p50": pct(lat, 50), "p95": pct(lat, 95), "load_1min": loads}
    out["settings"] = {k: v for k, v in asdict(tuning).items() if k.startswith("rerank_")}
    return {"quality": out, "samples": samples}


def pairs_of(mem, qs) -> list[tuple[str, str]]:
    """The passages the second stage would show for a few questions' first-stage pools."""
    from graphmem.index import rerank

    index = mem.aio.derived.local.index
    out = []
    for q, _, _ in qs:
        hits = mem.search(q, scope="spec", limit=index.tuning.rerank_pool)
        out.extend((q, p) for p in rerank.passages(index, hits, index.tuning)[:20])
    return out


def cost(pairs: list[tuple[str, str]]) -> list[list]:
    """ms per pair: one pair per run vs length-sorted batches, wall and process CPU."""
    from graphmem.providers.local import _feeds
    from graphmem.providers.local import make_reranker
    from graphmem import Settings

    rr = make_reranker(Settings.load(home=tempfile.mkdtemp()))
    lens = [sum(e.attention_mask) for e in rr.tokenizer.encode_batch(pairs)]
    order = sorted(range(len(pairs)), key=lambda i: lens[i])

    def run(batch):
        rr.session.run(["logits"], _feeds(rr.tokenizer.encode_batch(batch)))

    run(pairs[:1])
    rows = []
    for size in (1, 4, 8, 20):
        w, c = time.perf_counter(), time.process_time()
        for i in range(0, len(order), size):
            run([pairs[j] for j in order[i:i + size]])
        w, c = time.perf_counter() - w, time.process_time() - c
        rows.append([size, len(pairs), sum(lens) / len(lens), w * 1000 / len(pairs),
                     c * 1000 / len(pairs), w * 1000 / sum(lens), load_avg()])
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data", type=Path, default=locomo.DATA)
    ap.add_argument("--convs", default="0,1,2,3,4")
    ap.add_argument("--no-deadline", action="store_true", help="score the whole token budget")
    ap.add_argument("--cost-only", action="store_true", help="only the per-pair cost table")
    args = ap.parse_args()
    data = locomo.load(args.data)
    convs = [int(c) for c in args.convs.split(",")]
    results: dict = {"data": str(args.data), "tuned_on": list(locomo.TUNED),
                     "no_deadline": args.no_deadline}
    if args.cost_only:
        from graphmem import Memory, Settings

        with tempfile.TemporaryDirectory() as tmp:
            spec = Path(tmp) / "p" / "specs" / "001"
            spec.mkdir(parents=True)
            with Memory(spec, settings=Settings.load(home=str(Path(tmp) / "h"))) as mem:
                locomo.ingest(mem, data[convs[0]])
                samples = pairs_of(mem, locomo.questions(data[convs[0]])[:6])
    else:
        got = quality(data, convs, args.no_deadline)
        samples = got["samples"]
        q = results["quality"] = got["quality"]
        trows = [[split, cat, v["n"], v["r@5"], v["r@10"], v["mrr"]]
                 for split in ("tuned", "unseen") if split in q for cat, v in q[split].items()]
        lat = q["latency_ms"]
        table(f"LoCoMo rerank=True (p50 {lat['p50']:.0f} ms, p95 {lat['p95']:.0f} ms, load "
              f"{min(lat['load_1min']):.1f}-{max(lat['load_1min']):.1f}; deadline "
              f"{'off' if args.no_deadline else 'on'})",
              ["split", "category", "n", "R@5", "R@10", "MRR"], trows)
    rows = cost(samples)
    results["cost"] = [dict(zip(("batch", "pairs", "tokens_per_pair", "wall_ms_per_pair",
                                 "cpu_ms_per_pair", "wall_ms_per_token", "load"), r)) for r in rows]
    table("cross-encoder cost per pair (real pairs, length-sorted batches)",
          ["batch", "pairs", "tokens/pair", "wall ms/pair", "cpu ms/pair", "wall ms/token",
           "load"], rows)
    write_json("rerank" + ("-no-deadline" if args.no_deadline else ""), results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
