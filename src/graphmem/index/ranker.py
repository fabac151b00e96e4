"""The first ranking stage, as functions of a view's arrays and a ``Tuning``.

Lexical (``lexical``): own BM25 (Lucene idf, k1/b tuned for short memories) over item terms,
blended with a BM25 score of the item's whole session and smoothed over its session neighbours
(a turn is understood with the turns around it); items whose own naming fields (speaker, file
path) the query mentions are boosted. Dense (``rank``): cosine against the embedder's vectors
(every row of a small scope; above ``exact_limit`` rows, the nearest lists of the partition plus
the lexical candidates, re-scored exactly). The two are fused (``fuse``) after scaling words to
the best match in scope and cosines between the scope's median and best.

After the postings are read, work is bounded by the candidates (``lex_cand`` rows,
``session_cand`` sessions), not by the index size.
"""

from __future__ import annotations

import math

import numpy as np

from .tuning import Tuning
from .view import View


def lexical(view: View, term_ids: list[int], t: Tuning) -> tuple[np.ndarray, np.ndarray, float]:
    """BM25 of rows, plus their session's BM25, smoothed over neighbours, name-boosted.

    Returns the scores (dense), the positions holding a non-zero score, and the score a row of
    average length holding every query term once would get. Work after the postings is done on
    those positions only, so a query costs little more at 100k rows than at 1k.
    """
    scores, s_scores, hit, full = term_scores(view, list(set(term_ids)), t)
    if not full:
        return scores, np.zeros(0, np.int64), 0.0
    # Positions may repeat from here on (a row holding two query terms): a fancy ``+=`` with
    # repeated positions and equal values acts once, and ``rank`` drops repeats.
    if len(hit) > t.lex_cand:  # common words: carry on with the best rows only
        hit = hit[np.argpartition(-scores[hit], t.lex_cand - 1)[:t.lex_cand]]
    vals = scores[hit]
    found = [hit]
    for w, pair in zip(t.neighbour_weights, view.neighbours):
        for near in pair:  # a row has one row before and one after it: targets are unique
            tgt = near[hit]
            ok = tgt >= 0
            scores[tgt[ok]] += w * vals[ok]
            found.append(tgt[ok])
    top = float(s_scores.max()) if len(s_scores) else 0.0
    if top > 0:
        sess = np.flatnonzero(s_scores)
        if len(sess) > t.session_cand:
            sess = sess[np.argpartition(-s_scores[sess], t.session_cand - 1)[:t.session_cand]]
        rows = view.session_rows(sess)
        coef = t.session_weight * float(scores[np.concatenate(found)].max()) / top
        scores[rows] += coef * s_scores[view.session[rows]]
        found.append(rows)
    hit = np.concatenate(found)
    if t.name_boost != 1.0:
        named = [doc[ptr[term]:ptr[term + 1]] + off for term in set(term_ids)
                 for ptr, doc, off in view.name_segments if term + 1 < len(ptr)]
        named = [x for x in named if len(x)]
        if named:
            boost = np.zeros(view.n, bool)
            boost[np.concatenate(named)] = True
            scores[hit[boost[hit]]] *= t.name_boost
    return scores, hit, full


def term_scores(view: View, terms: list[int],
                t: Tuning) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    """(BM25 of every row, BM25 of every session, the rows holding a term, the sum of the idfs
    of the terms some row holds) for distinct ``terms``. Their postings are read in one call
    (``View.postings_of``); each term's scores are then added in turn (``np.add.at`` adds
    repeated positions in order), so a row's sum is the float32 sum one ``+=`` per term made."""
    scores = np.zeros(view.n, np.float32)
    d, part, counts = view.postings_of(terms, t)
    idf = [math.log(1.0 + (view.n_live - int(n) + 0.5) / (int(n) + 0.5)) if n else 0.0
           for n in counts]
    full = sum(x for x, n in zip(idf, counts) if n)  # in term order, as it always was
    np.add.at(scores, d, np.repeat(np.array(idf, np.float32), counts) * part)
    s_scores = np.zeros(view.n_sessions, np.float32)
    if t.session_weight and view.n_sessions:
        which, sess, stf = view.session_postings_of(terms)
        keep = (counts > 0)[which]  # terms no live row holds add nothing
        which, sess, stf = which[keep], sess[keep], stf[keep]
        n = np.bincount(which, minlength=len(terms))
        sidf = np.array([math.log(1.0 + (view.n_sess_live - int(k) + 0.5) / (int(k) + 0.5))
                         for k in n], np.float32)[which]
        snorm = t.k1 * (1.0 - t.b + t.b * view.s_length[sess] / view.s_avg)
        np.add.at(s_scores, sess, sidf * stf * (t.k1 + 1.0) / (stf + snorm))
    return scores, s_scores, d, float(full)


def rank(view: View, words, qvec: np.ndarray | None, scope, limit: int,
         t: Tuning) -> list[tuple[int, float]]:
    """Top ``limit`` (position, score) pairs within ``scope`` (a ``View.mask`` result);
    ``words`` is the query's term ids or, already computed, their ``lexical`` result."""
    mask, idx, _ = scope
    if not len(idx):
        return []
    lex, hit, full = words if isinstance(words, tuple) else lexical(view, words, t)
    lex_in = hit[mask[hit]]  # in-scope rows sharing a word with the query
    # Scale words by the best match in scope, but never by less than a share of what a full
    # match of every query term would score: one rare shared word must not outrank meaning.
    lex_top = max(float(lex[lex_in].max()) if len(lex_in) else 0.0, t.lex_floor * full)
    scale = 1.0 / lex_top if lex_top > 0 else 0.0
    if view.vectors is None or qvec is None or not t.dense_weight:
        cand = lex_in  # words alone: an item sharing none is no answer
        final = lex[cand] * scale
    elif view.partition is None or len(idx) <= t.exact_limit:
        cand = idx
        sims = view.scope_sims(scope, qvec) if len(idx) <= t.exact_limit else view.sims(idx, qvec)
        final = fuse(lex[cand] * scale, sims, float(np.median(sims)), float(sims.max()), t)
    else:
        pos, sims = view.probed(qvec, mask, t)
        if len(lex_in) > t.lex_pool:
            lex_in = lex_in[np.argpartition(-lex[lex_in], t.lex_pool - 1)[:t.lex_pool]]
        extra = np.setdiff1d(lex_in, pos, assume_unique=True)
        cand = np.concatenate([pos, extra])
        sims = np.concatenate([sims, view.sims(extra, qvec)])
        lo = median_sim(view, qvec, mask, idx, t)
        final = fuse(lex[cand] * scale, sims, lo, float(sims.max()), t)
    if not len(cand):
        return []
    k = min(limit * 6, len(cand))  # a row can be in ``cand`` up to 6 times (see lexical)
    top = np.argpartition(-final, k - 1)[:k] if k < len(cand) else np.arange(len(cand))
    top = top[np.argsort(-final[top], kind="stable")]
    out: dict[int, float] = {}
    for i in top:
        out.setdefault(int(cand[i]), float(final[i]))
        if len(out) == limit:
            break
    return list(out.items())


def median_sim(view: View, q: np.ndarray, mask: np.ndarray, idx: np.ndarray, t: Tuning) -> float:
    """The scope's median cosine, estimated on a fixed sample of base rows."""
    pos, mat = view.sample(t.median_sample)
    inside = mask[pos]
    if inside.sum() >= 64:
        return float(np.median((mat @ q)[inside]))
    return float(np.median(view.sims(idx[::max(1, len(idx) // t.median_sample)], q)))


def fuse(lex: np.ndarray, sims: np.ndarray, lo: float, hi: float, t: Tuning) -> np.ndarray:
    """Words (scaled to [0, 1]) and cosines (scaled between ``lo`` and ``hi``), weighted."""
    if hi <= lo:
        return lex
    return (1 - t.dense_weight) * lex + t.dense_weight * (sims - lo) / (hi - lo)
