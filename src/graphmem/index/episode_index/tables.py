"""The session tables: SQLite rows derived from the session files, for fast lists and recents.

One row per session, turn and step, keyed by (spec folder, session id) so that two copies of a
project never collide. Each session row remembers the sizes of the files it was built from;
``reconcile`` re-reads any session whose files changed behind the index's back (a crash between
the file append and the row insert, a copied folder, a deleted database), so the index can always
be rebuilt from the files.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

from ...errors import StorageError
from ..db import (connect, identity, is_corrupt, move_aside, register_migrations,
                  transaction)

register_migrations("episodes", [(1, """
CREATE TABLE ep_sessions (
  spec TEXT NOT NULL, id TEXT NOT NULL, project TEXT NOT NULL, workspace TEXT NOT NULL,
  started_at REAL NOT NULL, ended_at REAL, model TEXT, mode TEXT,
  total_tokens INTEGER NOT NULL DEFAULT 0, summary TEXT, first_prompt TEXT,
  turns INTEGER NOT NULL DEFAULT 0, steps INTEGER NOT NULL DEFAULT 0,
  turns_size INTEGER NOT NULL DEFAULT 0, steps_size INTEGER NOT NULL DEFAULT 0,
  meta_mtime INTEGER NOT NULL DEFAULT 0,
  PRIMARY KEY (spec, id));
CREATE INDEX ep_sessions_workspace ON ep_sessions(workspace, started_at DESC);
CREATE INDEX ep_sessions_started ON ep_sessions(spec, started_at DESC);
CREATE TABLE ep_turns (
  rowid INTEGER PRIMARY KEY, spec TEXT NOT NULL, session_id TEXT NOT NULL, id TEXT NOT NULL,
  turn_index INTEGER NOT NULL, role TEXT NOT NULL, content TEXT NOT NULL, model TEXT,
  tokens INTEGER, at REAL NOT NULL, metadata TEXT,
  UNIQUE (spec, session_id, turn_index),
  FOREIGN KEY (spec, session_id) REFERENCES ep_sessions(spec, id) ON DELETE CASCADE);
CREATE INDEX ep_turns_recent ON ep_turns(spec, at DESC);
CREATE TABLE ep_steps (
  rowid INTEGER PRIMARY KEY, spec TEXT NOT NULL, session_id TEXT NOT NULL, id TEXT NOT NULL,
  step_index INTEGER NOT NULL, name TEXT NOT NULL, status TEXT NOT NULL, payload TEXT,
  at REAL NOT NULL,
  UNIQUE (spec, session_id, step_index),
  FOREIGN KEY (spec, session_id) REFERENCES ep_sessions(spec, id) ON DELETE CASCADE);
""")])

SESSION_COLS = ("id, project, workspace, started_at, ended_at, model, mode, total_tokens, summary, "
                "first_prompt, turns, steps, spec")

_open: dict[tuple[str, int], "EpisodeIndex"] = {}
_open_lock = threading.Lock()


def open_episode_index(home: Path, busy_timeout: float = 30.0) -> "EpisodeIndex":
    """The process's episodes index for ``home`` (one connection per home and process; the
    first opener's ``busy_timeout`` holds)."""
    key = (str(Path(home).resolve()), os.getpid())  # a forked child must not reuse the parent's
    with _open_lock:
        idx = _open.get(key)
        if idx is None:
            idx = _open[key] = EpisodeIndex(Path(home), busy_timeout)
        return idx


def _epoch(value: Any) -> float | None:
    from ...models import parse_iso

    t = parse_iso(value)
    return t.timestamp() if t else None


class EpisodeIndex:
    """Session, turn and step rows in the home's SQLite database."""

    def __init__(self, home: Path, busy_timeout: float = 30.0):
        self.home = Path(home)
        self.busy_timeout = busy_timeout
        self.conn = connect(home, busy_timeout=busy_timeout)
        self._ident = identity(self.home)
        self._lock = threading.RLock()  # one connection, shared by the threads of this process

    def _fresh(self) -> None:
        """Reconnect when the database file was replaced (moved aside and rebuilt)."""
        if identity(self.home) != self._ident:
            try:
                self.conn.close()
            except sqlite3.Error:
                pass
            self.conn = connect(self.home, busy_timeout=self.busy_timeout)
            self._ident = identity(self.home)

    def _heal(self, exc: sqlite3.Error) -> bool:
        """A damaged database: move it aside and reconnect (True), else False."""
        if not is_corrupt(exc):
            return False
        try:
            self.conn.close()
        except sqlite3.Error:
            pass
        move_aside(self.home, str(exc))
        self.conn = connect(self.home, busy_timeout=self.busy_timeout)
        self._ident = identity(self.home)
        return True

    @contextmanager
    def transaction(self) -> Iterator[sqlite3.Connection]:
        """A write transaction on the session tables (``db.transaction``); an SQLite error is a
        ``StorageError``, and a damaged database is moved aside for the next reconcile."""
        with self._lock:
            self._fresh()
            try:
                with transaction(self.conn) as conn:
                    yield conn
            except sqlite3.Error as exc:
                self._heal(exc)  # the next reconcile rebuilds the rows from the files
                raise StorageError(f"episodes index: {exc}") from None

    def _query(self, sql: str, args: tuple = ()) -> list[sqlite3.Row]:
        with self._lock:
            self._fresh()
            try:
                return self.conn.execute(sql, args).fetchall()
            except sqlite3.Error as exc:
                if not self._heal(exc):
                    raise StorageError(f"episodes index: {exc}") from None
            try:
                return self.conn.execute(sql, args).fetchall()
            except sqlite3.Error as exc:
                raise StorageError(f"episodes index: {exc}") from None

    # ---- writes ---------------------------------------------------------------------------
    @staticmethod
    def _put_session(c: sqlite3.Connection, spec: str, meta: dict, sizes: tuple[int, int, int],
                     counts: tuple[int, int] | None = None, first_prompt: str | None = None) -> None:
        c.execute(
            "INSERT INTO ep_sessions (spec, id, project, workspace, started_at, ended_at, model, mode,"
            " total_tokens, summary, first_prompt, turns, steps, turns_size, steps_size, meta_mtime)"
            " VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?) ON CONFLICT(spec, id) DO UPDATE SET"
            " project=excluded.project, workspace=excluded.workspace, started_at=excluded.started_at,"
            " ended_at=excluded.ended_at, model=excluded.model, mode=excluded.mode,"
            " total_tokens=excluded.total_tokens, summary=excluded.summary,"
            " first_prompt=COALESCE(excluded.first_prompt, first_prompt),"
            " turns=CASE WHEN ? THEN excluded.turns ELSE turns END,"
            " steps=CASE WHEN ? THEN excluded.steps ELSE steps END,"
            " turns_size=excluded.turns_size, steps_size=excluded.steps_size,"
            " meta_mtime=excluded.meta_mtime",
            (spec, meta["session_id"], meta.get("project") or "", meta.get("workspace") or "",
             _epoch(meta.get("started_at")) or 0.0, _epoch(meta.get("ended_at")), meta.get("model"),
             meta.get("mode"), int(meta.get("total_tokens") or 0), meta.get("summary"), first_prompt,
             counts[0] if counts else 0, counts[1] if counts else 0, sizes[0], sizes[1], sizes[2],
             counts is not None, counts is not None))

    def put_session(self, spec: str, meta: dict, sizes: tuple[int, int, int]) -> None:
        """Insert or refresh a session's row from its metadata."""
        with self.transaction() as c:
            self._put_session(c, spec, meta, sizes)

    @classmethod
    def add_rows(cls, c: sqlite3.Connection, spec: str, sid: str, turns: list[dict],
                 steps: list[dict], sizes: tuple[int, int]) -> None:
        """Rows for freshly appended turns and steps and the session's new file sizes, inside the
        caller's transaction (the background writer shares the search index's).

        Counts and sizes only ever grow to what the records say (last index + 1, the largest
        size seen), so rows applied late, twice or out of order by two processes stay right.
        """
        if c.execute("SELECT 1 FROM ep_sessions WHERE spec=? AND id=?", (spec, sid)).fetchone() is None:
            return  # deleted meanwhile (or never indexed): reconcile rebuilds it from its files
        cls._insert(c, spec, sid, turns, steps)
        first = next((t["content"] for t in turns if t.get("role") == "user"), None)
        n_turns = max((t["index"] + 1 for t in turns), default=0)
        n_steps = max((s["index"] + 1 for s in steps), default=0)
        c.execute("UPDATE ep_sessions SET turns = MAX(turns, ?), steps = MAX(steps, ?),"
                  " turns_size = MAX(turns_size, ?), steps_size = MAX(steps_size, ?),"
                  " first_prompt = COALESCE(first_prompt, ?) WHERE spec=? AND id=?",
                  (n_turns, n_steps, sizes[0], sizes[1], first, spec, sid))

    @staticmethod
    def _insert(c: sqlite3.Connection, spec: str, sid: str, turns: list[dict], steps: list[dict]) -> None:
        if turns:
            c.executemany(
                "INSERT OR REPLACE INTO ep_turns (spec, session_id, id, turn_index, role, content,"
                " model, tokens, at, metadata) VALUES (?,?,?,?,?,?,?,?,?,?)",
                [(spec, sid, t["id"], t["index"], t["role"], t["content"], t.get("model"),
                  t.get("tokens"), _epoch(t.get("at")) or 0.0,
                  json.dumps(t["metadata"]) if t.get("metadata") else None) for t in turns])
        if steps:
            c.executemany(
                "INSERT OR REPLACE INTO ep_steps (spec, session_id, id, step_index, name, status,"
                " payload, at) VALUES (?,?,?,?,?,?,?,?)",
                [(spec, sid, s["id"], s["index"], s["name"], s["status"],
                  json.dumps(s["payload"]) if s.get("payload") is not None else None,
                  _epoch(s.get("at")) or 0.0) for s in steps])

    def replace_session(self, spec: str, meta: dict, turns: list[dict], steps: list[dict],
                        sizes: tuple[int, int, int]) -> None:
        """Rebuild one session's rows from everything its files hold."""
        with self.transaction() as c:
            self.replace_rows(c, spec, meta, turns, steps, sizes)

    @classmethod
    def replace_rows(cls, c: sqlite3.Connection, spec: str, meta: dict, turns: list[dict],
                     steps: list[dict], sizes: tuple[int, int, int]) -> None:
        """``replace_session`` inside the caller's transaction."""
        first = next((t["content"] for t in turns if t.get("role") == "user"), None)
        sid = meta["session_id"]
        c.execute("DELETE FROM ep_turns WHERE spec=? AND session_id=?", (spec, sid))
        c.execute("DELETE FROM ep_steps WHERE spec=? AND session_id=?", (spec, sid))
        c.execute("DELETE FROM ep_sessions WHERE spec=? AND id=?", (spec, sid))
        cls._put_session(c, spec, meta, sizes, (len(turns), len(steps)), first)
        cls._insert(c, spec, sid, turns, steps)

    @classmethod
    def catch_up_rows(cls, c: sqlite3.Connection, spec: str, meta: dict, turns: list[dict],
                      steps: list[dict], sizes: tuple[int, int, int]) -> None:
        """Add every row a session's files hold, removing none, inside the caller's transaction.

        Applied after the session lock is released, so rows another process added meanwhile must
        stay; a row that should go (a cut torn line) is dropped by the exact ``replace_session``
        that the next read runs when the sizes disagree.
        """
        cls._put_session(c, spec, meta, sizes)
        cls.add_rows(c, spec, meta["session_id"], turns, steps, sizes[:2])

    def delete_session(self, spec: str, sid: str) -> None:
        """Drop a session and its turns and steps."""
        with self.transaction() as c:
            c.execute("DELETE FROM ep_turns WHERE spec=? AND session_id=?", (spec, sid))
            c.execute("DELETE FROM ep_steps WHERE spec=? AND session_id=?", (spec, sid))
            c.execute("DELETE FROM ep_sessions WHERE spec=? AND id=?", (spec, sid))

    # ---- reads ----------------------------------------------------------------------------
    def states(self, spec: str) -> dict[str, tuple[int, int, int]]:
        """session id -> the (turns size, steps size, metadata mtime) the rows were built from."""
        rows = self._query("SELECT id, turns_size, steps_size, meta_mtime FROM ep_sessions WHERE spec=?",
                           (spec,))
        return {r["id"]: (r["turns_size"], r["steps_size"], r["meta_mtime"]) for r in rows}

    def specs(self, project: str) -> list[str]:
        """The spec folders of ``project`` that have sessions in the index."""
        return [r[0] for r in self._query("SELECT DISTINCT spec FROM ep_sessions WHERE project=?",
                                          (project,))]

    def state(self, spec: str, sid: str) -> tuple[int, int, int] | None:
        """The (turns size, steps size, metadata mtime) one session's rows were built from."""
        rows = self._query("SELECT turns_size, steps_size, meta_mtime FROM ep_sessions"
                           " WHERE spec=? AND id=?", (spec, sid))
        return (rows[0][0], rows[0][1], rows[0][2]) if rows else None

    def session(self, spec: str, sid: str) -> dict | None:
        rows = self._query(f"SELECT {SESSION_COLS} FROM ep_sessions WHERE spec=? AND id=?", (spec, sid))
        return _session(rows[0]) if rows else None

    def recent_sessions(self, *, workspace: str | None, spec: str | None, limit: int) -> list[dict]:
        """Most recently started sessions first, each with its first user prompt."""
        where, args = ("workspace=?", (workspace,)) if workspace is not None else ("spec=?", (spec,))
        rows = self._query(f"SELECT {SESSION_COLS} FROM ep_sessions WHERE {where}"
                           " ORDER BY started_at DESC, id LIMIT ?", (*args, limit))
        return [_session(r) for r in rows]

    def turns(self, spec: str, sid: str, limit: int | None = None) -> list[dict]:
        """A session's turns in order (its last ``limit`` when given)."""
        if limit is None:
            rows = self._query("SELECT * FROM ep_turns WHERE spec=? AND session_id=?"
                               " ORDER BY turn_index", (spec, sid))
        else:
            rows = self._query("SELECT * FROM ep_turns WHERE spec=? AND session_id=?"
                               " ORDER BY turn_index DESC LIMIT ?", (spec, sid, limit))[::-1]
        return [_turn(r) for r in rows]

    def recent_turns(self, spec: str, limit: int) -> list[dict]:
        """The spec's ``limit`` latest turns across sessions, oldest of them first."""
        rows = self._query("SELECT * FROM ep_turns WHERE spec=? ORDER BY at DESC, rowid DESC LIMIT ?",
                           (spec, limit))
        return [_turn(r) for r in rows[::-1]]


def _iso(epoch: float | None) -> str | None:
    from datetime import datetime, timezone

    return None if epoch is None else datetime.fromtimestamp(epoch, timezone.utc).isoformat()


def _session(r: sqlite3.Row) -> dict:
    return {"session_id": r["id"], "project": r["project"], "workspace": r["workspace"],
            "spec": r["spec"], "started_at": _iso(r["started_at"]), "ended_at": _iso(r["ended_at"]),
            "status": "ended" if r["ended_at"] is not None else "active", "model": r["model"],
            "mode": r["mode"], "total_tokens": r["total_tokens"], "summary": r["summary"],
            "first_prompt": r["first_prompt"], "turns": r["turns"], "steps": r["steps"]}


def _turn(r: sqlite3.Row) -> dict:
    return {"id": r["id"], "session_id": r["session_id"], "index": r["turn_index"], "role": r["role"],
            "content": r["content"], "model": r["model"], "tokens": r["tokens"], "at": _iso(r["at"]),
            "metadata": json.loads(r["metadata"]) if r["metadata"] else {}}
