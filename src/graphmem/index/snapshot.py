"""The in-memory ranking view of the local index: a persisted base plus the rows changed since.

The base is every row at some generation, as numpy arrays (columns, term postings, naming
postings, unit vectors and a coarse vector partition), saved under ``<home>/search-cache`` so a
new process maps it in milliseconds instead of re-reading every SQLite row. The view adds the
rows written after the base (``gen`` greater than the base's) and hides base rows that were
deleted or rewritten since. When that delta grows past a share of the base, the base is rebuilt
from SQLite and saved again (in the search that notices, not in the write).
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import sqlite3
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..files.safe import private_dir
from ..models import KINDS
from .ivf import Partition

log = logging.getLogger("graphmem.index")
CACHE_DIR = "search-cache"
COLUMNS = ("rowid", "project", "kind", "spec", "session", "time", "length")
ARRAYS = COLUMNS + ("ptr", "doc", "tf", "name_ptr", "name_doc", "s_ptr", "s_doc", "s_tf")


@dataclass
class Rows:
    """Rows of the index as arrays (a base, or a delta) with postings local to them."""

    rowid: np.ndarray
    project: np.ndarray
    kind: np.ndarray
    spec: np.ndarray
    session: np.ndarray
    time: np.ndarray
    length: np.ndarray
    ptr: np.ndarray  # term id -> postings range in doc/tf
    doc: np.ndarray
    tf: np.ndarray
    name_ptr: np.ndarray  # naming term id -> range in name_doc
    name_doc: np.ndarray
    s_ptr: np.ndarray  # term id -> range in s_doc/s_tf: sessions as documents
    s_doc: np.ndarray
    s_tf: np.ndarray
    vectors: np.ndarray | None

    @property
    def n(self) -> int:
        return len(self.rowid)


@dataclass
class Base:
    """A persisted base: rows plus the codes of specs and sessions and the vector partition."""

    gen: int
    rows: Rows
    specs: list[str]
    sessions: list[tuple]
    partition: Partition | None
    embedder: str | None
    cache: dict = field(default_factory=dict)  # derived once per base (not saved): see users

    def codes(self) -> tuple[dict, dict]:
        """Fresh copies of the spec and session code maps (a delta adds to them)."""
        if "codes" not in self.cache:
            self.cache["codes"] = ({s: i for i, s in enumerate(self.specs)},
                                   {tuple(s): i for i, s in enumerate(self.sessions)})
        specs, sessions = self.cache["codes"]
        return dict(specs), dict(sessions)


def _csr(docs: np.ndarray, terms: np.ndarray, weights: bool = True):
    """Postings grouped by term: (ptr, doc, tf) with one entry per (term, doc)."""
    n_terms = (int(terms.max()) + 1) if len(terms) else 0
    if len(docs) == 0:
        return np.zeros(n_terms + 1, np.int64), np.zeros(0, np.int32), np.zeros(0, np.float32)
    n_docs = int(docs.max()) + 1
    uniq, tf = np.unique(terms.astype(np.int64) * n_docs + docs, return_counts=True)
    ptr = np.searchsorted(uniq // n_docs, np.arange(n_terms + 1)).astype(np.int64)
    return ptr, (uniq % n_docs).astype(np.int32), tf.astype(np.float32)


def as_arrays(rows: list[tuple], specs: dict, sessions: dict, dim: int | None) -> Rows:
    """``IndexStore.ranking_rows`` as arrays; new specs and sessions get codes in the dicts."""
    n = len(rows)
    kind_code = {k: i for i, k in enumerate(KINDS)}
    col = list(zip(*rows)) if rows else [()] * 10
    rowid = np.array(col[0], np.int64)
    kind = np.array([kind_code[k] for k in col[1]], np.int8)
    project = np.array(col[2], np.int32)
    spec = np.array([specs.setdefault(s, len(specs)) if s else -1 for s in col[3]], np.int32)
    session = np.array([sessions.setdefault((p, s, x), len(sessions)) if x is not None else -1
                        for p, s, x in zip(col[2], col[3], col[4])], np.int32)
    times = np.array([t if t is not None else 0.0 for t in col[5]], np.float64)
    length = np.array(col[8], np.float32)
    terms = np.frombuffer(b"".join(col[6]), np.int32)
    lens = np.array([len(b) // 4 for b in col[6]], np.int64)
    docs = np.repeat(np.arange(n, dtype=np.int32), lens)
    ptr, doc, tf = _csr(docs, terms)
    in_session = session[docs] >= 0
    s_ptr, s_doc, s_tf = _csr(session[docs][in_session], terms[in_session])
    fields = np.frombuffer(b"".join(col[7]), np.int32)
    flens = np.array([len(b) // 4 for b in col[7]], np.int64)
    name_ptr, name_doc, _ = _csr(np.repeat(np.arange(n, dtype=np.int32), flens), fields)
    vectors = None
    if dim:
        vectors = np.zeros((n, dim), np.float32)
        blobs = col[9]
        have = np.array([b is not None and len(b) == 4 * dim for b in blobs], bool)
        if have.any():
            vectors[have] = np.frombuffer(b"".join(b for b, h in zip(blobs, have) if h),
                                          np.float32).reshape(-1, dim)
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        vectors /= np.where(norms == 0, 1, norms)
    return Rows(rowid, project, kind, spec, session, times, length, ptr, doc, tf, name_ptr,
                name_doc, s_ptr, s_doc, s_tf, vectors)


def build_base(index: Any) -> Base:
    """Read every row (in one read transaction) into a new base and save it."""
    emb, tuning = index.embedder, index.tuning
    dim = emb.dimension if emb is not None else None
    specs: dict = {}
    sessions: dict = {}
    with index.read_snapshot():
        gen = index.generation()
        # Ordered by project, so one project's rows sit together (its vectors are one slice).
        raw = index.ranking_rows(by_project=True)
    rows = as_arrays(raw, specs, sessions, dim)
    partition = None
    if rows.vectors is not None and Partition.worth_it(rows.n, tuning):
        partition, order = Partition.build(rows.vectors, tuning)
        rows = _permute(rows, order)  # each list becomes one slice of the vector matrix
    base = Base(gen, rows, list(specs), list(sessions), partition,
                f"{emb.name}:{emb.dimension}" if emb is not None else None)
    try:
        save(index.home, base, index.meta("instance"))
        index.prune_deleted(gen)
    except (OSError, sqlite3.Error) as exc:  # a read-only home still searches; it rebuilds
        log.warning("search cache not saved: %s", exc)
    return base


def _permute(rows: Rows, order: np.ndarray) -> Rows:
    """The same rows in ``order`` (postings keep their grouping by term, docs renumbered)."""
    assert rows.vectors is not None  # only rows with vectors get a partition to follow
    inv = np.empty(len(order), np.int32)
    inv[order] = np.arange(len(order), dtype=np.int32)
    cols = {c: getattr(rows, c)[order] for c in COLUMNS}
    return Rows(**cols, ptr=rows.ptr, doc=inv[rows.doc], tf=rows.tf, name_ptr=rows.name_ptr,
                name_doc=inv[rows.name_doc], s_ptr=rows.s_ptr, s_doc=rows.s_doc, s_tf=rows.s_tf,
                vectors=np.ascontiguousarray(rows.vectors[order]))


def save(home: Path, base: Base, instance: str | None) -> None:
    """Write the base to a fresh folder, then point ``CURRENT`` at it (atomic for readers)."""
    root = private_dir(Path(home) / CACHE_DIR)  # derived from private memory: 0700, like the home
    name = f"base-{base.gen}-{os.getpid()}-{id(base):x}"
    tmp = root / f".{name}.tmp"
    tmp.mkdir(parents=True, exist_ok=True)
    for key in ARRAYS:
        np.save(tmp / f"{key}.npy", getattr(base.rows, key))
    if base.rows.vectors is not None:
        np.save(tmp / "vectors.npy", base.rows.vectors)
    if base.partition is not None:
        base.partition.save(tmp)
    (tmp / "meta.json").write_text(json.dumps({
        "gen": base.gen, "instance": instance, "embedder": base.embedder, "specs": base.specs,
        "sessions": base.sessions}))
    os.replace(tmp, root / name)
    pointer = root / f".CURRENT.{os.getpid()}.tmp"
    pointer.write_text(name)
    os.replace(pointer, root / "CURRENT")
    for old in root.iterdir():  # earlier bases; a process still mapping one keeps its inode
        if old.name not in (name, "CURRENT") and not old.name.startswith("."):
            shutil.rmtree(old, ignore_errors=True)


def load(index: Any) -> Base | None:
    """The saved base if it belongs to this database, embedder and is not void; else None."""
    root = index.home / CACHE_DIR
    try:
        folder = root / (root / "CURRENT").read_text().strip()
        meta = json.loads((folder / "meta.json").read_text())
        emb = index.embedder
        want = f"{emb.name}:{emb.dimension}" if emb is not None else None
        if (meta["instance"] != index.meta("instance") or meta["embedder"] != want
                or meta["gen"] < int(index.meta("floor") or 0)
                or meta["gen"] > index.generation()):
            return None
        arrays = {k: np.load(folder / f"{k}.npy") for k in ARRAYS}
        vectors = np.load(folder / "vectors.npy", mmap_mode="r") if want else None
        partition = Partition.load(folder)
    except (OSError, ValueError, KeyError) as exc:
        if not isinstance(exc, FileNotFoundError):
            log.warning("search cache unreadable (%s); rebuilding it", exc)
        return None
    return Base(meta["gen"], Rows(vectors=vectors, **arrays), meta["specs"],
                [tuple(s) for s in meta["sessions"]], partition, meta["embedder"])


def refresh(index: Any, view: Any):
    """The view for the index's current generation, reusing ``view``'s base when still valid."""
    from .view import View

    base = view.base if view is not None else None
    dim = index.embedder.dimension if index.embedder is not None else None
    tuning = index.tuning
    for attempt in range(2):
        if base is None or base.gen < int(index.meta("floor") or 0):
            base = load(index) or build_base(index)
        specs, sessions = base.codes()
        with index.read_snapshot():  # the delta, the deletes and the generation at one state
            gen = index.generation()
            n_delta = index.count_since(base.gen)
            big = n_delta > max(tuning.min_delta, tuning.delta_share * base.rows.n)
            if not big or attempt:
                raw = index.ranking_rows(since=base.gen)
                gone = np.array(index.deleted_since(base.gen), np.int64)
        if big and not attempt:
            base = build_base(index)  # merge: the next pass reads an (almost) empty delta
            continue
        delta = as_arrays(raw, specs, sessions, dim)
        return View.of(base, delta, gone, gen, specs, len(sessions))
    raise AssertionError("unreachable")
