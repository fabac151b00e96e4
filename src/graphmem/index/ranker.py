"""Hybrid ranking on an in-memory snapshot of the local index (numpy arrays).

Lexical: own BM25 (Lucene idf, k1/b tuned for short memories) over item terms, blended with a
BM25 score of the item's whole session and smoothed over its session neighbours (a turn is
understood with the turns around it); items whose own naming fields (speaker, file path) the
query mentions are boosted. Dense: cosine against the configured embedder's vectors, smoothed the
same way. The two are fused after scaling each to its best score in scope.
"""

from __future__ import annotations

import json
import math
import sqlite3
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..models import KINDS

SEQUENCE_KINDS = ("turn", "step")  # kinds whose neighbours in a session give them context


@dataclass
class Params:
    """Ranking knobs (chosen on held-in LoCoMo conversations, see bench/locomo.py)."""

    k1: float = 0.6
    b: float = 0.3
    session_weight: float = 0.4  # share of the session's own BM25 (scaled to the best item)
    neighbour_weights: tuple[float, ...] = (0.5, 0.25)  # ±1, ±2 items in the session
    name_boost: float = 1.5
    lex_floor: float = 1.0  # see ``rank``
    dense_weight: float = 0.3
    dense_neighbour_weights: tuple[float, ...] = ()  # smoothing vectors' scores only blurred them


def _csr(docs: np.ndarray, terms: np.ndarray, n_terms: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Postings grouped by term: (ptr, doc, tf) with one entry per (term, doc)."""
    if len(docs) == 0:
        return np.zeros(n_terms + 1, np.int64), np.zeros(0, np.int32), np.zeros(0, np.float32)
    n_docs = int(docs.max()) + 1
    key = terms.astype(np.int64) * n_docs + docs
    uniq, tf = np.unique(key, return_counts=True)
    t = uniq // n_docs
    ptr = np.searchsorted(t, np.arange(n_terms + 1)).astype(np.int64)
    return ptr, (uniq % n_docs).astype(np.int32), tf.astype(np.float32)


@dataclass
class Snapshot:
    """Every indexed item as arrays, for sub-millisecond scoring."""

    rowid: np.ndarray
    project: np.ndarray
    kind: np.ndarray
    spec: np.ndarray
    specs: dict[str, int]
    length: np.ndarray
    ptr: np.ndarray
    doc: np.ndarray
    tf: np.ndarray
    names: dict[int, np.ndarray]  # naming term -> rows it names
    session: np.ndarray
    s_ptr: np.ndarray
    s_doc: np.ndarray
    s_tf: np.ndarray
    s_length: np.ndarray
    neighbours: list[tuple[np.ndarray, np.ndarray]]
    vectors: np.ndarray | None
    _masks: dict[Any, np.ndarray] = field(default_factory=dict)

    @property
    def n(self) -> int:
        return len(self.rowid)

    @classmethod
    def build(cls, conn: sqlite3.Connection, embedder: Any = None) -> "Snapshot":
        """Load the index tables into arrays."""
        rows = conn.execute("SELECT rowid, kind, project_id, spec, session, time, hash, terms, "
                            "fields, length FROM search_items ORDER BY rowid").fetchall()
        n = len(rows)
        kind_code = {k: i for i, k in enumerate(KINDS)}
        specs: dict[str, int] = {}
        sessions: dict[tuple, int] = {}
        rowid = np.fromiter((r[0] for r in rows), np.int64, n)
        kind = np.fromiter((kind_code[r[1]] for r in rows), np.int8, n)
        project = np.fromiter((r[2] for r in rows), np.int32, n)
        spec = np.fromiter((specs.setdefault(r[3], len(specs)) if r[3] else -1 for r in rows),
                           np.int32, n)
        session = np.fromiter((sessions.setdefault((r[2], r[3], r[4]), len(sessions))
                               if r[4] is not None else -1 for r in rows), np.int32, n)
        times = np.fromiter((r[5] if r[5] is not None else 0.0 for r in rows), np.float64, n)
        length = np.fromiter((r[9] for r in rows), np.float32, n)
        term_arrays = [np.frombuffer(r[7], np.int32) for r in rows]
        lens = np.fromiter((len(a) for a in term_arrays), np.int64, n)
        terms = np.concatenate(term_arrays) if n else np.zeros(0, np.int32)
        docs = np.repeat(np.arange(n, dtype=np.int32), lens)
        n_terms = (int(terms.max()) + 1) if len(terms) else 1
        ptr, doc, tf = _csr(docs, terms, n_terms)
        named: dict[int, list[int]] = {}
        for i, r in enumerate(rows):
            if r[8]:
                for t in np.frombuffer(r[8], np.int32).tolist():
                    named.setdefault(t, []).append(i)
        names = {t: np.array(v, np.int64) for t, v in named.items()}
        # sessions as documents: the concatenation of their items' terms
        has = session[docs] >= 0 if n else np.zeros(0, bool)
        s_ptr, s_doc, s_tf = _csr(session[docs][has], terms[has], n_terms)
        s_length = np.bincount(session[session >= 0], weights=length[session >= 0],
                               minlength=len(sessions)).astype(np.float32)
        neighbours = _neighbours(session, kind, times, rowid, [kind_code[k] for k in SEQUENCE_KINDS])
        vectors = None
        if embedder is not None and n:
            vecs = dict(conn.execute("SELECT hash, vec FROM search_vectors").fetchall())
            dim = embedder.dimension
            vectors = np.zeros((n, dim), np.float32)
            for i, r in enumerate(rows):
                blob = vecs.get(r[6])
                if blob is not None and len(blob) == 4 * dim:
                    vectors[i] = np.frombuffer(blob, np.float32)
            norms = np.linalg.norm(vectors, axis=1, keepdims=True)
            vectors /= np.where(norms == 0, 1, norms)
        return cls(rowid, project, kind, spec, specs, length, ptr, doc, tf, names, session,
                   s_ptr, s_doc, s_tf, s_length, neighbours, vectors)

    # ---- scoring ---------------------------------------------------------------------------
    def mask(self, projects: tuple[int, ...] | None, spec: str | None,
             kinds: tuple[str, ...] | None) -> np.ndarray:
        """Which rows a query may return (cached per scope)."""
        key = (projects, spec, kinds)
        m = self._masks.get(key)
        if m is None:
            m = np.ones(self.n, bool)
            if projects is not None:
                m &= np.isin(self.project, np.array(projects, np.int32))
            if spec is not None:
                m &= self.spec == self.specs.get(spec, -2)
            if kinds is not None:
                m &= np.isin(self.kind, np.array([KINDS.index(k) for k in kinds], np.int8))
            if len(self._masks) > 64:
                self._masks.clear()
            self._masks[key] = m
        return m

    def _bm25(self, term_ids: list[int], ptr, doc, tf, length, n_docs: int, p: Params) -> np.ndarray:
        scores = np.zeros(n_docs, np.float32)
        if n_docs == 0:
            return scores
        avg = float(length.mean()) or 1.0
        for t in term_ids:
            if t + 1 >= len(ptr):
                continue
            lo, hi = ptr[t], ptr[t + 1]
            if lo == hi:
                continue
            d, f = doc[lo:hi], tf[lo:hi]
            df = hi - lo
            idf = math.log(1.0 + (n_docs - df + 0.5) / (df + 0.5))
            norm = p.k1 * (1.0 - p.b + p.b * length[d] / avg)
            scores[d] += idf * f * (p.k1 + 1.0) / (f + norm)
        return scores

    def _smooth(self, scores: np.ndarray, weights: tuple[float, ...]) -> np.ndarray:
        out = scores.copy()
        padded = np.append(scores, np.float32(0))  # index -1 (no neighbour) reads the zero
        for w, (prev, nxt) in zip(weights, self.neighbours):
            if w:
                out += w * (padded[prev] + padded[nxt])
        return out

    def lexical(self, term_ids: list[int], p: Params) -> np.ndarray:
        """BM25 of items, plus their session's BM25, smoothed over neighbours, name-boosted."""
        scores = self._bm25(term_ids, self.ptr, self.doc, self.tf, self.length, self.n, p)
        scores = self._smooth(scores, p.neighbour_weights)
        if p.session_weight and len(self.s_length):
            s = self._bm25(term_ids, self.s_ptr, self.s_doc, self.s_tf, self.s_length,
                           len(self.s_length), p)
            top = float(s.max())
            if top > 0:
                item_top = float(scores.max()) or 1.0
                has = self.session >= 0
                scores[has] += p.session_weight * item_top * s[self.session[has]] / top
        if p.name_boost != 1.0:
            hit = [self.names[t] for t in set(term_ids) if t in self.names]
            if hit:
                scores[np.unique(np.concatenate(hit))] *= p.name_boost
        return scores

    def full_match(self, term_ids: list[int], p: Params) -> float:
        """BM25 of a document of average length holding each query term once."""
        total = 0.0
        for t in set(term_ids):
            if t + 1 < len(self.ptr):
                df = int(self.ptr[t + 1] - self.ptr[t])
                if df:
                    total += math.log(1.0 + (self.n - df + 0.5) / (df + 0.5))
        return total

    def dense(self, qvec: np.ndarray, p: Params) -> np.ndarray | None:
        if self.vectors is None or qvec is None:
            return None
        sims = self.vectors @ qvec
        return self._smooth(sims, p.dense_neighbour_weights)

    def rank(self, term_ids: list[int], qvec: np.ndarray | None, mask: np.ndarray, limit: int,
             p: Params) -> list[tuple[int, float]]:
        """Top ``limit`` (row index, score) pairs within ``mask``."""
        if not mask.any():
            return []
        lex = self.lexical(term_ids, p)
        # Scale words by the best match in scope, but never by less than a share of what a full
        # match of every query term would score: one rare shared word must not outrank meaning.
        lex_top = max(float(lex[mask].max()), p.lex_floor * self.full_match(term_ids, p))
        final = lex / lex_top if lex_top > 0 else np.zeros(self.n, np.float32)
        sims = self.dense(qvec, p)
        if sims is None or not p.dense_weight:
            mask = mask & (final > 0)  # words alone: an item sharing none is no answer
            if not mask.any():
                return []
        else:
            s = sims[mask]
            lo, hi = float(np.median(s)), float(s.max())
            if hi > lo:
                final = (1 - p.dense_weight) * final + p.dense_weight * (sims - lo) / (hi - lo)
        final = np.where(mask, final, -np.inf)
        k = min(limit, int(mask.sum()))
        idx = np.argpartition(-final, k - 1)[:k] if k < self.n else np.arange(self.n)
        idx = idx[np.argsort(-final[idx], kind="stable")][:k]
        return [(int(i), float(final[i])) for i in idx if np.isfinite(final[i])]


def _neighbours(session, kind, times, rowid, seq_kinds) -> list[tuple[np.ndarray, np.ndarray]]:
    """For each distance d = 1, 2: index of the item d before/after in its session (-1: none)."""
    n = len(session)
    out = []
    eligible = (session >= 0) & np.isin(kind, np.array(seq_kinds, np.int8))
    idx = np.flatnonzero(eligible)
    order = idx[np.lexsort((rowid[idx], times[idx], session[idx]))]
    sess = session[order]
    for d in (1, 2):
        prev = np.full(n, -1, np.int64)
        nxt = np.full(n, -1, np.int64)
        if len(order) > d:
            same = sess[d:] == sess[:-d]
            prev[order[d:][same]] = order[:-d][same]
            nxt[order[:-d][same]] = order[d:][same]
        out.append((prev, nxt))
    return out


def metadata(raw: str) -> dict:
    try:
        return json.loads(raw)
    except (TypeError, ValueError):
        return {}
