"""Where this home's local index stands in each shared graph's change feed (``team.py``).

One row per graph: the server time (ms) of the newest item and of the newest tombstone taken
in. The next pull reads only what was written after that (less a margin), not the whole graph.
"""

from __future__ import annotations

import sqlite3
import time
from typing import Sequence

from . import db

db.register_migrations("team", [(1, """
CREATE TABLE team_cursors (
  graph TEXT PRIMARY KEY, project TEXT NOT NULL, items_ms INTEGER NOT NULL,
  tombstones_ms INTEGER NOT NULL, pulled_at REAL NOT NULL);
""")])

_MIGRATED: set[int] = set()


def _ready(conn: sqlite3.Connection) -> sqlite3.Connection:
    # The index may have been opened before this module registered its table.
    if id(conn) not in _MIGRATED:
        db.migrate(conn)
        _MIGRATED.add(id(conn))
    return conn


def get(conn: sqlite3.Connection, graph: str) -> tuple[int, int]:
    """(items_ms, tombstones_ms) taken in from ``graph`` so far; (0, 0) for a new graph."""
    row = _ready(conn).execute("SELECT items_ms, tombstones_ms FROM team_cursors WHERE graph=?",
                               (graph,)).fetchone()
    return (int(row[0]), int(row[1])) if row else (0, 0)


def advance(conn: sqlite3.Connection, graph: str, project: str, items_ms: int,
            tombstones_ms: int) -> None:
    """Move the cursor forward (never back: two processes may pull at once)."""
    _ready(conn).execute(
        "INSERT INTO team_cursors VALUES (?, ?, ?, ?, ?) ON CONFLICT(graph) DO UPDATE SET "
        "project=excluded.project, items_ms=max(items_ms, excluded.items_ms), "
        "tombstones_ms=max(tombstones_ms, excluded.tombstones_ms), pulled_at=excluded.pulled_at",
        (graph, project, int(items_ms), int(tombstones_ms), time.time()))


def reset(conn: sqlite3.Connection, project: str) -> None:
    """Forget a project's cursors: the next pull reads its graph from the start (after a
    reindex has dropped what this home had taken in)."""
    _ready(conn).execute("DELETE FROM team_cursors WHERE project=?", (project,))


def hashes(conn: sqlite3.Connection, ids: Sequence[str]) -> dict[str, str]:
    """Content hash of each given item id the index holds."""
    return dict(db.select_in(conn, "SELECT id, hash FROM search_items WHERE id IN ({})", ids))
