"""The only module that opens SQLite: one database per ``GRAPHMEM_HOME`` with numbered migrations.

Each component (``search``, ``episodes`` ...) registers its own ordered migrations with
``register_migrations``; ``connect`` applies what is missing, each migration in one transaction,
and records it in ``schema_versions``. The database is derived data: deleting it and running
``graphmem reindex`` rebuilds it from the files.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from pathlib import Path

from ..errors import StorageError
from ..files.safe import private_dir, tighten

MIGRATIONS: dict[str, list[tuple[int, str]]] = {}
_apply_lock = threading.Lock()


def register_migrations(component: str, migrations: list[tuple[int, str]]) -> None:
    """Declare ``component``'s schema as ordered ``(version, sql script)`` pairs (1, 2, 3 ...)."""
    versions = [v for v, _ in migrations]
    if versions != list(range(1, len(versions) + 1)):
        raise ValueError(f"migrations of {component} must be numbered 1..n, got {versions}")
    MIGRATIONS[component] = migrations


MAX_PARAMS = 500  # keys bound per statement (SQLite caps bound parameters)


def select_in(conn: sqlite3.Connection, sql: str, keys) -> list:
    """Rows of ``sql`` run over ``keys`` in slices; ``sql`` holds ``IN ({})`` for the marks."""
    keys = list(keys)
    rows: list = []
    for i in range(0, len(keys), MAX_PARAMS):
        chunk = keys[i:i + MAX_PARAMS]
        rows += conn.execute(sql.format(",".join("?" * len(chunk))), chunk).fetchall()
    return rows


def db_path(home: Path) -> Path:
    return Path(home) / "index.sqlite3"


def connect(home: Path, *, readonly: bool = False) -> sqlite3.Connection:
    """Open the home's database (WAL, foreign keys on) with every registered migration applied."""
    path = db_path(home)
    try:
        private_dir(path.parent)
        _private_files(path)
        conn = sqlite3.connect(path, timeout=30.0, isolation_level=None, check_same_thread=False)
    except (OSError, sqlite3.Error) as exc:
        raise StorageError(f"cannot open the index database {path}: {exc}") from None
    conn.row_factory = sqlite3.Row
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.execute("PRAGMA foreign_keys=ON")
    conn.execute("PRAGMA busy_timeout=30000")
    if not readonly:
        migrate(conn)
    return conn


def _private_files(path: Path) -> None:
    """The database and its ``-wal``/``-shm`` are the user's alone (0600).

    SQLite creates a database 0644 (less the umask) and gives ``-wal``/``-shm`` the database's
    own mode, so creating the empty database 0600 first is enough for new homes; files an older
    graphmem made are tightened.
    """
    # Only when absent (O_EXCL): closing a descriptor of a database this process has open would
    # drop SQLite's POSIX locks on it. An empty file is a valid new database.
    try:
        os.close(os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600))
    except FileExistsError:
        pass
    for suffix in ("", "-wal", "-shm", "-journal"):
        tighten(path.with_name(path.name + suffix), 0o600)


def migrate(conn: sqlite3.Connection) -> None:
    """Apply every registered migration that this database lacks.

    The database says what it has (one small query per connection), rather than a per-process
    memo: a database deleted and recreated while a process runs gets its tables again.
    """
    with _apply_lock:
        try:
            have = dict(conn.execute("SELECT component, max(version) FROM schema_versions "
                                     "GROUP BY component").fetchall())
        except sqlite3.OperationalError:  # a new database
            have = {}
        pending = [c for c, steps in MIGRATIONS.items() if have.get(c, 0) < len(steps)]
        if not pending:
            return
        conn.execute("CREATE TABLE IF NOT EXISTS schema_versions (component TEXT NOT NULL, "
                     "version INTEGER NOT NULL, applied_at REAL NOT NULL, "
                     "PRIMARY KEY (component, version))")
        for component in pending:
            for version, script in MIGRATIONS[component]:
                conn.execute("BEGIN IMMEDIATE")
                try:
                    done = conn.execute("SELECT 1 FROM schema_versions WHERE component=? AND version=?",
                                        (component, version)).fetchone()
                    if not done:
                        for stmt in _split(script):
                            conn.execute(stmt)
                        conn.execute("INSERT INTO schema_versions VALUES (?, ?, ?)",
                                     (component, version, time.time()))
                    conn.execute("COMMIT")
                except BaseException:
                    conn.execute("ROLLBACK")
                    raise


def _split(script: str) -> list[str]:
    """Split a script into statements (triggers with inner ``;`` end with ``END;``)."""
    out, buf = [], ""
    for part in script.split(";"):
        buf += part + ";"
        if sqlite3.complete_statement(buf):
            if buf.strip(" \n;"):
                out.append(buf.strip())
            buf = ""
    if buf.strip(" \n;"):
        out.append(buf.strip())
    return out
