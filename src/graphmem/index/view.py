"""The ranking view of the local index: a persisted base plus its delta as one set of arrays.

Positions run over the base's rows first, then the delta's. The view answers array questions
(postings of a term, the rows of a scope, of a session, their vectors); the ranking stages that
use it are functions in ``ranker.py`` and ``late.py``. A view is immutable once made, so what it
derives (scope masks, BM25 tf parts, a vector sample, rowid positions) is cached on it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Sequence

import numpy as np

from ..models import KINDS
from .tuning import Tuning

if TYPE_CHECKING:
    from .ivf import Partition

SEQUENCE_KINDS = ("turn", "step")  # kinds whose neighbours in a session give them context


class View:
    """A base plus its delta as one set of rows (positions: base first, then delta)."""

    base: Any  # a snapshot.Base (snapshot imports this module, not the other way)
    gen: int
    specs: dict[str, int]
    n_sessions: int
    nb: int
    # the columns of ``snapshot.COLUMNS``, base rows then delta rows
    rowid: np.ndarray
    project: np.ndarray
    kind: np.ndarray
    spec: np.ndarray
    session: np.ndarray
    time: np.ndarray
    length: np.ndarray
    live: np.ndarray
    n_live: int
    segments: list[tuple[np.ndarray, np.ndarray, np.ndarray, int]]
    s_segments: list[tuple[np.ndarray, np.ndarray, np.ndarray]]
    name_segments: list[tuple[np.ndarray, np.ndarray, int]]
    avg_length: float
    s_length: np.ndarray
    n_sess_live: int
    s_avg: float
    neighbours: list[tuple[np.ndarray, np.ndarray]]
    vectors: np.ndarray | None
    d_vectors: np.ndarray | None
    partition: Partition | None
    sess_order: np.ndarray
    sess_ptr: np.ndarray
    _masks: dict[Any, tuple[np.ndarray, np.ndarray, dict[str, np.ndarray]]]
    _cached_scopes: int
    _parts: dict[Any, np.ndarray]
    _sample: tuple[np.ndarray, np.ndarray] | None
    _positions: dict[int, int] | None

    @classmethod
    def of(cls, base: Any, delta: Any, gone: np.ndarray, gen: int, specs: dict[str, int], n_sessions: int) -> "View":
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
        self._masks = {}
        self._cached_scopes = 0
        self._parts = {}
        self._sample = None
        self._positions = None
        return self

    @property
    def n(self) -> int:
        return len(self.rowid)

    # ---- scope ---------------------------------------------------------------------------
    def mask(self, projects: tuple[int, ...] | None, spec: str | None,
             kinds: tuple[str, ...] | None) -> tuple[np.ndarray, np.ndarray, dict[str, np.ndarray]]:
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
    def postings(self, t: int, p: Tuning) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
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

    def postings_of(self, terms: Sequence[int] | np.ndarray,
                    p: Tuning) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``postings`` of every term in ``terms`` read at once: (positions, BM25 tf parts, how
        many of them each term holds), term after term in the given order, each term's as
        ``postings`` gives them (base rows, then delta rows)."""
        terms = np.asarray(terms, np.int64)
        pos, parts, lens = [], [], []
        for i, (ptr, doc, _tf, off) in enumerate(self.segments):
            lo, n = _term_ranges(ptr, terms)
            slots = _ranges(lo, n)
            pos.append(doc[slots] + off if off else doc[slots])
            parts.append(self._tf_parts(i, p)[slots])
            lens.append(n)
        if len(pos[1]):  # delta postings: put each term's after its base ones
            n = np.stack(lens, axis=1).ravel()  # (term, segment), term-major
            start = np.stack([np.cumsum(lens[0]) - lens[0],
                              len(pos[0]) + np.cumsum(lens[1]) - lens[1]], axis=1).ravel()
            order = _ranges(start, n)
            d, w = np.concatenate(pos)[order], np.concatenate(parts)[order]
        else:
            d, w = pos[0], parts[0]
        counts = lens[0] + lens[1]
        if self.n_live != self.n:
            keep = self.live[d]
            d, w = d[keep], w[keep]
            counts = np.bincount(np.repeat(np.arange(len(terms)), counts)[keep],
                                 minlength=len(terms))
        return d, w, counts

    def session_postings_of(self, terms: Sequence[int] | np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(index in ``terms``, session, term count) of every session holding one of ``terms``
        (a session's text: all its rows), by term then session; a session in both base and
        delta has its counts added."""
        terms = np.asarray(terms, np.int64)
        keys, counts = [], []
        for ptr, doc, tf in self.s_segments:
            lo, n = _term_ranges(ptr, terms)
            slots = _ranges(lo, n)
            keys.append(np.repeat(np.arange(len(terms), dtype=np.int64), n) * self.n_sessions
                        + doc[slots])
            counts.append(tf[slots])
        if len(keys[0]) and len(keys[1]):
            key, inverse = np.unique(np.concatenate(keys), return_inverse=True)
            count = np.zeros(len(key), np.float32)
            np.add.at(count, inverse, np.concatenate(counts))
        else:
            key, count = (keys[0], counts[0]) if len(keys[0]) else (keys[1], counts[1])
        return key // max(self.n_sessions, 1), key % max(self.n_sessions, 1), count

    def _tf_parts(self, seg: int, p: Tuning) -> np.ndarray:
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
        assert self.vectors is not None  # callers check view.vectors
        inb = pos < self.nb
        if inb.all():
            return np.asarray(self.vectors[pos])
        assert self.d_vectors is not None  # the delta is embedded as the base is
        out = np.empty((len(pos), self.vectors.shape[1]), np.float32)
        out[inb] = self.vectors[pos[inb]]
        out[~inb] = self.d_vectors[pos[~inb] - self.nb]
        return out

    def sims(self, pos: np.ndarray, q: np.ndarray) -> np.ndarray:
        """Cosine of ``q`` with the rows at ``pos``."""
        assert self.vectors is not None  # callers check view.vectors
        if len(pos) > self.nb // 2 and (pos < self.nb).all():
            return (self.vectors @ q)[pos]  # most rows: one pass beats a gather
        return self.rows_vectors(pos) @ q

    def probed(self, q: np.ndarray, mask: np.ndarray,
               tuning: Tuning) -> tuple[np.ndarray, np.ndarray]:
        """(positions, cosines) of in-scope rows in the lists nearest ``q``, plus the delta."""
        assert self.partition is not None and self.vectors is not None  # ranker checks both
        pos, sims = [], []
        for lo, hi in self.partition.probe(q, tuning):
            pos.append(np.arange(lo, hi))
            sims.append(self.vectors[lo:hi] @ q)
        if self.n > self.nb:
            pos.append(np.arange(self.nb, self.n))
            sims.append(self.d_vectors @ q)
        p, s = np.concatenate(pos), np.concatenate(sims)
        keep = mask[p]
        return p[keep], s[keep]

    def sample(self, size: int) -> tuple[np.ndarray, np.ndarray]:
        """(positions, vectors) of a fixed sample of about ``size`` base rows (made once)."""
        if self._sample is None:
            assert self.vectors is not None  # callers check view.vectors
            pos = np.arange(0, self.nb, max(1, self.nb // size))
            self._sample = (pos, np.ascontiguousarray(self.vectors[pos]))
        return self._sample

    def positions(self) -> dict[int, int]:
        """rowid -> position (built once per view: views are immutable)."""
        if self._positions is None:
            self._positions = {int(r): i for i, r in enumerate(self.rowid)}
        return self._positions


def _term_ranges(ptr: np.ndarray, terms: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(start, length) of each term's postings in a segment whose term offsets are ``ptr`` (a
    term the segment has never seen: none)."""
    known = terms + 1 < len(ptr)
    t = np.where(known, terms, 0)
    lo = ptr[t] if len(ptr) else np.zeros(len(terms), np.int64)
    n = np.where(known, ptr[t + 1] - lo, 0) if len(ptr) > 1 else np.zeros(len(terms), np.int64)
    return lo, n


def _ranges(start: np.ndarray, length: np.ndarray) -> np.ndarray:
    """The positions ``start[i] .. start[i] + length[i] - 1`` of every i, one range after another."""
    total = int(length.sum())
    if not total:
        return np.zeros(0, np.int64)
    return np.repeat(start - np.cumsum(length) + length, length) + np.arange(total)


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
