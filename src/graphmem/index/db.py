"""The only module that opens SQLite: one database per ``GRAPHMEM_HOME`` with numbered migrations.

Each component (``search``, ``episodes`` ...) registers its own ordered migrations with
``register_migrations``; ``connect`` applies what is missing, each migration in one transaction,
and records it in ``schema_versions``. The database is derived data: deleting it and running
``graphmem reindex`` rebuilds it from the files.

A damaged database ("file is not a database", "database disk image is malformed": SQLite's
``SQLITE_NOTADB`` and ``SQLITE_CORRUPT`` codes) is never fatal: ``move_aside`` renames it (and its
``-wal``/``-shm``) to ``index.sqlite3.corrupt-<time>``, records every project its registry still
names in the index journal (``journal.py``) so the next process rebuilds them from their files,
and warns once; ``connect`` then opens a fresh database.
"""

from __future__ import annotations

import fcntl
import logging
import os
import sqlite3
import threading
import time
from contextlib import contextmanager, nullcontext
from datetime import datetime, timezone
from pathlib import Path
from typing import Iterator

from ..errors import CorruptIndexError, StorageError
from ..files.safe import private_dir, tighten

log = logging.getLogger("graphmem.index")
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


def connect(home: Path, *, readonly: bool = False, heal: bool = True,
            busy_timeout: float = 30.0) -> sqlite3.Connection:
    """Open the home's database (WAL, foreign keys on) with every registered migration applied.

    A damaged database is moved aside and a fresh one opened (``heal``); without ``heal`` it is
    a ``CorruptIndexError``.
    """
    path = db_path(home)
    for attempt in (1, 2):
        try:
            return _open(path, readonly, busy_timeout)
        except sqlite3.DatabaseError as exc:
            if not is_corrupt(exc):
                raise StorageError(f"cannot open the index database {path}: {exc}") from None
            if not heal or attempt == 2:
                raise CorruptIndexError(f"the index database {path} is damaged: {exc}") from None
            move_aside(Path(home), str(exc))
    raise AssertionError("unreachable")


def _open(path: Path, readonly: bool, busy_timeout: float) -> sqlite3.Connection:
    try:
        private_dir(path.parent)
        _private_files(path)
        conn = sqlite3.connect(path, timeout=busy_timeout, isolation_level=None,
                               check_same_thread=False)
    except OSError as exc:
        raise StorageError(f"cannot open the index database {path}: {exc}") from None
    try:
        conn.row_factory = sqlite3.Row
        _wal(conn, busy_timeout)
        conn.execute("PRAGMA synchronous=NORMAL")
        conn.execute("PRAGMA foreign_keys=ON")
        conn.execute(f"PRAGMA busy_timeout={int(busy_timeout * 1000)}")
        if not readonly:
            migrate(conn)
    except BaseException:
        conn.close()
        raise
    return conn


def _wal(conn: sqlite3.Connection, busy_timeout: float) -> None:
    """Put the database in WAL mode, waiting up to ``busy_timeout`` for other connections.

    Switching a new database to WAL answers "database is locked" at once, without SQLite's busy
    handler, when another connection holds it at that moment (two processes, or a write-behind
    thread, opening a fresh home together: 16 of 200 trials of four openers failed so); the
    switch is retried instead, and a database already in WAL mode is only read.
    """
    deadline = time.monotonic() + busy_timeout
    pause = 0.005
    while True:
        try:
            if conn.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
                conn.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            busy = getattr(exc, "sqlite_errorcode", 0) & 0xFF in (sqlite3.SQLITE_BUSY,
                                                                  sqlite3.SQLITE_LOCKED)
            if not busy or time.monotonic() + pause > deadline:
                raise
        time.sleep(pause)
        pause = min(pause * 2, 0.1)


CORRUPT_CODES = (sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB)


def identity(home: Path) -> tuple[int, int] | None:
    """(device, inode) of the home's database file: a connection opened on another one is stale
    (the file was moved aside and rebuilt, by this process or another)."""
    try:
        st = os.stat(db_path(home))
    except OSError:
        return None
    return st.st_dev, st.st_ino


def is_corrupt(exc: BaseException) -> bool:
    """Whether an SQLite error says the database file is damaged (not busy, locked or full)."""
    code = getattr(exc, "sqlite_errorcode", None)
    return isinstance(exc, sqlite3.DatabaseError) and code is not None and code & 0xFF in CORRUPT_CODES


def registered_roots(home: Path) -> list[str]:
    """The project roots the home's database has registered, read only; [] when there is no
    database yet, its schema is older, or it is locked."""
    path = db_path(home)
    if not path.is_file():
        return []
    try:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5.0)
        try:
            return [r[0] for r in conn.execute("SELECT root FROM projects WHERE root IS NOT NULL")]
        finally:
            conn.close()
    except sqlite3.Error:
        return []


def check(home: Path) -> str | None:
    """Why the home's database is damaged (``PRAGMA quick_check``), or None when it is sound or
    absent. Reads only: nothing is moved or created."""
    path = db_path(home)
    if not path.exists():
        return None
    try:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=30.0)
    except sqlite3.Error as exc:
        return str(exc) if is_corrupt(exc) else None
    try:
        rows = [r[0] for r in conn.execute("PRAGMA quick_check(5)")]
        return None if rows == ["ok"] else "; ".join(map(str, rows))[:300]
    except sqlite3.Error as exc:
        return str(exc) if is_corrupt(exc) else None
    finally:
        conn.close()


def corrupt_copies(home: Path) -> list[Path]:
    """Damaged databases moved aside (``index.sqlite3.corrupt-<time>``), for ``graphmem doctor``."""
    return sorted(p for p in Path(home).glob("index.sqlite3.corrupt-*")
                  if not p.name.endswith(("-wal", "-shm")))


def move_aside(home: Path, reason: str) -> Path | None:
    """Rename a damaged database and its ``-wal``/``-shm`` to ``index.sqlite3.corrupt-<time>``;
    journal its projects for a rebuild. None when another process already did (the database in
    place is sound)."""
    from .journal import Journal

    path = db_path(home)
    lock_fd = os.open(Path(home) / "index.heal.lock", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC
                      | os.O_NOFOLLOW, 0o600)
    try:
        fcntl.flock(lock_fd, fcntl.LOCK_EX)
        if check(home) is None:
            return None
        stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S%fZ")
        target = path.with_name(f"{path.name}.corrupt-{stamp}")
        os.replace(path, target)
        for suffix in ("-wal", "-shm", "-journal"):
            side = path.with_name(path.name + suffix)
            if side.exists():
                os.replace(side, target.with_name(target.name + suffix))
        projects = _salvage_projects(target)
        journal = Journal(home)
        for project in projects:
            journal.add_project(project)
        log.warning("graphmem: the local index %s was damaged (%s); moved it aside to %s and "
                    "rebuilding it from the files", path, reason, target.name)
        return target
    except OSError as exc:
        raise StorageError(f"cannot move the damaged index {path} aside: {exc}") from None
    finally:
        os.close(lock_fd)


def _salvage_projects(copy: Path) -> list[str]:
    """The project roots a damaged database's registry still yields (often none): ``root``
    where recorded (``path`` holds the project key since schema 3), else ``path``."""
    try:
        conn = sqlite3.connect(f"file:{copy}?mode=ro&immutable=1", uri=True)
        try:
            try:
                return [r[0] for r in conn.execute("SELECT COALESCE(root, path) FROM projects")]
            except sqlite3.OperationalError:  # a registry older than the root column
                return [r[0] for r in conn.execute("SELECT path FROM projects")]
        finally:
            conn.close()
    except sqlite3.Error:
        return []


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
                with transaction(conn):
                    done = conn.execute("SELECT 1 FROM schema_versions WHERE component=? AND version=?",
                                        (component, version)).fetchone()
                    if not done:
                        for stmt in _split(script):
                            conn.execute(stmt)
                        conn.execute("INSERT INTO schema_versions VALUES (?, ?, ?)",
                                     (component, version, time.time()))


@contextmanager
def transaction(conn: sqlite3.Connection, lock: threading.RLock | None = None, *,
                write: bool = True) -> Iterator[sqlite3.Connection]:
    """One transaction on ``conn`` (holding ``lock``, the connection's thread lock, if given):
    ``BEGIN IMMEDIATE`` (``write``; else a deferred ``BEGIN``: one consistent read snapshot),
    ``COMMIT`` at the end, ``ROLLBACK`` on any exception, which is re-raised."""
    with lock if lock is not None else nullcontext():
        conn.execute("BEGIN IMMEDIATE" if write else "BEGIN")
        try:
            yield conn
            conn.execute("COMMIT")
        except BaseException:
            try:
                conn.execute("ROLLBACK")
            except sqlite3.Error:  # SQLite already rolled back (a full disk, a damaged file)
                pass
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
