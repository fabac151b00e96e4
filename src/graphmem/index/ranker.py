"""Hybrid ranking on the in-memory view of the local index (numpy arrays, ``snapshot.py``).

Lexical: own BM25 (Lucene idf, k1/b tuned for short memories) over item terms, blended with a
BM25 score of the item's whole session and smoothed over its session neighbours (a turn is
understood with the turns around it); items whose own naming fields (speaker, file path) the
query mentions are boosted. Dense: cosine against the configured embedder's vectors (every row of
a small scope; above ``EXACT_LIMIT`` rows, the nearest lists of the partition plus the lexical
candidates, re-scored exactly). The two are fused after scaling words to the best match in scope
and cosines between the scope's median and best.

Cost: after the postings are read, work is bounded by the candidates (``LEX_CAND`` rows,
``SESSION_CAND`` sessions), not by the index size.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
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
    # First-stage rows re-scored by late interaction (``late.py``). On LoCoMo (bench/locomo.py)
    # 32 ranked like 64 (unseen R@10 .805 vs .807; p50 23.1 -> 19.6 ms), and 24 like 32 (R@5 /
    # R@10 tuned .783 / .839 vs .778 / .842, unseen .752 / .804 vs .753 / .808, bench/locomo.py;
    # about 1 ms less at p95 in an interleaved profile outside the repo); 16 lost (unseen R@10 .796).
    late_pool: int = 24
    late_weight: float = 0.55  # share of MaxSim in the final score
    late_neighbour: float = 0.2  # share of the pool neighbours' MaxSim added to a turn's
    # A query token matching the token of a session neighbour 1 / 2 items away counts this much.
    late_context: tuple[float, float] = (0.9, 0.8)
    late_token_weights: bool = True  # query tokens count by how rare a good match is in the pool
    # Not used, measured on LoCoMo: smoothing cosines over neighbours (blurred them), a session's
    # best or mean cosine blended in (+-0.004 R@10), turn+previous-turn vectors (+0.005); RM3
    # expansion (5 rows, 20 terms, weight .3/.5) before late interaction (R@5 -.006, R@10 +-.004);
    # MaxSim with query tokens weighted (stop words, markers) or a session's best MaxSim (+-.005).


LEX_CAND = 3000  # rows (best raw BM25 first) that smoothing and fusion consider
SESSION_CAND = 300  # best sessions whose rows get the session score
EXACT_LIMIT = 4_000  # scopes up to this many rows are scored exactly against every vector
LEX_POOL = 100  # lexical candidates re-scored beside the probed vectors (partitioned scopes)
MEDIAN_SAMPLE = 1024  # rows whose similarity estimates the scope's median (partitioned scopes)


class View:
    """A base plus its delta as one set of rows (positions: base first, then delta)."""

    @classmethod
    def of(cls, base, delta, gone, gen: int, specs: dict[str, int], n_sessions: int) -> "View":
        self = cls()
        b, d = base.rows, delta
        self.base, self.gen, self.specs, self.n_sessions = base, gen, specs, n_sessions
        self.nb = b.n
        for c in ("rowid", "project", "kind", "spec", "session", "time", "length"):
            setattr(self, c, np.concatenate([getattr(b, c), getattr(d, c)]))
        self.live = np.ones(len(self.rowid), bool)
        stale = np.concatenate([gone, d.rowid])
        if len(stale) and self.nb:
            self.live[:self.nb] = ~np.isin(b.rowid, stale)
        self.n_live = int(self.live.sum())
        self.segments = [(b.ptr, b.doc, b.tf, 0), (d.ptr, d.doc, d.tf, self.nb)]
        # Session postings of base and delta add up (a session may span both); rows deleted
        # since the base still count in their session's term counts until the next merge.
        self.s_segments = [(b.s_ptr, b.s_doc, b.s_tf), (d.s_ptr, d.s_doc, d.s_tf)]
        self.name_segments = [(b.name_ptr, b.name_doc, 0), (d.name_ptr, d.name_doc, self.nb)]
        # The base's average length holds until the next merge (the delta is at most a few
        # percent of it), so the base's BM25 tf parts are computed once per base, not per view.
        lengths = b.length if b.n else d.length
        self.avg_length = float(lengths.mean()) if len(lengths) else 1.0
        has = (self.session >= 0) & self.live
        self.s_length = np.bincount(self.session[has], weights=self.length[has],
                                    minlength=n_sessions).astype(np.float32)
        self.n_sess_live = int((self.s_length > 0).sum()) or 1
        self.s_avg = float(self.s_length.sum() / self.n_sess_live) or 1.0
        seq = [KINDS.index(k) for k in SEQUENCE_KINDS]
        self.neighbours = _neighbours(np.where(self.live, self.session, -1), self.kind, self.time,
                                      self.rowid, seq)
        self.vectors = np.asarray(b.vectors) if b.vectors is not None else None  # no memmap
        # subclass overhead on every slice; the pages stay mapped from the file
        self.d_vectors = d.vectors
        self.partition = base.partition
        in_session = np.flatnonzero((self.session >= 0) & self.live)
        self.sess_order = in_session[np.argsort(self.session[in_session], kind="stable")]
        self.sess_ptr = np.searchsorted(self.session[self.sess_order],
                                        np.arange(n_sessions + 1)).astype(np.int64)
        self._masks: dict[Any, tuple[np.ndarray, np.ndarray]] = {}
        self._cached_scopes = 0
        self._parts: dict[Any, np.ndarray] = {}
        self._sample = None
        return self

    @property
    def n(self) -> int:
        return len(self.rowid)

    # ---- scope ---------------------------------------------------------------------------
    def mask(self, projects: tuple[int, ...] | None, spec: str | None,
             kinds: tuple[str, ...] | None) -> tuple[np.ndarray, np.ndarray]:
        """(bool mask, positions, cache) of the rows a query may return (cached per scope)."""
        key = (projects, spec, kinds)
        got = self._masks.get(key)
        if got is None:
            m = self.live.copy()
            if projects is not None:
                m &= np.isin(self.project, np.array(projects, np.int32))
            if spec is not None:
                m &= self.spec == self.specs.get(spec, -2)
            if kinds is not None:
                m &= np.isin(self.kind, np.array([KINDS.index(k) for k in kinds], np.int8))
            if len(self._masks) > 64:
                self._masks.clear()
                self._cached_scopes = 0
            got = self._masks[key] = (m, np.flatnonzero(m), {})
        return got

    def scope_sims(self, scope, q: np.ndarray) -> np.ndarray:
        """Cosines for a small scope: its vectors are gathered once, then read contiguously."""
        _, idx, cache = scope
        mat = cache.get("vectors")
        if mat is None:
            mat = self.rows_vectors(idx)
            if self._cached_scopes < 8:  # at most 8 x 4000 x 384 floats (49 MB)
                cache["vectors"] = mat
                self._cached_scopes += 1
        return mat @ q

    # ---- words ---------------------------------------------------------------------------
    def postings(self, t: int, p: Params) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(positions, term frequencies, BM25 tf parts) of the live rows holding term ``t``."""
        ds, fs, ws = [], [], []
        for i, (ptr, doc, tf, off) in enumerate(self.segments):
            if t + 1 < len(ptr) and ptr[t + 1] > ptr[t]:
                lo, hi = ptr[t], ptr[t + 1]
                ds.append(doc[lo:hi] + off if off else doc[lo:hi])
                fs.append(tf[lo:hi])
                ws.append(self._tf_parts(i, p)[lo:hi])
        if not ds:
            return np.zeros(0, np.int64), np.zeros(0, np.float32), np.zeros(0, np.float32)
        d, f, w = ((ds[0], fs[0], ws[0]) if len(ds) == 1
                   else (np.concatenate(ds), np.concatenate(fs), np.concatenate(ws)))
        if self.n_live == self.n:
            return d, f, w
        keep = self.live[d]
        return d[keep], f[keep], w[keep]

    def _tf_parts(self, seg: int, p: Params) -> np.ndarray:
        """``tf (k1 + 1) / (tf + k1 (1 - b + b len / avg))`` for every posting of a segment,
        computed once per view: a query then only scales slices of it by each term's idf."""
        key = ("tf_parts", p.k1, p.b)
        store = self.base.cache if seg == 0 else self._parts
        got = store.get(key)
        if got is None:
            ptr, doc, tf, off = self.segments[seg]
            norm = p.k1 * (1.0 - p.b + p.b * self.length[doc + off] / self.avg_length)
            got = store[key] = (tf * (p.k1 + 1.0) / (tf + norm)).astype(np.float32)
        return got

    def lexical(self, term_ids: list[int], p: Params) -> tuple[np.ndarray, np.ndarray, float]:
        """BM25 of rows, plus their session's BM25, smoothed over neighbours, name-boosted.

        Returns the scores (dense), the positions holding a non-zero score, and the score a row
        of average length holding every query term once would get. Work after the postings is
        done on those positions only, so a query costs little more at 100k rows than at 1k.
        """
        scores = np.zeros(self.n, np.float32)
        s_scores = np.zeros(self.n_sessions, np.float32)
        full = 0.0
        found = []
        for t in set(term_ids):
            d, f, part = self.postings(t, p)
            if not len(d):
                continue
            idf = math.log(1.0 + (self.n_live - len(d) + 0.5) / (len(d) + 0.5))
            full += idf
            scores[d] += idf * part
            found.append(d)
            if p.session_weight and self.n_sessions:
                self._session_bm25(t, s_scores, p)
        if not full:
            return scores, np.zeros(0, np.int64), 0.0
        # Positions may repeat from here on (a row holding two query terms): a fancy ``+=``
        # with repeated positions and equal values acts once, and ``rank`` drops repeats.
        hit = np.concatenate(found)
        if len(hit) > LEX_CAND:  # common words: carry on with the best rows only
            hit = hit[np.argpartition(-scores[hit], LEX_CAND - 1)[:LEX_CAND]]
        vals = scores[hit]
        found = [hit]
        for w, pair in zip(p.neighbour_weights, self.neighbours):
            for near in pair:  # a row has one row before and one after it: targets are unique
                tgt = near[hit]
                ok = tgt >= 0
                scores[tgt[ok]] += w * vals[ok]
                found.append(tgt[ok])
        top = float(s_scores.max()) if len(s_scores) else 0.0
        if top > 0:
            sess = np.flatnonzero(s_scores)
            if len(sess) > SESSION_CAND:
                sess = sess[np.argpartition(-s_scores[sess], SESSION_CAND - 1)[:SESSION_CAND]]
            rows = self.session_rows(sess)
            coef = p.session_weight * float(scores[np.concatenate(found)].max()) / top
            scores[rows] += coef * s_scores[self.session[rows]]
            found.append(rows)
        hit = np.concatenate(found)
        if p.name_boost != 1.0:
            named = [doc[ptr[t]:ptr[t + 1]] + off for t in set(term_ids)
                     for ptr, doc, off in self.name_segments if t + 1 < len(ptr)]
            named = [x for x in named if len(x)]
            if named:
                boost = np.zeros(self.n, bool)
                boost[np.concatenate(named)] = True
                scores[hit[boost[hit]]] *= p.name_boost
        return scores, hit, full

    def _session_bm25(self, t: int, s_scores: np.ndarray, p: Params) -> None:
        """Add term ``t``'s BM25 over sessions (a session's text: all its rows) to ``s_scores``."""
        ss, fs = [], []
        for ptr, doc, tf in self.s_segments:
            if t + 1 < len(ptr) and ptr[t + 1] > ptr[t]:
                ss.append(doc[ptr[t]:ptr[t + 1]])
                fs.append(tf[ptr[t]:ptr[t + 1]])
        if not ss:
            return
        if len(ss) == 1:
            sess, stf = ss[0], fs[0]
        else:  # a session in both segments: add its counts
            tmp = np.zeros(self.n_sessions, np.float32)
            for x, f in zip(ss, fs):
                tmp[x] += f
            sess = np.unique(np.concatenate(ss))
            stf = tmp[sess]
        sidf = math.log(1.0 + (self.n_sess_live - len(sess) + 0.5) / (len(sess) + 0.5))
        snorm = p.k1 * (1.0 - p.b + p.b * self.s_length[sess] / self.s_avg)
        s_scores[sess] += sidf * stf * (p.k1 + 1.0) / (stf + snorm)

    def session_rows(self, sessions: np.ndarray) -> np.ndarray:
        """Positions of the live rows of the given sessions (one vectorised CSR gather)."""
        starts = self.sess_ptr[sessions]
        lens = self.sess_ptr[sessions + 1] - starts
        total = int(lens.sum())
        if not total:
            return np.zeros(0, np.int64)
        offs = np.repeat(starts - np.cumsum(lens) + lens, lens) + np.arange(total)
        return self.sess_order[offs]

    # ---- vectors -------------------------------------------------------------------------
    def rows_vectors(self, pos: np.ndarray) -> np.ndarray:
        """The vectors of the rows at ``pos`` (base and delta), as one matrix."""
        inb = pos < self.nb
        if inb.all():
            return np.asarray(self.vectors[pos])
        out = np.empty((len(pos), self.vectors.shape[1]), np.float32)
        out[inb] = self.vectors[pos[inb]]
        out[~inb] = self.d_vectors[pos[~inb] - self.nb]
        return out

    def sims(self, pos: np.ndarray, q: np.ndarray) -> np.ndarray:
        """Cosine of ``q`` with the rows at ``pos``."""
        if len(pos) > self.nb // 2 and (pos < self.nb).all():
            return (self.vectors @ q)[pos]  # most rows: one pass beats a gather
        return self.rows_vectors(pos) @ q

    def probed(self, q: np.ndarray, mask: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(positions, cosines) of in-scope rows in the lists nearest ``q``, plus the delta."""
        pos, sims = [], []
        for lo, hi in self.partition.probe(q):
            pos.append(np.arange(lo, hi))
            sims.append(self.vectors[lo:hi] @ q)
        if self.n > self.nb:
            pos.append(np.arange(self.nb, self.n))
            sims.append(self.d_vectors @ q)
        p, s = np.concatenate(pos), np.concatenate(sims)
        keep = mask[p]
        return p[keep], s[keep]

    # ---- fusion --------------------------------------------------------------------------
    def rank(self, words, qvec: np.ndarray | None, scope, limit: int,
             p: Params) -> list[tuple[int, float]]:
        """Top ``limit`` (position, score) pairs within ``scope`` (a ``mask`` result); ``words``
        is the query's term ids or, already computed, their ``lexical`` result."""
        mask, idx, _ = scope
        if not len(idx):
            return []
        lex, hit, full = words if isinstance(words, tuple) else self.lexical(words, p)
        lex_in = hit[mask[hit]]  # in-scope rows sharing a word with the query
        # Scale words by the best match in scope, but never by less than a share of what a full
        # match of every query term would score: one rare shared word must not outrank meaning.
        lex_top = max(float(lex[lex_in].max()) if len(lex_in) else 0.0, p.lex_floor * full)
        scale = 1.0 / lex_top if lex_top > 0 else 0.0
        if self.vectors is None or qvec is None or not p.dense_weight:
            cand = lex_in  # words alone: an item sharing none is no answer
            final = lex[cand] * scale
        elif self.partition is None or len(idx) <= EXACT_LIMIT:
            cand = idx
            sims = self.scope_sims(scope, qvec) if len(idx) <= EXACT_LIMIT else self.sims(idx, qvec)
            lo = float(np.median(sims))
            final = self._fuse(lex[cand] * scale, sims, lo, float(sims.max()), p)
        else:
            pos, sims = self.probed(qvec, mask)
            if len(lex_in) > LEX_POOL:
                lex_in = lex_in[np.argpartition(-lex[lex_in], LEX_POOL - 1)[:LEX_POOL]]
            extra = np.setdiff1d(lex_in, pos, assume_unique=True)
            cand = np.concatenate([pos, extra])
            sims = np.concatenate([sims, self.sims(extra, qvec)])
            lo = self._median_sim(qvec, mask, idx)
            final = self._fuse(lex[cand] * scale, sims, lo, float(sims.max()), p)
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

    def _median_sim(self, q: np.ndarray, mask: np.ndarray, idx: np.ndarray) -> float:
        """The scope's median cosine, estimated on a fixed sample of base rows."""
        if self._sample is None:
            pos = np.arange(0, self.nb, max(1, self.nb // MEDIAN_SAMPLE))
            self._sample = (pos, np.ascontiguousarray(self.vectors[pos]))
        pos, mat = self._sample
        inside = mask[pos]
        if inside.sum() >= 64:
            return float(np.median((mat @ q)[inside]))
        return float(np.median(self.sims(idx[::max(1, len(idx) // MEDIAN_SAMPLE)], q)))

    @staticmethod
    def _fuse(lex: np.ndarray, sims: np.ndarray, lo: float, hi: float, p: Params) -> np.ndarray:
        if hi <= lo:
            return lex
        return (1 - p.dense_weight) * lex + p.dense_weight * (sims - lo) / (hi - lo)


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
