"""``LocalIndex``: the derived search index of every project one ``GRAPHMEM_HOME`` has seen.

Rows live in the home's SQLite database (``index/db.py``): a project registry, one row per
``MemoryItem`` (keyed by its id, with its stemmed terms), and one vector per distinct content
hash, so unchanged text is never embedded twice. Ranking happens on an in-memory snapshot
(``snapshot.View``): a base persisted as numpy files plus the rows changed since it (every row
carries the generation that last wrote it and every delete is logged), so a write never forces a
full rebuild and a new process loads the base instead of re-reading every row.
"""

from __future__ import annotations

import hashlib
import json
import logging
import sqlite3
import threading
import time
from array import array
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

from ..errors import CorruptIndexError, IndexMismatchError, ProviderError, StorageError
from ..models import MemoryItem
from ..redact import redact_items
from . import db, late
from .text import date_terms, tokenize

log = logging.getLogger("graphmem.index")
EMBED_BATCH = 64
PER_TEXT = ("search_vectors", "search_tokens")  # rows keyed by content hash, shared by items

db.register_migrations("search", [(1, """
CREATE TABLE projects (
  id INTEGER PRIMARY KEY, path TEXT NOT NULL UNIQUE, name TEXT NOT NULL,
  group_id TEXT NOT NULL, last_seen REAL NOT NULL);
CREATE TABLE search_items (
  rowid INTEGER PRIMARY KEY, id TEXT NOT NULL UNIQUE, kind TEXT NOT NULL, text TEXT NOT NULL,
  project_id INTEGER NOT NULL REFERENCES projects(id), spec TEXT, session TEXT,
  time REAL, metadata TEXT NOT NULL, source TEXT NOT NULL, hash TEXT NOT NULL,
  terms BLOB NOT NULL, fields BLOB NOT NULL, length INTEGER NOT NULL);
CREATE INDEX search_items_scope ON search_items(project_id, spec);
CREATE INDEX search_items_hash ON search_items(hash);
CREATE TABLE search_terms (id INTEGER PRIMARY KEY, term TEXT NOT NULL UNIQUE);
CREATE TABLE search_vectors (hash TEXT PRIMARY KEY, vec BLOB NOT NULL);
CREATE TABLE search_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
INSERT INTO search_meta VALUES ('generation', '0');
"""), (2, """
ALTER TABLE search_items ADD COLUMN gen INTEGER NOT NULL DEFAULT 0;
CREATE INDEX search_items_gen ON search_items(gen);
CREATE TABLE search_deleted (rowid INTEGER NOT NULL, gen INTEGER NOT NULL);
CREATE INDEX search_deleted_gen ON search_deleted(gen);
INSERT INTO search_meta VALUES ('floor', '0');
INSERT INTO search_meta SELECT 'instance', lower(hex(randomblob(8)));
"""), (3, """
ALTER TABLE projects ADD COLUMN root TEXT;
ALTER TABLE projects ADD COLUMN legacy INTEGER NOT NULL DEFAULT 0;
UPDATE projects SET root = path, legacy = 1;
""")])
# Version 3: ``projects.path`` holds the project KEY (``identity``), ``root`` where the project is
# checked out on this machine. Rows written before (keyed by absolute path, with absolute spec
# paths in their items' ids) are marked ``legacy`` until ``migrate_legacy`` rebuilds them.


# Bumped when the items derived from the files get other ids, so that a database marked under an
# older version catches each project up once more (dropping the rows under the old ids). 2: a
# session insight is one item per learning per spec (retry loops collapsed), not one per session.
ITEM_IDS_VERSION = 2


def _caught_up_key(project: str) -> str:
    return f"caught_up:{ITEM_IDS_VERSION}:{group_id(project)}"


def group_id(project_path: str) -> str:
    """The stable graph group id of a project folder (also stored in the registry)."""
    return "gm_" + hashlib.sha1(project_path.encode("utf-8")).hexdigest()[:16]


# Metadata fields that name who or what an item is about; a query naming them boosts the item.
NAME_FIELDS = ("speaker", "path", "title")


def name_text(item: MemoryItem) -> str:
    """An item's own naming fields (who said it, which file, its title)."""
    return " ".join(str(item.metadata[k]) for k in NAME_FIELDS
                    if isinstance(item.metadata.get(k), str))


def name_terms(item: MemoryItem) -> list[str]:
    """Terms that name the item: a speaker's or title's words, a path whole or its file name."""
    out: list[str] = []
    for k in NAME_FIELDS:
        value = item.metadata.get(k)
        if isinstance(value, str):
            toks = tokenize(value)
            out += [t for t in toks if "/" in t or "." in t] if k == "path" else toks
    return out


def item_terms(item: MemoryItem) -> list[str]:
    """Terms of the text, of the naming fields not already in it, and of the item's date."""
    terms = tokenize(item.text)
    have = set(terms)
    terms += [t for t in tokenize(name_text(item)) if t not in have]
    return terms + date_terms(item.time)


class LocalIndex:
    """The local index of one home: upsert, delete, registry, and hybrid search."""

    redact = True  # settings.redact (``open_index``): no recognised secret is stored

    def __init__(self, home: Path, embedder: Any = None, late_encoder: Any = None,
                 late_always: bool = True, busy_timeout: float = 30.0):
        self.home = Path(home)
        self.embedder = embedder
        self.late = late_encoder  # ColBERT token vectors for the second stage (``late.py``)
        self.late_always = late_always  # False: only searches that ask for it (rerank=True)
        self.conn = db.connect(self.home, busy_timeout=busy_timeout)
        self.ident = db.identity(self.home)  # the database file this connection opened
        self._lock = threading.RLock()
        self._term_ids: dict[str, int] = {}
        self._snapshot = None
        self.last_embed_error: str | None = None  # the last write's embedding failure, if any
        self.embedded_count = 0  # texts embedded by the last upsert

    # ---- meta and registry ------------------------------------------------------------------
    def _meta(self, key: str) -> str | None:
        row = self.conn.execute("SELECT value FROM search_meta WHERE key=?", (key,)).fetchone()
        return row[0] if row else None

    def generation(self) -> int:
        """Bumped on every change; the ranking snapshot is rebuilt when it moves."""
        return int(self._meta("generation") or 0)

    def _bump(self) -> int:
        """Move to the next generation (inside a write transaction); returns it."""
        gen = self.generation() + 1
        self.conn.execute("UPDATE search_meta SET value=? WHERE key='generation'", (str(gen),))
        return gen

    def check_embedder(self, *, claim: bool = False) -> None:
        """Refuse to mix vectors of two embedders; ``claim`` records ours on an empty index."""
        if self.embedder is None:
            return
        mine = f"{self.embedder.name}:{self.embedder.dimension}"
        stored = self._meta("embedder")
        if stored is None:
            if claim:
                self.conn.execute("INSERT OR REPLACE INTO search_meta VALUES ('embedder', ?)", (mine,))
            return
        if stored != mine:
            raise IndexMismatchError(
                f"the local index in {self.home} holds vectors from {stored}, but the configured "
                f"embedder is {mine}; run `graphmem reindex` to rebuild it with the new embedder")

    def register_project(self, path: str, name: str | None = None, root: str | None = None) -> int:
        """Add or touch a project (by key) in the registry, with its root here when known;
        returns its id."""
        now = time.time()
        self.conn.execute(
            "INSERT INTO projects(path, name, group_id, last_seen, root) VALUES (?, ?, ?, ?, ?) "
            "ON CONFLICT(path) DO UPDATE SET last_seen=excluded.last_seen, "
            "name=COALESCE(?, name), root=COALESCE(excluded.root, root)",
            (path, name or Path(path).name, group_id(path), now, root, name))
        return self.conn.execute("SELECT id FROM projects WHERE path=?", (path,)).fetchone()[0]

    def projects(self) -> list[dict[str, Any]]:
        """The registry: every project this home has indexed (``path`` is the project key)."""
        rows = self.conn.execute("SELECT id, path, name, group_id, last_seen, root, legacy "
                                 "FROM projects ORDER BY last_seen DESC").fetchall()
        return [dict(r) for r in rows]

    def forget_project(self, key: str, keep: bool = False) -> None:
        """Drop a project's items; its registry row too unless ``keep`` (then it is no longer
        legacy: the caller rebuilds it under the same key)."""
        self.delete(project=key)
        with self._lock:
            if keep:
                self.conn.execute("UPDATE projects SET legacy = 0 WHERE path=?", (key,))
            else:
                self.conn.execute("DELETE FROM projects WHERE path=? AND NOT EXISTS "
                                  "(SELECT 1 FROM search_items i WHERE i.project_id = projects.id)",
                                  (key,))

    def roots(self) -> dict[str, str]:
        """Project key -> where it is checked out on this machine (registered roots only)."""
        return {r[0]: r[1] for r in self.conn.execute(
            "SELECT path, root FROM projects WHERE root IS NOT NULL AND legacy = 0")}

    def caught_up(self, project: str) -> bool:
        """Whether this database has indexed the project's files whole (``mark_caught_up``)."""
        return self._meta(_caught_up_key(project)) is not None

    def mark_caught_up(self, project: str) -> None:
        """Record that every item of the project's files was indexed (a rebuilt database lacks
        the mark, so each project is indexed whole again on its first use)."""
        self.conn.execute("INSERT OR REPLACE INTO search_meta VALUES (?, ?)",
                          (_caught_up_key(project), str(time.time())))

    def project_id(self, path: str) -> int | None:
        row = self.conn.execute("SELECT id FROM projects WHERE path=?", (path,)).fetchone()
        return row[0] if row else None

    # ---- writes ------------------------------------------------------------------------------
    def _term_id_map(self, terms: Iterable[str]) -> dict[str, int]:
        missing = [t for t in set(terms) if t not in self._term_ids]
        if missing:
            self.conn.executemany("INSERT OR IGNORE INTO search_terms(term) VALUES (?)",
                                  [(t,) for t in missing])
            self._term_ids.update(db.select_in(
                self.conn, "SELECT term, id FROM search_terms WHERE term IN ({})", missing))
        return self._term_ids

    async def upsert(self, items: Sequence[MemoryItem],
                     also: Callable[[sqlite3.Connection], None] | None = None) -> int:
        """Insert or update items; embeds only texts whose hash has no vector yet.

        ``also(conn)`` runs inside the same transaction (the episodes rows of the same records).
        Items are redacted here (unless ``redact`` is off), whichever path brings them.
        """
        if not items and also is None:
            return 0
        if self.redact:
            items = redact_items(items)
        self.check_embedder()
        self.last_embed_error, self.embedded_count = None, 0
        vectors: dict[str, bytes] = {}
        hashes = {it.content_hash(): it.text for it in items}
        if late.shares_pass(self):  # the embedder is the late encoder's mean: one pass for both
            vectors, token_vecs = await late.encode_shared(
                self, hashes, self._existing_vectors(list(hashes)))
        else:
            if self.embedder is not None:
                have = self._existing_vectors(list(hashes))
                try:
                    vectors = await self._embed([(h, t) for h, t in hashes.items() if h not in have])
                except ProviderError as exc:
                    # The rows still go in (lexical search works); reindex fills vectors later.
                    log.warning("embedding failed, items indexed without vectors: %s", exc)
                    self.last_embed_error = str(exc)
            token_vecs = await late.encode_missing(self, list(hashes.items()))
        tokens = [item_terms(it) for it in items]
        names = [name_terms(it) for it in items]
        with self._lock:
            try:
                self.conn.execute("BEGIN IMMEDIATE")
                self.check_embedder(claim=True)
                gen = self._bump()
                ids = self._term_id_map([t for toks in tokens + names for t in toks])
                replaced = late.hashes_of(self.conn, [it.id for it in items])
                projects: dict[str, int] = {}
                rows = []
                for it, toks, nm in zip(items, tokens, names):
                    if it.project not in projects:
                        projects[it.project] = self.register_project(it.project)
                    blob = array("i", [ids[t] for t in toks]).tobytes()
                    rows.append((it.id, it.kind, it.text, projects[it.project], it.spec, it.session,
                                 it.time.timestamp() if it.time else None,
                                 json.dumps(it.metadata, default=str, ensure_ascii=False),
                                 it.source, it.content_hash(), blob,
                                 array("i", sorted({ids[t] for t in nm})).tobytes(), len(toks), gen))
                self.conn.executemany(
                    "INSERT INTO search_items(id, kind, text, project_id, spec, session, time, "
                    "metadata, source, hash, terms, fields, length, gen) "
                    "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?) "
                    "ON CONFLICT(id) DO UPDATE SET kind=excluded.kind, text=excluded.text, "
                    "project_id=excluded.project_id, spec=excluded.spec, session=excluded.session, "
                    "time=excluded.time, metadata=excluded.metadata, source=excluded.source, "
                    "hash=excluded.hash, terms=excluded.terms, fields=excluded.fields, "
                    "length=excluded.length, gen=excluded.gen", rows)
                self.conn.executemany("INSERT OR IGNORE INTO search_vectors VALUES (?, ?)",
                                      list(vectors.items()))
                late.store(self, token_vecs)
                late.prune(self.conn, replaced, PER_TEXT)  # a rewritten item's old text
                if also is not None:
                    also(self.conn)
                self.conn.execute("COMMIT")
            except BaseException as exc:
                self._rollback()
                self._term_ids.clear()  # ids assigned inside the rolled-back transaction are gone
                if db.is_corrupt(exc):
                    raise CorruptIndexError(f"cannot write the local index: {exc}") from None
                if isinstance(exc, sqlite3.Error):
                    raise StorageError(f"cannot write the local index: {exc}") from None
                raise
        return len(rows)

    async def _embed(self, todo: list[tuple[str, str]]) -> dict[str, bytes]:
        """Vectors (as float32 bytes) for (hash, text) pairs, in batches."""
        out: dict[str, bytes] = {}
        for i in range(0, len(todo), EMBED_BATCH):
            chunk = todo[i:i + EMBED_BATCH]
            vecs = await self.embedder.embed([t for _, t in chunk])
            if len(vecs) != len(chunk):
                raise IndexMismatchError(f"embedder {self.embedder.name} returned {len(vecs)} "
                                         f"vectors for {len(chunk)} texts")
            for (h, _), v in zip(chunk, vecs):
                if len(v) != self.embedder.dimension:
                    raise IndexMismatchError(
                        f"embedder {self.embedder.name} returned a {len(v)}-d vector, "
                        f"declared {self.embedder.dimension}")
                out[h] = array("f", v).tobytes()
        self.embedded_count += len(out)
        return out

    async def refill_vectors(self) -> int:
        """Embed every indexed text that has no vector (after a failure or an embedder change)."""
        await late.refill(self)
        if self.embedder is None:
            return 0
        todo = self.conn.execute("SELECT hash, min(text) FROM search_items WHERE hash NOT IN "
                                 "(SELECT hash FROM search_vectors) GROUP BY hash").fetchall()
        if not todo:
            return 0
        self.embedded_count = 0
        vectors = await self._embed([(h, t) for h, t in todo])
        with self._lock:
            self.conn.execute("BEGIN IMMEDIATE")
            try:
                self.check_embedder(claim=True)
                self.conn.executemany("INSERT OR IGNORE INTO search_vectors VALUES (?, ?)",
                                      list(vectors.items()))
                gen = self._bump()  # rows that gained a vector are part of the next delta
                self.conn.executemany("UPDATE search_items SET gen=? WHERE hash=?",
                                      [(gen, h) for h in vectors])
                self.conn.execute("COMMIT")
            except BaseException:
                self._rollback()
                raise
        return len(vectors)

    def ids(self, project: str) -> list[str]:
        """Ids of a project's indexed items."""
        pid = self.project_id(project)
        if pid is None:
            return []
        return [r[0] for r in self.conn.execute("SELECT id FROM search_items WHERE project_id=?",
                                                (pid,))]

    def hashes(self, project: str, spec: str | None = None, kinds: Sequence[str] | None = None,
               upto: int | None = None) -> dict[str, str]:
        """Item id -> content hash of a project's rows (of one spec, of some kinds, written at
        generation ``upto`` or before)."""
        pid = self.project_id(project)
        if pid is None:
            return {}
        sql, args = "SELECT id, hash FROM search_items WHERE project_id=?", [pid]
        if spec is not None:
            sql, args = sql + " AND spec=?", args + [spec]
        if kinds is not None:
            sql += f" AND kind IN ({','.join('?' * len(kinds))})"
            args += list(kinds)
        if upto is not None:
            sql, args = sql + " AND gen<=?", args + [upto]
        return {r[0]: r[1] for r in self.conn.execute(sql, args)}

    def known(self, ids: Sequence[str]) -> set[str]:
        """The given item ids that the index holds."""
        return {r[0] for r in db.select_in(
            self.conn, "SELECT id FROM search_items WHERE id IN ({})", ids)}

    def _rollback(self) -> None:
        try:
            self.conn.execute("ROLLBACK")
        except sqlite3.Error:
            pass

    def _existing_vectors(self, hashes: list[str]) -> set[str]:
        return {r[0] for r in db.select_in(
            self.conn, "SELECT hash FROM search_vectors WHERE hash IN ({})", hashes)}

    def delete(self, *, project: str, spec: str | None = None, ids: Sequence[str] | None = None,
               kinds: Sequence[str] | None = None) -> int:
        """Drop a project's items (optionally one spec's, some ids, some kinds)."""
        pid = self.project_id(project)
        if pid is None:
            return 0
        where, args = ["project_id=?"], [pid]
        if spec is not None:
            where.append("spec=?")
            args.append(spec)
        if ids is not None:
            n = db.MAX_PARAMS
            if len(ids) > n:  # SQLite caps bound parameters; delete in slices
                return sum(self.delete(project=project, spec=spec, ids=ids[i:i + n], kinds=kinds)
                           for i in range(0, len(ids), n))
            where.append(f"id IN ({','.join('?' * len(ids))})")
            args.extend(ids)
        if kinds is not None:
            where.append(f"kind IN ({','.join('?' * len(kinds))})")
            args.extend(kinds)
        with self._lock:
            self.conn.execute("BEGIN IMMEDIATE")
            try:
                gen = self._bump()
                cond = ' AND '.join(where)
                # logged so that a snapshot base holding these rows can drop them
                self.conn.execute(f"INSERT INTO search_deleted SELECT rowid, {gen} "
                                  f"FROM search_items WHERE {cond}", args)
                n = self.conn.execute(f"DELETE FROM search_items WHERE {cond}", args).rowcount
                late.prune(self.conn, None, PER_TEXT)
                self.conn.execute("COMMIT")
            except BaseException:
                self._rollback()
                raise
        return n

    def reset_vectors(self) -> None:
        """Forget every vector and the embedder that made them (before a full reindex)."""
        with self._lock:
            self.conn.execute("BEGIN IMMEDIATE")
            self.conn.execute("DELETE FROM search_vectors")
            self.conn.execute("DELETE FROM search_meta WHERE key='embedder'")
            gen = self._bump()  # every base built before now is void
            self.conn.execute("UPDATE search_meta SET value=? WHERE key='floor'", (str(gen),))
            self.conn.execute("COMMIT")

    def count(self) -> int:
        return self.conn.execute("SELECT count(*) FROM search_items").fetchone()[0]

    def stats(self) -> dict[str, Any]:
        """Counts for ``graphmem doctor`` and benchmarks."""
        return {"items": self.count(),
                "vectors": self.conn.execute("SELECT count(*) FROM search_vectors").fetchone()[0],
                "projects": len(self.projects()), "embedder": self._meta("embedder")}

    # ---- reads -------------------------------------------------------------------------------
    def snapshot(self):
        """The ranking view for the current generation (refreshed from the delta when stale)."""
        from .snapshot import refresh

        with self._lock:
            gen = self.generation()
            if self._snapshot is None or gen != self._snapshot.gen:
                self._snapshot = refresh(self, self._snapshot)
            return self._snapshot

    def meta(self, key: str) -> str | None:
        """A value of the index's meta table (generation, floor, instance, embedder)."""
        return self._meta(key)

    def prune_deleted(self, upto: int) -> None:
        """Forget delete records up to a persisted base's generation; older bases become void."""
        with self._lock:
            self.conn.execute("BEGIN IMMEDIATE")
            try:
                self.conn.execute("DELETE FROM search_deleted WHERE gen <= ?", (upto,))
                self.conn.execute("UPDATE search_meta SET value=? WHERE key='floor' AND "
                                  "CAST(value AS INTEGER) < ?", (str(upto), upto))
                self.conn.execute("COMMIT")
            except BaseException:
                self._rollback()
                raise

    def term_ids(self, terms: Iterable[str]) -> dict[str, int]:
        """Ids of the given terms that the index knows."""
        terms = list(set(terms))
        if not terms:
            return {}
        q = f"SELECT term, id FROM search_terms WHERE term IN ({','.join('?' * len(terms))})"
        return {r[0]: r[1] for r in self.conn.execute(q, terms)}

    def rows(self, rowids: Sequence[int]) -> dict[int, sqlite3.Row]:
        """Full rows (with project path) for the given rowids."""
        if not rowids:
            return {}
        q = ("SELECT i.rowid AS rowid, i.id, i.kind, i.text, p.path AS project, i.spec, i.session, "
             "i.time, i.metadata, i.source FROM search_items i JOIN projects p ON p.id=i.project_id "
             f"WHERE i.rowid IN ({','.join('?' * len(rowids))})")
        return {r["rowid"]: r for r in self.conn.execute(q, list(rowids))}

    def rows_by_id(self, ids: Sequence[str]) -> list[sqlite3.Row]:
        """Full rows of the given item ids (those the index holds)."""
        rowids = [r[0] for r in db.select_in(
            self.conn, "SELECT rowid FROM search_items WHERE id IN ({})", ids)]
        return list(self.rows(rowids).values())

    def close(self) -> None:
        try:
            self.conn.close()
        except sqlite3.Error:
            pass


def row_time(value: float | None) -> datetime | None:
    return datetime.fromtimestamp(value, timezone.utc) if value is not None else None
