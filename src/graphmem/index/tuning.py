"""Every knob of the local index's ranking and caching, in one frozen value passed down.

A ``LocalIndex`` holds one ``Tuning`` (``index.tuning``; ``DEFAULT`` unless given); the ranking
stages take it as an argument instead of reading module globals, so a test or a benchmark that
wants another value builds one with ``dataclasses.replace`` and passes it. What each value is,
what was measured to choose it and with which bench: ``docs/tuning.md``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field


def cores() -> int:
    """CPU cores of the machine (as ``providers/onnx_runtime.py`` counts them for its threads)."""
    return os.cpu_count() or 1


@dataclass(frozen=True)
class Tuning:
    """Ranking weights, candidate limits, rerank budget and cache sizes of the local index."""

    # ---- first stage: BM25 over items and their sessions, fused with cosines (``ranker.py``)
    k1: float = 0.6
    b: float = 0.3
    session_weight: float = 0.4  # share of the session's own BM25 (scaled to the best item)
    neighbour_weights: tuple[float, ...] = (0.5, 0.25)  # ±1, ±2 items in the session
    name_boost: float = 1.5  # a query naming an item's speaker, path or title
    lex_floor: float = 1.0  # words scale by max(best in scope, this x a full match)
    dense_weight: float = 0.3  # share of the cosine in the fused score
    lex_cand: int = 3000  # rows (best raw BM25 first) that smoothing and fusion consider
    session_cand: int = 300  # best sessions whose rows get the session score
    exact_limit: int = 4_000  # scopes up to this many rows are scored against every vector
    lex_pool: int = 100  # lexical candidates re-scored beside the probed vectors
    median_sample: int = 1024  # rows whose cosine estimates a big scope's median
    # ---- coarse vector partition (``ivf.py``)
    ivf_min_rows: int = 5_000  # below this a full scan costs a millisecond or two
    ivf_train_rows: int = 16_000
    ivf_iterations: int = 6
    ivf_probe_share: float = 0.04  # share of the lists probed per query
    ivf_min_probes: int = 8
    # ---- snapshot (``snapshot.py``): when the rows written since the base are merged into it
    min_delta: int = 2000  # a delta this small is always ranked beside the base
    delta_share: float = 0.05  # beyond this share of the base, the next search rebuilds it
    # ---- late interaction (``late.py``)
    late_pool: int = 24  # first-stage rows re-scored by MaxSim
    late_weight: float = 0.55  # share of MaxSim in the final score
    late_neighbour: float = 0.2  # share of the pool neighbours' MaxSim added to a turn's
    late_context: tuple[float, float] = (0.9, 0.8)  # a neighbour 1 / 2 away's token counts this
    late_token_weights: bool = True  # query tokens count by how rare a good match is in the pool
    late_cache_bytes: int = 64 << 20  # unpacked stored token matrices kept between searches
    # ---- cross-encoder second stage, ``rerank=True`` (``rerank.py``)
    rerank_pool: int = 40  # first-stage hits the reranker may see
    rerank_weight: float = 0.5  # share of the reranker in the final score
    rerank_context_words: int = 20  # words of the previous item shown with a turn or step
    rerank_budget_tokens: int = 1300  # per query, for an in-process cross-encoder
    rerank_deadline: float = 0.25  # seconds of cross-encoder time per query
    rerank_batch: int = 2  # pairs per worker-thread call: the deadline is checked between
    # ---- query encoding (``local_search.py``)
    vector_cache: int = 256  # query vectors remembered (agents repeat queries)
    embed_batch: int = 64  # texts per embedder call on writes
    # Score words while the query encoder runs only with cores left over (measured when the
    # encoder used two threads; it uses one since issue 17's h35: docs/tuning.md).
    overlap: bool = field(default_factory=lambda: cores() > 2)


DEFAULT = Tuning()
