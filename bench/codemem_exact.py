"""Exact speed-ups checked on every search of the codemem replay: each faster path against the plain one.

Two runs of ``bench/codemem.py`` cannot be diffed: items carry the wall-clock time they were
written, so ids and recency scores move between runs of the same code. Here one replay runs,
and every call of a sped-up stage is also computed the plain way, on the same state, and
compared bit for bit:

- the late stage's MaxSim product (``maxsim.best_matches``, in chunks) against one product of
  the whole pool (``one_product``);
- the word stage's BM25 of rows and sessions (``ranker.term_scores``, all postings in one read)
  against one read and one sum per term (``term_scores_per_term``);
- every ColBERT pass, of queries and of documents, on the encoder's one-thread session
  (``local_colbert.THREADS``) against a two-thread session of the same model (its "hits" in
  the report are the token rows compared);
- code recall (``code/recall.py``'s ``code_recall``) and freshness (``code/freshness.py``'s
  ``annotate``) against those modules as they were at ``--base`` (``_exact_code.py``): every
  hit's fields, in order, scores and freshness included.

A search's hits follow from these values, so equal values give equal hits. The first
mismatch fails the run. Each call times both ways, in random order, on the same inputs:
the table gives the stage's milliseconds per search the faster path saves, on real pools.

    .venv/bin/python bench/codemem_exact.py [--datasets pytest,entire-cli] [--tasks N] [--base REV]
"""

from __future__ import annotations

import argparse
import math
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import pct, table


def one_product(mats, qm, session):
    """Each query token's best scaled dot product per matrix, as it ran before chunks: every
    token row of the pool in one product (onnxruntime's, or numpy's when ``session`` is None)."""
    import numpy as np

    tokens = np.concatenate([m[0] for m in mats])
    scales = np.concatenate([m[1] for m in mats])
    if session is not None:
        sims = session.run(None, {"tokens": tokens, "scales": scales[:, None],
                                  "query": qm.T.copy()})[0]
    else:
        sims = (tokens.astype(np.float32) @ qm.T) * scales[:, None]
    return np.maximum.reduceat(sims, np.cumsum([0, *(len(m[0]) for m in mats[:-1])]), axis=0)


def term_scores_per_term(view, terms, t):
    """``ranker.term_scores`` as the word stage computed it before: one postings read, one
    ``+=`` of the rows' and one of the sessions' BM25 per term."""
    import numpy as np

    scores = np.zeros(view.n, np.float32)
    s_scores = np.zeros(view.n_sessions, np.float32)
    full, found = 0.0, []
    for term in terms:
        d, _, part = view.postings(term, t)
        if not len(d):
            continue
        idf = math.log(1.0 + (view.n_live - len(d) + 0.5) / (len(d) + 0.5))
        full += idf
        scores[d] += idf * part
        found.append(d)
        if not (t.session_weight and view.n_sessions):
            continue
        ss, fs = [], []
        for ptr, doc, tf in view.s_segments:
            if term + 1 < len(ptr) and ptr[term + 1] > ptr[term]:
                ss.append(doc[ptr[term]:ptr[term + 1]])
                fs.append(tf[ptr[term]:ptr[term + 1]])
        if not ss:
            continue
        if len(ss) == 1:
            sess, stf = ss[0], fs[0]
        else:  # a session in both segments: its counts added
            tmp = np.zeros(view.n_sessions, np.float32)
            for x, f in zip(ss, fs):
                tmp[x] += f
            sess = np.unique(np.concatenate(ss))
            stf = tmp[sess]
        out = np.zeros(view.n_sessions, np.float32)
        sidf = math.log(1.0 + (view.n_sess_live - len(sess) + 0.5) / (len(sess) + 0.5))
        snorm = t.k1 * (1.0 - t.b + t.b * view.s_length[sess] / view.s_avg)
        out[sess] = sidf * stf * (t.k1 + 1.0) / (stf + snorm)
        s_scores += out
    hit = np.concatenate(found) if found else np.zeros(0, np.int32)
    return scores, s_scores, hit, full


def paired(fast, plain, first: bool) -> tuple[object, object, float, float]:
    """(fast's result, plain's result, fast ms, plain ms), one run each; ``first``: fast first."""
    out, ms = {}, {}
    for name, fn in ((("fast", fast), ("plain", plain)) if first else
                     (("plain", plain), ("fast", fast))):
        t = time.perf_counter()
        out[name] = fn()
        ms[name] = (time.perf_counter() - t) * 1000
    return out["fast"], out["plain"], ms["fast"], ms["plain"]


class Checked:
    """Wraps the sped-up stages: each call also runs the plain way and must match bit for bit."""

    def __init__(self, base: str | None = None) -> None:
        from graphmem.index import maxsim, ranker

        self.ms: dict[str, dict[str, list[float]]] = {
            "MaxSim product": {"fast": [], "plain": []}, "word BM25": {"fast": [], "plain": []}}
        self.rows = 0
        self.code_hits: dict[str, int] = {}  # hits compared per code stage
        fast_best, fast_terms = maxsim.best_matches, ranker.term_scores

        order = random.Random(0)  # which way runs first: a search's calls come in fours (a
        # cold warm-up, then three), so alternating by count would always run one way cold

        def timed(stage: str, fast, plain):
            times = self.ms[stage]
            got, want, f, p = paired(fast, plain, order.random() < 0.5)
            times["fast"].append(f)
            times["plain"].append(p)
            return got, want

        def best_matches(mats, qm, *a, **kw):
            import numpy as np

            got, want = timed("MaxSim product", lambda: fast_best(mats, qm, *a, **kw),
                              lambda: one_product(mats, qm, maxsim.maxsim_session()))
            if not np.array_equal(got, want):
                raise AssertionError(f"MaxSim differs: {np.abs(got - want).max()}")
            self.rows += sum(len(m[0]) for m in mats)
            return got

        def term_scores(view, terms, t):
            import numpy as np

            got, want = timed("word BM25", lambda: fast_terms(view, terms, t),
                              lambda: term_scores_per_term(view, terms, t))
            for name, a, b in zip(("rows", "sessions", "hit"), got, want):
                if a.dtype != b.dtype or not np.array_equal(a, b):
                    raise AssertionError(f"word stage {name} differ for terms {terms}")
            if got[3] != want[3]:
                raise AssertionError(f"idf sum differs: {got[3]!r} != {want[3]!r}")
            return got

        maxsim.best_matches, ranker.term_scores = best_matches, term_scores
        self._check_query_pass(timed)
        if base is not None:
            from _exact_code import check_code_stages

            check_code_stages(self, timed, base)

    def _check_query_pass(self, timed) -> None:
        """Every ColBERT pass (queries and documents) on the encoder's one-thread session against
        a session of the same model on two threads (``SESSION_THREADS``, as before), bit for bit."""
        import numpy as np

        from graphmem.providers import local_colbert
        from graphmem.providers.local_fuse import fused
        from graphmem.providers.onnx_runtime import load_session

        enc_cls = local_colbert.ColbertEncoder
        run = enc_cls._run
        two: list = []
        for stage in ("ColBERT query pass", "ColBERT document pass"):
            self.ms[stage] = {"fast": [], "plain": []}
            self.code_hits[stage] = 0

        def checked_run(enc, text, marker, limit, skip_punct, session=None):
            if not two:
                two.append(load_session(enc.path, enc.cache.folder, threads=2,
                                        prefer=fused(enc.path / "model.onnx", enc.cache)))
            stage = "ColBERT query pass" if marker == local_colbert.Q_MARKER else \
                "ColBERT document pass"
            got, want = timed(stage, lambda: run(enc, text, marker, limit, skip_punct),
                              lambda: run(enc, text, marker, limit, skip_punct, two[0]))
            if got.dtype != want.dtype or not np.array_equal(got, want):
                raise AssertionError(f"token vectors differ for {text[:60]!r}")
            self.code_hits[stage] += len(got)
            return got

        enc_cls._run = checked_run

    def report(self) -> None:
        n = {k: len(v["fast"]) for k, v in self.ms.items()}
        print(f"\nidentical, bit for bit: {n['MaxSim product']} MaxSim products ({self.rows} token "
              f"rows), {n['word BM25']} word stages"
              + "".join(f", {n[k]} calls of {k} ({v} hits)" for k, v in self.code_hits.items()))
        table("each stage per search, ms, both ways on the same inputs (in random order)",
              ["stage", "way", "calls", "p50", "p95", "mean"],
              [[stage, way, len(v), pct(v, 50), pct(v, 95), sum(v) / max(1, len(v))]
               for stage, ways in self.ms.items() for way, v in ways.items()])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--datasets", default="pytest,entire-cli")
    ap.add_argument("--tasks", type=int, default=None, help="at most N tasks, spread evenly")
    ap.add_argument("--base", default="e326048",
                    help="the commit whose code/recall.py and code/freshness.py are the plain way "
                         "('' skips those stages)")
    args = ap.parse_args()
    checked = Checked(args.base or None)
    import codemem

    sys.argv = [sys.argv[0], "--datasets", args.datasets, "--out", "codemem_exact",
                *(["--tasks", str(args.tasks)] if args.tasks else [])]
    codemem.main()
    checked.report()
    return 0


if __name__ == "__main__":
    sys.exit(main())
