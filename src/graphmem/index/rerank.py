"""The second stage of ``search(..., rerank=True)``: a cross-encoder over the first stage's best.

The first stage hands over its top ``rerank_pool`` hits. Each is shown to the reranker as a short
passage: a turn or step with the end of the item before it in its session (what it answers),
every other kind with its own text. The reranker's scores are scaled to the pool and fused with
the first-stage scores (the cross-encoder alone ranked worse, measured on LoCoMo). A local
cross-encoder costs CPU in proportion to the tokens it reads, so it gets a token budget and a
deadline: candidates are scored best-first in small batches until either runs out, and the ones
left unscored keep their first-stage score (so they fall below every scored one).
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any, Sequence

from ..errors import ProviderError
from ..models import Hit
from .tuning import Tuning
from .view import SEQUENCE_KINDS

log = logging.getLogger("graphmem.index")


def passages(index, hits: Sequence[Hit], tuning: Tuning) -> list[str]:
    """The text the reranker sees for each hit: turns and steps with the end of the item before
    them (context beat depth at equal cost: ``docs/tuning.md``)."""
    before = previous_texts(index, hits)
    n = tuning.rerank_context_words
    out = []
    for hit in hits:
        prev = before.get(hit.id)
        if prev:
            words = prev.split()
            tail = " ".join(words[-n:])
            prev = tail if len(words) <= n else "… " + tail
            out.append(f"{prev}\n{hit.text}")
        else:
            out.append(hit.text)
    return out


def previous_texts(index, hits: Sequence[Hit]) -> dict[str, str]:
    """id -> text of the item just before it in its session, for the sequence kinds."""
    seq = [h.id for h in hits if h.kind in SEQUENCE_KINDS and h.session]
    if not seq:
        return {}
    snap = index.snapshot()
    where = snap.positions()
    rowids = index.rowids_by_id(seq)
    prev_of = snap.neighbours[0][0]
    want: dict[str, int] = {}
    for hid in seq:
        pos = where.get(rowids.get(hid, -1))
        if pos is not None and prev_of[pos] >= 0:
            want[hid] = int(snap.rowid[prev_of[pos]])
    texts = {r: row["text"] for r, row in index.rows(list(set(want.values()))).items()}
    return {hid: texts[r] for hid, r in want.items() if r in texts}


async def score(reranker: Any, query: str, texts: list[str],
                tuning: Tuning) -> list[float | None]:
    """Reranker scores, best-first within the token budget and deadline (None: not scored).

    A ``PairScorer`` (in-process) is driven batch by batch; any other reranker (a remote API)
    gets one ``score`` call for the whole pool.
    """
    from ..providers.base import PairScorer, as_reranker

    reranker = as_reranker(reranker)
    if not isinstance(reranker, PairScorer):
        got = await reranker.score(query, texts)
        try:
            return [float(x) for x in got]
        except (TypeError, ValueError):
            raise ProviderError("the reranker returned scores that are not numbers",
                                provider=_name(reranker)) from None
    counts = reranker.count_tokens(query, texts)
    n, spent = 0, 0
    while n < len(texts) and spent + counts[n] <= tuning.rerank_budget_tokens:
        spent += counts[n]
        n += 1
    n = max(n, min(len(texts), 2))
    out: list[float | None] = [None] * len(texts)
    start = time.perf_counter()
    for lo in range(0, n, tuning.rerank_batch):
        if lo and time.perf_counter() - start > tuning.rerank_deadline:
            break  # the first batch always runs
        chunk = list(range(lo, min(n, lo + tuning.rerank_batch)))
        got = await asyncio.to_thread(reranker.score_pairs, query, [texts[i] for i in chunk])
        for i, s in zip(chunk, got):
            out[i] = s
    return out


def fuse(hits: list[Hit], scores: list[float | None], tuning: Tuning) -> list[Hit]:
    """Final score = (1 - w) x first stage (scaled to the best) + w x reranker (min-max scaled
    over the scored hits), w = ``rerank_weight``; unscored hits get the reranker's minimum."""
    w = tuning.rerank_weight
    got = [s for s in scores if s is not None]
    if len(got) < 2:
        return hits
    lo, hi = min(got), max(got)
    first_hi = max(h.score for h in hits)
    first_hi = first_hi if first_hi > 0 else 1.0  # a negative scale would flip the order
    for hit, s in zip(hits, scores):
        ce = (s - lo) / (hi - lo) if s is not None and hi > lo else 0.0
        hit.score = round((1 - w) * hit.score / first_hi + w * ce, 6)
    return sorted(hits, key=lambda h: -h.score)


async def rerank(index, reranker: Any, query: str, hits: list[Hit],
                 tuning: Tuning | None = None) -> list[Hit]:
    """``hits`` (first-stage order) re-ordered by the fused score; the first stage's order
    when the reranker fails (a search must still answer). ``tuning``: the index's own."""
    if len(hits) < 2:
        return hits
    tuning = tuning or index.tuning
    texts = passages(index, hits, tuning)
    try:
        scores = await score(reranker, query, texts, tuning)
    except ProviderError as exc:
        log.warning("reranker %s failed (%s); first-stage order kept", _name(reranker), exc)
        return hits
    if len(scores) != len(texts):
        log.warning("reranker %s gave %d scores for %d passages; first-stage order kept",
                    _name(reranker), len(scores), len(texts))
        return hits
    return fuse(hits, scores, tuning)


def _name(reranker: Any) -> str:
    return getattr(reranker, "name", type(reranker).__name__)
