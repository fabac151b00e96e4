"""``IndexStore``: every SQL statement on the search index's tables, and their schema.

Tables: the project registry (``projects``), one row per ``MemoryItem`` (``search_items``, with
its stemmed terms and the generation that last wrote it), the term dictionary, one vector and one
ColBERT token matrix per distinct content hash (``search_vectors``, ``search_tokens``), the log of
deleted rows (``search_deleted``), meta values, and each shared graph's change-feed cursor
(``team_cursors``). Every write runs in ``transaction()`` (``db.transaction`` under this
connection's thread lock); the rest of ``index/`` and graphmem call the methods below.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import threading
import time
from array import array
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterable, Iterator, Sequence

from ..errors import IndexMismatchError
from graphmem.index import db

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
"""), (4, """
ALTER TABLE projects DROP COLUMN group_id;
""")])
# 3: ``projects.path`` holds the project KEY (``identity``), ``root`` where the project is checked
# out here; older rows (absolute paths, absolute spec paths in item ids) stay ``legacy`` until
# ``migrate_legacy`` rebuilds them. 4: the graph's group id is the graph's (``graph/schema``).

db.register_migrations("late", [(1, """
CREATE TABLE search_tokens (hash TEXT PRIMARY KEY, toks BLOB NOT NULL);
CREATE TABLE search_tokens_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
""")])

db.register_migrations("team", [(1, """
CREATE TABLE team_cursors (
  graph TEXT PRIMARY KEY, project TEXT NOT NULL, items_ms INTEGER NOT NULL,
  items_uuid TEXT NOT NULL, tombstones_ms INTEGER NOT NULL, tombstones_uuid TEXT NOT NULL,
  pulled_at REAL NOT NULL);
"""), (2, """
CREATE TABLE team_refused (
  graph TEXT NOT NULL, uuid TEXT NOT NULL, hash TEXT NOT NULL, reason TEXT NOT NULL,
  at REAL NOT NULL, PRIMARY KEY (graph, uuid));
""")])
# team 2: the shared graph's nodes a pull refused (too big, not a graphmem item, a path out of
# the project), by content hash: warned about once, fetched again only when they change.

# Bumped when the items derived from the files get other ids, so that a database marked under an
# older version catches each project up once more (dropping the rows under the old ids). 2: a
# session insight is one item per learning per spec (retry loops collapsed), not one per session.
ITEM_IDS_VERSION = 2

Cursor = tuple[int, str]  # (server ms, uuid) of the last change-feed row taken in

_FULL_ROWS = ("SELECT i.rowid AS rowid, i.id, i.kind, i.text, p.path AS project, i.spec, i.session, "
              "i.time, i.metadata, i.source FROM search_items i JOIN projects p ON p.id=i.project_id")
_ROW_COLUMNS = ("SELECT i.rowid, i.kind, i.project_id, i.spec, i.session, i.time, i.terms, "
                "i.fields, i.length, v.vec FROM search_items i "
                "LEFT JOIN search_vectors v ON v.hash=i.hash")


def _caught_up_key(project: str) -> str:
    # The key's hash part is what databases written so far hold: keep it, or every project is
    # caught up once more.
    return f"caught_up:{ITEM_IDS_VERSION}:gm_{hashlib.sha1(project.encode('utf-8')).hexdigest()[:16]}"


class IndexStore:
    """One connection to the home's database and the statements on the search tables."""

    def __init__(self, home: Path, busy_timeout: float = 30.0):
        self.home = Path(home)
        self.conn = db.connect(self.home, busy_timeout=busy_timeout)
        self.ident = db.identity(self.home)  # the database file this connection opened
        self.lock = threading.RLock()  # one connection, shared by the threads of this process
        self._term_ids: dict[str, int] = {}

    # ---- transactions ------------------------------------------------------------------------
    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """A write transaction under this connection's lock (rolled back on any exception)."""
        try:
            with db.transaction(self.conn, self.lock) as conn:
                yield conn
        except BaseException:
            self._term_ids.clear()  # ids assigned inside a rolled-back transaction are gone
            raise

    @contextmanager
    def read_snapshot(self) -> Iterator[None]:
        """Reads inside the block see one state of the database (a deferred transaction)."""
        with db.transaction(self.conn, self.lock, write=False):
            yield

    # ---- meta --------------------------------------------------------------------------------
    def meta(self, key: str) -> str | None:
        """A value of the index's meta table (generation, floor, instance, embedder ...)."""
        row = self.conn.execute("SELECT value FROM search_meta WHERE key=?", (key,)).fetchone()
        return row[0] if row else None

    def generation(self) -> int:
        """Bumped on every change; the ranking snapshot is rebuilt when it moves."""
        return int(self.meta("generation") or 0)

    def _bump(self) -> int:
        """Move to the next generation (inside a write transaction); returns it."""
        gen = self.generation() + 1
        self.conn.execute("UPDATE search_meta SET value=? WHERE key='generation'", (str(gen),))
        return gen

    def check_vectors_of(self, embedder: Any, *, claim: bool = False) -> None:
        """Refuse to mix vectors of two embedders; ``claim`` records ``embedder`` on an index
        that holds none yet."""
        if embedder is None:
            return
        mine = f"{embedder.name}:{embedder.dimension}"
        stored = self.meta("embedder")
        if stored is None:
            if claim:
                self.conn.execute("INSERT OR REPLACE INTO search_meta VALUES ('embedder', ?)", (mine,))
            return
        if stored != mine:
            raise IndexMismatchError(
                f"the local index in {self.home} holds vectors from {stored}, but the configured "
                f"embedder is {mine}; run `graphmem reindex` to rebuild it with the new embedder")

    # ---- project registry --------------------------------------------------------------------
    def register_project(self, path: str, name: str | None = None, root: str | None = None) -> int:
        """Add or touch a project (by key) in the registry, with its root here when known;
        returns its id."""
        self.conn.execute(
            "INSERT INTO projects(path, name, last_seen, root) VALUES (?, ?, ?, ?) "
            "ON CONFLICT(path) DO UPDATE SET last_seen=excluded.last_seen, "
            "name=COALESCE(?, name), root=COALESCE(excluded.root, root)",
            (path, name or Path(path).name, time.time(), root, name))
        return self.conn.execute("SELECT id FROM projects WHERE path=?", (path,)).fetchone()[0]

    def projects(self) -> list[dict[str, Any]]:
        """The registry: every project this home has indexed (``path`` is the project key)."""
        rows = self.conn.execute("SELECT id, path, name, last_seen, root, legacy "
                                 "FROM projects ORDER BY last_seen DESC").fetchall()
        return [dict(r) for r in rows]

    def forget_project(self, key: str, keep: bool = False) -> None:
        """Drop a project's items; its registry row too unless ``keep`` (then it is no longer
        legacy: the caller rebuilds it under the same key)."""
        self.delete(project=key)
        with self.lock:
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
        return self.meta(_caught_up_key(project)) is not None

    def mark_caught_up(self, project: str) -> None:
        """Record that every item of the project's files was indexed (a rebuilt database lacks
        the mark, so each project is indexed whole again on its first use)."""
        self.conn.execute("INSERT OR REPLACE INTO search_meta VALUES (?, ?)",
                          (_caught_up_key(project), str(time.time())))

    def project_id(self, path: str) -> int | None:
        row = self.conn.execute("SELECT id FROM projects WHERE path=?", (path,)).fetchone()
        return row[0] if row else None

    # ---- item writes (each inside ``transaction``) ----------------------------------------
    def _term_id_map(self, terms: Iterable[str]) -> dict[str, int]:
        missing = [t for t in set(terms) if t not in self._term_ids]
        if missing:
            self.conn.executemany("INSERT OR IGNORE INTO search_terms(term) VALUES (?)",
                                  [(t,) for t in missing])
            self._term_ids.update(db.select_in(
                self.conn, "SELECT term, id FROM search_terms WHERE term IN ({})", missing))
        return self._term_ids

    def put_items(self, items: Sequence[Any], tokens: Sequence[list[str]],
                  names: Sequence[list[str]], vectors: dict[str, bytes]) -> int:
        """Insert or update items with their terms and naming terms, and new vectors (inside a
        transaction). Returns the rows written."""
        gen = self._bump()
        ids = self._term_id_map([t for toks in [*tokens, *names] for t in toks])
        projects: dict[str, int] = {}
        rows = []
        for it, toks, nm in zip(items, tokens, names):
            if it.project not in projects:
                projects[it.project] = self.register_project(it.project)
            rows.append((it.id, it.kind, it.text, projects[it.project], it.spec, it.session,
                         it.time.timestamp() if it.time else None,
                         json.dumps(it.metadata, default=str, ensure_ascii=False),
                         it.source, it.content_hash(), array("i", [ids[t] for t in toks]).tobytes(),
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
        self.put_vectors(vectors)
        return len(rows)

    def put_vectors(self, vectors: dict[str, bytes], touch: bool = False) -> None:
        """Store vectors by content hash; ``touch``: their rows join the next snapshot delta."""
        self.conn.executemany("INSERT OR IGNORE INTO search_vectors VALUES (?, ?)",
                              list(vectors.items()))
        if touch:
            gen = self._bump()
            self.conn.executemany("UPDATE search_items SET gen=? WHERE hash=?",
                                  [(gen, h) for h in vectors])

    def prune_texts(self, hashes: Sequence[str] | None = None,
                    tables: Sequence[str] = PER_TEXT) -> None:
        """Drop per-text rows (vectors, token matrices) no item uses any more: of ``hashes``
        only (one indexed look-up each), or of every hash."""
        for table in tables:
            if hashes is None:
                self.conn.execute(f"DELETE FROM {table} WHERE hash NOT IN "
                                  "(SELECT hash FROM search_items)")
            else:
                self.conn.executemany(f"DELETE FROM {table} WHERE hash=? AND NOT EXISTS "
                                      "(SELECT 1 FROM search_items WHERE hash=?)",
                                      [(h, h) for h in hashes])

    def delete(self, *, project: str, spec: str | None = None, ids: Sequence[str] | None = None,
               kinds: Sequence[str] | None = None) -> int:
        """Drop a project's items (optionally one spec's, some ids, some kinds)."""
        pid = self.project_id(project)
        if pid is None:
            return 0
        args: list[Any]  # SQL parameters
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
        with self.transaction():
            gen = self._bump()
            cond = " AND ".join(where)
            # logged so that a snapshot base holding these rows can drop them
            self.conn.execute(f"INSERT INTO search_deleted SELECT rowid, {gen} "
                              f"FROM search_items WHERE {cond}", args)
            n = self.conn.execute(f"DELETE FROM search_items WHERE {cond}", args).rowcount
            self.prune_texts(None)
        return n

    def reset_vectors(self) -> None:
        """Forget every vector and the embedder that made them (before a full reindex)."""
        with self.transaction():
            self.conn.execute("DELETE FROM search_vectors")
            self.conn.execute("DELETE FROM search_meta WHERE key='embedder'")
            gen = self._bump()  # every base built before now is void
            self.conn.execute("UPDATE search_meta SET value=? WHERE key='floor'", (str(gen),))

    def prune_deleted(self, upto: int) -> None:
        """Forget delete records up to a persisted base's generation; older bases become void."""
        with self.transaction():
            self.conn.execute("DELETE FROM search_deleted WHERE gen <= ?", (upto,))
            self.conn.execute("UPDATE search_meta SET value=? WHERE key='floor' AND "
                              "CAST(value AS INTEGER) < ?", (str(upto), upto))

    # ---- token matrices (late interaction) ---------------------------------------------------
    def token_model(self) -> str | None:
        """The encoder that made the stored token matrices (None: none stored yet)."""
        row = self.conn.execute("SELECT value FROM search_tokens_meta WHERE key='model'").fetchone()
        return row[0] if row else None

    def hashes_with_tokens(self, hashes: Iterable[str]) -> set[str]:
        """The given content hashes that have a stored token matrix."""
        return {r[0] for r in db.select_in(
            self.conn, "SELECT hash FROM search_tokens WHERE hash IN ({})", list(hashes))}

    def put_tokens(self, model: str, tokens: dict[str, bytes]) -> None:
        """Store packed token matrices (inside a transaction); a new model replaces all."""
        if self.token_model() != model:
            self.conn.execute("DELETE FROM search_tokens")
            self.conn.execute("INSERT OR REPLACE INTO search_tokens_meta VALUES ('model', ?)",
                              (model,))
        self.conn.executemany("INSERT OR IGNORE INTO search_tokens VALUES (?, ?)",
                              list(tokens.items()))

    def texts_without_tokens(self, every: bool = False) -> list[tuple[str, str]]:
        """(hash, text) of indexed texts with no token matrix (``every``: all texts)."""
        where = "" if every else "WHERE hash NOT IN (SELECT hash FROM search_tokens)"
        return [tuple(r) for r in self.conn.execute(
            f"SELECT hash, min(text) FROM search_items {where} GROUP BY hash")]

    def token_blobs(self, hashes: Iterable[str]) -> list[tuple[str, bytes]]:
        """(hash, packed token matrix) of the given hashes that have one."""
        return [tuple(r) for r in db.select_in(
            self.conn, "SELECT hash, toks FROM search_tokens WHERE hash IN ({})", list(hashes))]

    # ---- reads -------------------------------------------------------------------------------
    def texts_without_vectors(self) -> list[tuple[str, str]]:
        """(hash, text) of indexed texts with no vector."""
        return [tuple(r) for r in self.conn.execute(
            "SELECT hash, min(text) FROM search_items WHERE hash NOT IN "
            "(SELECT hash FROM search_vectors) GROUP BY hash")]

    def existing_vectors(self, hashes: list[str]) -> set[str]:
        """The given content hashes that have a vector."""
        return {r[0] for r in db.select_in(
            self.conn, "SELECT hash FROM search_vectors WHERE hash IN ({})", hashes)}

    def item_hashes(self, ids: Sequence[str]) -> list[str]:
        """The distinct content hashes the given item ids have now."""
        return [r[0] for r in db.select_in(
            self.conn, "SELECT DISTINCT hash FROM search_items WHERE id IN ({})", ids)]

    def hashes_by_id(self, ids: Sequence[str], project: str | None = None) -> dict[str, str]:
        """Content hash of each given item id the index holds (under the key ``project`` only,
        when given)."""
        if project is None:
            return dict(db.select_in(self.conn, "SELECT id, hash FROM search_items WHERE id IN ({})",
                                     ids))
        pid = self.project_id(project)
        if pid is None:
            return {}
        return dict(db.select_in(self.conn, "SELECT id, hash FROM search_items WHERE project_id="
                                 f"{int(pid)} AND id IN ({{}})", ids))

    def hashes_by_rowid(self, rowids: Sequence[int]) -> dict[int, str]:
        """Content hash of each given rowid the index holds."""
        return dict(db.select_in(
            self.conn, "SELECT rowid, hash FROM search_items WHERE rowid IN ({})", rowids))

    def rowids_by_id(self, ids: Sequence[str]) -> dict[str, int]:
        """Rowid of each given item id the index holds."""
        return {r[0]: int(r[1]) for r in db.select_in(
            self.conn, "SELECT id, rowid FROM search_items WHERE id IN ({})", ids)}

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
        args: list[Any]  # SQL parameters
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
        return set(self.rowids_by_id(ids))

    def count(self) -> int:
        return self.conn.execute("SELECT count(*) FROM search_items").fetchone()[0]

    def stats(self) -> dict[str, Any]:
        """Counts for ``graphmem doctor`` and benchmarks."""
        return {"items": self.count(),
                "vectors": self.conn.execute("SELECT count(*) FROM search_vectors").fetchone()[0],
                "projects": len(self.projects()), "embedder": self.meta("embedder")}

    def sizes(self) -> dict[str, int]:
        """Items, and the bytes their vectors and token matrices take (for benchmarks)."""
        one = lambda q: self.conn.execute(q).fetchone()[0] or 0  # noqa: E731
        return {"items": one("SELECT count(*) FROM search_items"),
                "vectors": one("SELECT sum(length(vec)) FROM search_vectors"),
                "tokens": one("SELECT sum(length(toks)) FROM search_tokens")}

    def term_ids(self, terms: Iterable[str]) -> dict[str, int]:
        """Ids of the given terms that the index knows."""
        return dict(db.select_in(self.conn, "SELECT term, id FROM search_terms WHERE term IN ({})",
                                 list(set(terms))))

    def rows(self, rowids: Sequence[int]) -> dict[int, sqlite3.Row]:
        """Full rows (with project key) for the given rowids."""
        if not rowids:
            return {}
        q = f"{_FULL_ROWS} WHERE i.rowid IN ({','.join('?' * len(rowids))})"
        return {r["rowid"]: r for r in self.conn.execute(q, list(rowids))}

    def rows_by_id(self, ids: Sequence[str]) -> list[sqlite3.Row]:
        """Full rows of the given item ids (those the index holds), in one read by id."""
        return db.select_in(self.conn, f"{_FULL_ROWS} WHERE i.id IN ({{}})", list(dict.fromkeys(ids)))

    # ---- the snapshot's reads (inside ``read_snapshot``) -------------------------------------
    def ranking_rows(self, since: int | None = None, by_project: bool = False) -> list[tuple]:
        """(rowid, kind, project id, spec, session, time, terms, fields, length, vector) of every
        row, or of those written after generation ``since``."""
        where, args = ("i.gen > ?", (since,)) if since is not None else ("1", ())
        order = "i.project_id, i.rowid" if by_project else "i.rowid"
        return self.conn.execute(f"{_ROW_COLUMNS} WHERE {where} ORDER BY {order}", args).fetchall()

    def count_since(self, gen: int) -> int:
        """Rows written after generation ``gen``."""
        return self.conn.execute("SELECT count(*) FROM search_items WHERE gen > ?",
                                 (gen,)).fetchone()[0]

    def deleted_since(self, gen: int) -> list[int]:
        """Rowids deleted after generation ``gen``."""
        return [r[0] for r in self.conn.execute("SELECT rowid FROM search_deleted WHERE gen > ?",
                                                (gen,))]

    # ---- shared graphs' change-feed cursors (``team.py``) ------------------------------------
    def cursor(self, graph: str) -> tuple[Cursor, Cursor]:
        """(items, tombstones) cursors of ``graph``; ((0, ""), (0, "")) for a new graph."""
        row = self.conn.execute("SELECT items_ms, items_uuid, tombstones_ms, tombstones_uuid "
                                "FROM team_cursors WHERE graph=?", (graph,)).fetchone()
        return ((int(row[0]), row[1]), (int(row[2]), row[3])) if row else ((0, ""), (0, ""))

    def advance_cursor(self, graph: str, project: str, items: Cursor, tombstones: Cursor) -> None:
        """Move the cursors forward (never back: two processes may pull at once)."""
        with self.transaction():
            old_items, old_tombs = self.cursor(graph)
            self.conn.execute("INSERT OR REPLACE INTO team_cursors VALUES (?, ?, ?, ?, ?, ?, ?)",
                              (graph, project, *max(old_items, items), *max(old_tombs, tombstones),
                               time.time()))

    def refused(self, graph: str, uuids: Sequence[str]) -> dict[str, str]:
        """uuid -> content hash of the given nodes of ``graph`` a pull refused."""
        return {r[0]: r[1] for r in db.select_in(
            self.conn, "SELECT uuid, hash, graph FROM team_refused WHERE uuid IN ({})", uuids)
            if r[2] == graph}

    def refuse(self, graph: str, nodes: dict[str, tuple[str, str]]) -> None:
        """Record nodes of ``graph`` a pull refused: uuid -> (content hash, reason)."""
        with self.transaction():
            self.conn.executemany("INSERT OR REPLACE INTO team_refused VALUES (?, ?, ?, ?, ?)",
                                  [(graph, u, h, why[:500], time.time())
                                   for u, (h, why) in nodes.items()])

    def forget_refused(self, graph: str, uuids: Sequence[str]) -> None:
        """Forget refusals of nodes of ``graph`` (taken in after a change, or deleted)."""
        with self.transaction():
            self.conn.executemany("DELETE FROM team_refused WHERE graph=? AND uuid=?",
                                  [(graph, u) for u in uuids])

    def refusals(self) -> list[dict[str, Any]]:
        """Every refused node this home remembers, newest first: graph, uuid, reason, at."""
        rows = self.conn.execute("SELECT graph, uuid, reason, at FROM team_refused "
                                 "ORDER BY at DESC, uuid").fetchall()
        return [{"graph": r[0], "uuid": r[1], "reason": r[2], "at": r[3]} for r in rows]

    def close(self) -> None:
        try:
            self.conn.close()
        except sqlite3.Error:
            pass
