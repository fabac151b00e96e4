"""The SQLite module: numbered migrations, applied once, again for a recreated database."""

from __future__ import annotations

import pytest

from graphmem.index import db


def test_migrations_apply_once_and_again_after_the_file_is_recreated(tmp_path):
    db.register_migrations("test_component", [(1, "CREATE TABLE t1 (x INTEGER)"),
                                              (2, "ALTER TABLE t1 ADD COLUMN y TEXT")])
    try:
        conn = db.connect(tmp_path)
        conn.execute("INSERT INTO t1 (x, y) VALUES (1, 'a')")
        versions = conn.execute("SELECT version FROM schema_versions WHERE component='test_component' "
                                "ORDER BY version").fetchall()
        assert [v[0] for v in versions] == [1, 2]
        conn.close()
        assert db.connect(tmp_path).execute("SELECT count(*) FROM t1").fetchone()[0] == 1
        for suffix in ("", "-wal", "-shm"):  # a user deletes the derived database
            (tmp_path / f"index.sqlite3{suffix}").unlink(missing_ok=True)
        conn = db.connect(tmp_path)
        assert conn.execute("SELECT count(*) FROM t1").fetchone()[0] == 0
    finally:
        db.MIGRATIONS.pop("test_component", None)


def test_migrations_must_be_numbered_from_one():
    with pytest.raises(ValueError, match="numbered 1..n"):
        db.register_migrations("bad", [(2, "SELECT 1")])


def test_a_transaction_commits_or_leaves_nothing_and_the_connection_writes_again(tmp_path):
    """The one transaction helper: a failure of any kind inside it (here a KeyboardInterrupt,
    which is no ``Exception``) undoes every statement of the block and is re-raised."""
    conn = db.connect(tmp_path)
    conn.execute("CREATE TABLE t (x INTEGER)")
    with db.transaction(conn):
        conn.execute("INSERT INTO t VALUES (1)")
    with pytest.raises(KeyboardInterrupt):
        with db.transaction(conn):
            conn.execute("INSERT INTO t VALUES (2)")
            conn.execute("DELETE FROM t WHERE x = 1")
            raise KeyboardInterrupt
    assert not conn.in_transaction
    assert [r[0] for r in conn.execute("SELECT x FROM t")] == [1]
    other = db.connect(tmp_path)  # what another connection sees: the first block only
    assert [r[0] for r in other.execute("SELECT x FROM t")] == [1]
    with db.transaction(conn):
        conn.execute("INSERT INTO t VALUES (3)")
    assert sorted(r[0] for r in other.execute("SELECT x FROM t")) == [1, 3]


def test_a_fresh_database_held_by_another_connection_is_waited_for_not_refused(tmp_path):
    """Switching a new database to WAL is refused at once, without SQLite's busy handler, while
    another connection holds its write lock (two processes or a write-behind thread opening a
    fresh home together); ``connect`` waits for it instead of failing "database is locked"."""
    import sqlite3
    import threading

    other = sqlite3.connect(db.db_path(tmp_path), isolation_level=None, check_same_thread=False)
    other.execute("CREATE TABLE t (x INTEGER)")  # a database still in rollback-journal mode
    other.execute("BEGIN IMMEDIATE")  # as another opener does while it switches to WAL
    other.execute("INSERT INTO t VALUES (1)")
    released = threading.Event()

    def release() -> None:
        released.set()
        other.execute("COMMIT")

    threading.Timer(0.3, release).start()
    conn = db.connect(tmp_path, busy_timeout=10)
    assert released.is_set()
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert [tuple(r) for r in conn.execute("SELECT x FROM t")] == [(1,)]
    conn.close()
    other.close()
