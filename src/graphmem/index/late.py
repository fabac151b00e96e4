"""Late interaction as a second stage: ColBERT token vectors per content hash, MaxSim on the pool.

Writes: every distinct text gets its token matrix (int8, one scale per token; see
``providers/local_colbert.pack``) in ``search_tokens``, keyed by the same content hash as the
dense vectors, so unchanged text is never encoded twice and ``reindex`` fills only what is
missing. When the embedder is the mean of these token vectors (the local default,
``ColbertMeanEmbedder``), one model pass gives a text both (``encode_shared``), and a query's one
pass gives its vector and its tokens. Search: the first stage (words + dense, ``ranker.rank``)
proposes ``Tuning.late_pool`` rows. Each query token takes its best match among the row's tokens
or, at ``late_context`` of its value, among the tokens of the turns one and two before and after
it (a turn is read in context); tokens are weighted by how rare a good match is in the pool, the
weighted sum is blended with the pool neighbours' scores and fused with the first stage after
scaling both to [0, 1]. It lifts recall on questions that share no word with their answer
(measured: ``docs/tuning.md``).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, Sequence

log = logging.getLogger("graphmem.index")


def usable(index: Any) -> bool:
    """True when the index has an encoder and holds token matrices made by it."""
    enc = index.late
    return enc is not None and index.token_model() == enc.name


def missing(index: Any, hashes: Sequence[str]) -> set[str]:
    """The hashes that have no token matrix of the index's encoder yet."""
    todo = set(hashes)
    if index.token_model() in (None, index.late.name):
        todo.difference_update(index.hashes_with_tokens(todo))
    return todo


async def encode_missing(index: Any, pairs: Sequence[tuple[str, str]]) -> dict[str, bytes]:
    """Packed token matrices for (hash, text) pairs whose hash has none yet.

    A failing encoder is logged, not raised: the rows still go in, and ``refill`` (run by
    ``graphmem reindex``) encodes them later.
    """
    enc = index.late
    if enc is None or not pairs:
        return {}
    todo = dict(pairs)
    todo = {h: todo[h] for h in missing(index, list(todo))}
    if not todo:
        return {}
    from ..providers.local_colbert import pack

    def run() -> dict[str, bytes]:
        mats = enc.documents_sync(list(todo.values()))
        return {h: pack(m) for h, m in zip(todo, mats)}

    try:
        return await asyncio.to_thread(run) if len(todo) > 1 else run()
    except Exception as exc:
        log.warning("token vectors not computed (%s); `graphmem reindex` fills them", exc)
        return {}


def shares_pass(index: Any) -> bool:
    """True when the index's embedder is the mean of its late encoder's token vectors: then one
    model pass gives a text both its vector and its token matrix (``encode_shared``)."""
    from ..providers.base import as_embedder

    enc, emb = index.late, as_embedder(index.embedder)
    return enc is not None and emb is not None and emb.token_encoder is enc


async def encode_shared(index: Any, pairs: dict[str, str],
                        have_vectors: set[str]) -> tuple[dict[str, bytes], dict[str, bytes]]:
    """(vectors as float32 bytes, packed token matrices) of the texts lacking either, from one
    ColBERT pass per text. A failing model is logged, not raised (as ``encode_missing``)."""
    from array import array

    from ..providers.local_colbert import mean_vector, pack

    need_vec = set(pairs) - have_vectors
    need_tok = missing(index, list(pairs))
    todo = [h for h in pairs if h in need_vec or h in need_tok]
    if not todo:
        return {}, {}

    def run() -> tuple[dict[str, bytes], dict[str, bytes]]:
        mats = dict(zip(todo, index.late.documents_sync([pairs[h] for h in todo])))
        return ({h: array("f", mean_vector(mats[h])).tobytes() for h in todo if h in need_vec},
                {h: pack(mats[h]) for h in todo if h in need_tok})

    try:
        vectors, tokens = await asyncio.to_thread(run) if len(todo) > 1 else run()
    except Exception as exc:
        log.warning("embedding failed, items indexed without vectors: %s", exc)
        index.last_embed_error = str(exc)
        return {}, {}
    index.embedded_count += len(vectors)
    return vectors, tokens


def store(index: Any, tokens: dict[str, bytes]) -> None:
    """Insert token matrices (inside the caller's write transaction); a new model replaces all."""
    if index.late is not None and tokens:
        index.put_tokens(index.late.name, tokens)


async def refill(index: Any) -> int:
    """Encode every indexed text that has no token matrix (after a failure or a model change)."""
    if index.late is None:
        return 0
    todo = index.texts_without_tokens(every=index.token_model() not in (None, index.late.name))
    if not todo:
        return 0
    tokens = await encode_missing(index, todo)
    with index.transaction():
        store(index, tokens)
    return len(tokens)


async def query_tokens(enc: Any, query: str, inline: bool = False):
    """The query's token matrix: the encoder's own memory of its last queries, else encoded on a
    worker thread (onnxruntime releases the GIL), or in this thread when ``inline``."""
    from ..providers.base import as_token_encoder

    got = as_token_encoder(enc).recalled_query(query)
    if got is not None:
        return got
    return enc.query_sync(query) if inline else await asyncio.to_thread(enc.query_sync, query)


def token_rows(index: Any, rowids: Sequence[int]) -> dict[int, tuple[Any, Any]]:
    """(int8 tokens, scales) of the given rows (rows without a token matrix are left out)."""
    if not rowids:
        return {}
    from ..providers.local_colbert import unpack

    cache = index.token_cache
    hashes = index.hashes_by_rowid(rowids)
    out, todo = {}, {}
    for r, h in hashes.items():
        got = cache.get(h)
        if got is None:
            todo.setdefault(h, []).append(r)
        else:
            out[r] = got
    for h, blob in index.token_blobs(todo):
        got = unpack(blob)
        cache.put(h, got)
        for r in todo[h]:
            out[r] = got
    return out


def token_best(qm, docs: Sequence[tuple[Any, Any] | None]):
    """(query tokens, documents): each query token's best dot product with a document's tokens
    (``token_rows`` values; NaN for a document without tokens)."""
    import numpy as np

    out = np.full((len(qm), len(docs)), np.nan, np.float32)
    where = [i for i, doc in enumerate(docs) if doc is not None]
    if not where:
        return out
    # Rows of one text share one cached matrix (``token_rows``): each is multiplied once (about
    # one pool row in eight on the codemem replays: repeated turns, copied lines).
    column: dict[int, int] = {}
    distinct = []
    for i in where:
        if column.setdefault(id(docs[i]), len(distinct)) == len(distinct):
            distinct.append(docs[i])
    from .maxsim import best_matches

    best = best_matches(distinct, qm)  # per distinct matrix, its best per query token
    out[:, np.array(where)] = best[[column[id(docs[i])] for i in where]].T
    return out


def context_rows(snap: Any, pos) -> Any:
    """(4, n) positions of each row's items 1 before, 1 after, 2 before and 2 after it in its
    session (-1: none)."""
    import numpy as np

    (p1, n1), (p2, n2) = snap.neighbours[0], snap.neighbours[1]
    return np.stack([p1[pos], n1[pos], p2[pos], n2[pos]])


def rescore(ranked: list[tuple[int, float]], best, near_best, near, p: Any) -> list[tuple[int, float]]:
    """Fuse first-stage scores with MaxSim, re-sorted.

    ``best`` holds each query token's best match in each pool row (``token_best``), ``near_best``
    (sides, tokens, n) the same for the rows' session neighbours in ``context_rows`` order, ``near``
    (2, n) the pool index of the rows just before and after (-1: not in the pool). A turn is read
    in context: a query token may match a neighbour's token at ``p.late_context[d - 1]`` of its
    value, d the distance. Query tokens count by how rare a good match is in the pool (1 minus
    their median best match): a token every row matches ("what", "the") carries little. Then the
    pool neighbours' scores are blended in (``p.late_neighbour``). A row without tokens gets the
    pool's median.
    """
    import numpy as np

    if not ranked or np.isnan(best).all():
        return ranked
    pos = np.array([i for i, _ in ranked])
    first = np.array([s for _, s in ranked], np.float32)
    has = ~np.isnan(best[0])  # rows with their own tokens
    if not has.any():
        return ranked
    best = np.where(has, best, 0.0)
    weights = np.ones(len(best), np.float32)
    if p.late_token_weights:
        weights = np.clip(1.0 - np.median(best[:, has], axis=1), 1e-3, None)
    weights = weights / weights.sum()
    if near_best is not None:
        for side, factor in enumerate(p.late_context[d] for d in (0, 0, 1, 1)):
            if side < len(near_best) and factor:
                ctx = np.nan_to_num(near_best[side], nan=-1.0)  # NaN: no neighbour there
                best = np.maximum(best, factor * ctx)
    cb = weights @ best
    cb = np.where(has, cb, float(np.median(cb[has])))
    if p.late_neighbour:
        ok = near >= 0
        vals = np.where(ok, cb[np.maximum(near, 0)], 0.0)
        count = ok.sum(axis=0)
        cb = cb + p.late_neighbour * np.where(count > 0, vals.sum(axis=0) / np.maximum(count, 1), cb)
    top = float(first.max())
    lo, hi = float(cb.min()), float(cb.max())
    f = first / top if top > 0 else first
    c = (cb - lo) / (hi - lo) if hi > lo else np.zeros_like(cb)
    final = (1 - p.late_weight) * f + p.late_weight * c
    order = np.argsort(-final, kind="stable")
    return [(int(pos[k]), float(final[k])) for k in order]
