"""Where this home's local index stands in each shared graph's change feed (``team.py``).

One row per graph: (server time in ms, uuid) of the last item and of the last tombstone taken
in, the order the graph's change feed is read in. The next pull reads only what was written
after that, not the whole graph.
"""

from __future__ import annotations

import sqlite3
import time
from typing import Sequence

from . import db

db.register_migrations("team", [(1, """
CREATE TABLE team_cursors (
  graph TEXT PRIMARY KEY, project TEXT NOT NULL, items_ms INTEGER NOT NULL,
  items_uuid TEXT NOT NULL, tombstones_ms INTEGER NOT NULL, tombstones_uuid TEXT NOT NULL,
  pulled_at REAL NOT NULL);
""")])

_MIGRATED: set[int] = set()
Cursor = tuple[int, str]  # (server ms, uuid) of the last row taken in


def _ready(conn: sqlite3.Connection) -> sqlite3.Connection:
    # The index may have been opened before this module registered its table.
    if id(conn) not in _MIGRATED:
        db.migrate(conn)
        _MIGRATED.add(id(conn))
    return conn


def get(conn: sqlite3.Connection, graph: str) -> tuple[Cursor, Cursor]:
    """(items, tombstones) cursors of ``graph``; ((0, ""), (0, "")) for a new graph."""
    row = _ready(conn).execute("SELECT items_ms, items_uuid, tombstones_ms, tombstones_uuid "
                               "FROM team_cursors WHERE graph=?", (graph,)).fetchone()
    return ((int(row[0]), row[1]), (int(row[2]), row[3])) if row else ((0, ""), (0, ""))


def advance(conn: sqlite3.Connection, graph: str, project: str, items: Cursor,
            tombstones: Cursor) -> None:
    """Move the cursors forward (never back: two processes may pull at once)."""
    _ready(conn).execute("BEGIN IMMEDIATE")
    try:
        (old_items, old_tombs) = get(conn, graph)
        conn.execute("INSERT OR REPLACE INTO team_cursors VALUES (?, ?, ?, ?, ?, ?, ?)",
                     (graph, project, *max(old_items, items), *max(old_tombs, tombstones),
                      time.time()))
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise


def reset(conn: sqlite3.Connection, project: str) -> None:
    """Forget a project's cursors: the next pull reads its graph from the start (after a
    reindex has dropped what this home had taken in)."""
    _ready(conn).execute("DELETE FROM team_cursors WHERE project=?", (project,))


def hashes(conn: sqlite3.Connection, ids: Sequence[str]) -> dict[str, str]:
    """Content hash of each given item id the index holds."""
    return dict(db.select_in(conn, "SELECT id, hash FROM search_items WHERE id IN ({})", ids))
