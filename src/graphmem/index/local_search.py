"""Answering one query from the local index: terms and vector in, ``Hit`` objects out."""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any, Sequence

from ..errors import ProviderError
from ..lru import LRU
from ..models import Hit
from graphmem.index import blas, late, ranker
from .local_index import LocalIndex, row_time
from .text import tokenize
from .tuning import DEFAULT, Tuning

log = logging.getLogger("graphmem.index")

_VECTORS = LRU(DEFAULT.vector_cache)  # (embedder, query) -> unit vector, across indexes


async def query_vector(embedder: Any, query: str):
    """The query's unit vector, or None without an embedder."""
    if embedder is None:
        return None
    key = (embedder.name, query)
    got = _recall(key)
    if got is not None:
        return got
    from ..providers.base import InProcessEmbedder, as_embedder

    embedder = as_embedder(embedder)
    if isinstance(embedder, InProcessEmbedder):
        # An in-process model: run it on a worker thread (onnxruntime releases the GIL) while
        # the caller scores words on this one.
        vec = await asyncio.to_thread(embedder.embed_query_sync, query)
    else:
        vec = await embedder.embed_query(query)
    return remember_query_vector(key, vec)


def forget_query_vectors() -> None:
    """Empty the memory of recent query vectors (a benchmark times the model on new queries)."""
    _VECTORS.clear()


def _recall(key: tuple[str, str]):
    """A query vector computed lately, or None."""
    return _VECTORS.get(key)


def remember_query_vector(key: tuple[str, str], vec: Any):
    """Keep a query's vector, scaled to unit length, under (embedder name, query); returns it."""
    import numpy as np

    v = np.asarray(vec, np.float32)
    norm = float(np.linalg.norm(v))
    return _VECTORS.put(key, v / norm if norm else v)


async def _encode(index: LocalIndex, late_enc: Any, query: str, want_vector: bool,
                  inline: bool) -> tuple[Any, Any]:
    """(query token matrix, query unit vector) for the stages that run. Each is None when not
    wanted, or the exception that stopped its model: words alone still answer. With the default
    local model one pass gives both (the vector is the token matrix's mean)."""
    if late_enc is not None and want_vector and not late.shares_pass(index):
        # two models (e.g. bge vectors and ColBERT tokens): side by side on worker threads
        qm, qvec = await asyncio.gather(late.query_tokens(late_enc, query),
                                        query_vector(index.embedder, query),
                                        return_exceptions=True)
        for got in (qm, qvec):  # cancellation, or an embedder bug: not "words alone"
            if isinstance(got, BaseException) and not isinstance(got, Exception):
                raise got
        if isinstance(qvec, Exception) and not isinstance(qvec, ProviderError):
            raise qvec
        return qm, qvec
    qm: Any = None
    if late_enc is not None:
        try:
            qm = await late.query_tokens(late_enc, query, inline=inline)
        except Exception as exc:
            qm = exc
    if not want_vector:
        return qm, None
    if late_enc is not None:  # the embedder is the token matrix's mean: one pass gave both
        key = (index.embedder.name, query)
        got = _recall(key)
        if got is not None:
            return qm, got
        if isinstance(qm, Exception):
            return qm, ProviderError(f"query not encoded: {qm}")
        return qm, remember_query_vector(key, qm.mean(axis=0))
    try:
        return qm, await query_vector(index.embedder, query)
    except ProviderError as exc:
        return qm, exc


async def search_local(index: LocalIndex, query: str, *, projects: Sequence[str] | None,
                       spec: str | None = None, kinds: Sequence[str] | None = None,
                       limit: int = 10, tuning: Tuning | None = None,
                       late_stage: bool | None = None) -> list[Hit]:
    """Rank the index's items for ``query`` within the given projects (None: all) and spec.

    ``late_stage``: re-score with ColBERT token vectors; None follows ``index.late_always``.
    ``tuning``: the index's own unless given.
    """
    p = tuning or index.tuning
    index.check_embedder()
    snap = index.snapshot()
    pids: tuple[int, ...] | None = None
    if projects is not None:
        pids = tuple(sorted(i for i in (index.project_id(x) for x in projects) if i is not None))
        if not pids:
            return []
    scope = snap.mask(pids, spec, tuple(sorted(kinds)) if kinds else None)
    term_ids = list(index.term_ids(tokenize(query)).values())
    # The query encoders run beside the word scoring on a worker thread (onnxruntime releases the
    # GIL) when cores allow (``tuning.overlap``), else first, in this thread for the ColBERT pass
    # (a hand-off to a worker and back cost more than the pass blocks the loop).
    wanted = index.late_always if late_stage is None else late_stage
    late_enc = index.late if wanted and p.late_pool and late.usable(index) else None
    encoding = _encode(index, late_enc, query, snap.vectors is not None, not p.overlap)
    if p.overlap:
        encoding = asyncio.ensure_future(encoding)
        await asyncio.sleep(0)  # let the encoders start before the words are scored
        words = ranker.lexical(snap, term_ids, p)
        qm, qvec = await encoding
    else:
        qm, qvec = await encoding
        words = ranker.lexical(snap, term_ids, p)
    if isinstance(qvec, Exception):  # the embedder is down: words alone still answer
        log.warning("query not embedded (%s); ranking by words only", qvec)
        qvec = None
    if isinstance(qm, Exception):  # a model failure leaves the first stage's order
        log.warning("late interaction skipped (%s)", qm)
        qm = None
    with blas.one_thread():
        ranked = ranker.rank(snap, words, qvec, scope, max(limit, p.late_pool if late_enc else 0), p)
        if qm is not None and ranked:
            ranked = _late_stage(index, snap, qm, ranked, p)
    ranked = ranked[:limit]
    rows = index.rows([int(snap.rowid[i]) for i, _ in ranked])
    hits = [hit_of(rows[int(snap.rowid[i])], score) for i, score in ranked
            if int(snap.rowid[i]) in rows]
    return hits


def _late_stage(index: LocalIndex, snap, qm, ranked: list[tuple[int, float]],
                p: Tuning) -> list[tuple[int, float]]:
    """Re-score the first stage's pool by MaxSim over stored token vectors (``late.py``)."""
    import numpy as np

    pos = np.array([i for i, _ in ranked], np.int64)
    around = late.context_rows(snap, pos)  # (4, n) rows 1 and 2 before / after in the session
    near = _index_in(pos, around[:2])  # the pool index of the rows just before / after
    need = np.unique(np.concatenate([pos, around[around >= 0]]))  # sorted positions
    rowids = [int(r) for r in snap.rowid[need]]
    blobs = late.token_rows(index, rowids)
    best = late.token_best(qm, [blobs.get(r) for r in rowids])
    own = best[:, np.searchsorted(need, pos)]
    nb = np.full((len(around),) + own.shape, np.nan, np.float32)
    for side in range(len(around)):
        ok = around[side] >= 0
        nb[side][:, ok] = best[:, np.searchsorted(need, around[side][ok])]
    return late.rescore(ranked, own, nb, near, p)


def _index_in(pos, values):
    """For each of ``values``, its index in ``pos`` (distinct positions), or -1."""
    import numpy as np

    order = np.argsort(pos)
    at = np.minimum(np.searchsorted(pos[order], values), len(pos) - 1)
    return np.where(pos[order][at] == values, order[at], -1)


def hit_of(row, score: float) -> Hit:
    """A ``Hit`` from an index row (``IndexStore.rows``) and its score."""
    return Hit(id=row["id"], kind=row["kind"], text=row["text"], score=round(score, 6),
               project=row["project"], spec=row["spec"], session=row["session"],
               time=row_time(row["time"]), metadata=json.loads(row["metadata"]),
               source=row["source"], backend="local")
