"""A damaged ``index.sqlite3`` never breaks a write: it is moved aside and rebuilt from the files
(issue 14 finding 6). Every test failed on the old code with a raw ``sqlite3.DatabaseError``
(or, for doctor, with every row ok)."""

from __future__ import annotations

import json
import logging
import os
import sqlite3
from pathlib import Path

import pytest

from graphmem import Memory
from graphmem.index import db

from conftest import run_cli

LEXICAL = {"GRAPHMEM_LOCAL_EMBEDDING_MODEL": "wordllama", "GRAPHMEM_LOCAL_LATE_INTERACTION": "off"}


@pytest.fixture(autouse=True)
def lexical(monkeypatch):
    """The subject is the database, not the models: the light static embedder keeps these tests quick."""
    for key, value in LEXICAL.items():
        monkeypatch.setenv(key, value)


def _not_a_database(home: Path) -> None:
    path = db.db_path(home)
    for suffix in ("-wal", "-shm"):
        Path(str(path) + suffix).unlink(missing_ok=True)
    path.write_bytes(b"this is not an SQLite database, just garbage " * 200)


def _damage_pages(home: Path) -> None:
    """Keep the header page (the file still opens) and overwrite the pages after it."""
    path = db.db_path(home)
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    data = bytearray(path.read_bytes())
    assert len(data) > 3 * 4096
    for start in range(4096, len(data), 4096):
        data[start + 8:start + 4096] = b"\xa5" * (4096 - 8)
    path.write_bytes(bytes(data))


def _texts(hits) -> set[str]:
    return {h.text for h in hits}


def test_a_save_on_a_damaged_index_heals_it_and_finds_older_items(spec_dir, isolated_env, caplog):
    with Memory(spec_dir) as m:
        m.append_gotcha("tokens expire after one hour")
        m.update_codebase_map({"src/auth.py": "token refresh"})
    _not_a_database(isolated_env)
    with caplog.at_level(logging.WARNING, logger="graphmem.index"):
        with Memory(spec_dir) as m:
            report = m.append_gotcha("the cache needs a warm-up")  # raised DatabaseError before
            assert report.files == "written" and report.index == "indexed"
            hits = m.search("tokens cache auth warm-up expire", limit=10)
    assert {"tokens expire after one hour", "the cache needs a warm-up",
            "src/auth.py: token refresh"} <= _texts(hits)
    copies = db.corrupt_copies(isolated_env)
    assert len(copies) == 1 and copies[0].read_bytes().startswith(b"this is not an SQLite")
    damaged = [r for r in caplog.records if "was damaged" in r.getMessage()]
    assert len(damaged) == 1 and copies[0].name in damaged[0].getMessage()
    with Memory(spec_dir) as m:  # reported once: a sound index is not moved again
        m.append_gotcha("third one")
    assert len(db.corrupt_copies(isolated_env)) == 1


def test_record_turn_and_sessions_work_on_a_damaged_index(spec_dir, isolated_env):
    with Memory(spec_dir) as m:
        sid = m.start_session()
        m.record_turn(sid, "user", "first question about the parser")
    _not_a_database(isolated_env)
    with Memory(spec_dir) as m:
        m.record_turn(sid, "assistant", "the parser is recursive descent")
        assert [t["content"] for t in m.get_session_history(sid)] == [
            "first question about the parser", "the parser is recursive descent"]
        assert len(m.get_recent_turns(10, session_id=sid)) == 2
        assert len(m.search("parser recursive descent question", kinds=["turn"])) == 2


def test_a_damaged_page_found_by_a_search_is_healed(spec_dir, isolated_env):
    with Memory(spec_dir) as m:
        for i in range(300):
            m.append_pattern(f"pattern number {i} about retries and backoff {'x' * 200}")
    _damage_pages(isolated_env)
    with Memory(spec_dir) as m:  # the header page opens; the rows are "malformed"
        hits = m.search("pattern number 7 retries", limit=5)
    assert hits and all("retries" in h.text for h in hits)
    assert len(db.corrupt_copies(isolated_env)) == 1


def test_reindex_and_doctor_on_a_damaged_index(spec_dir, isolated_env):
    project = spec_dir.parent.parent  # the default: two levels above the spec
    with Memory(spec_dir) as m:
        m.append_gotcha("migrations run in one transaction")
    _not_a_database(isolated_env)
    doc = run_cli("doctor", "--spec-dir", str(spec_dir), "--json")
    assert doc.returncode == 1, doc.stdout + doc.stderr  # was 0: every row said ok
    rows = json.loads(doc.stdout)["sections"]["index"]
    assert rows[0]["name"] == "database" and rows[0]["status"] == "error"
    assert "damaged" in rows[0]["detail"]
    assert db.check(isolated_env) is not None  # doctor only looks; it moved nothing
    assert not db.corrupt_copies(isolated_env)

    out = run_cli("reindex", "--project-dir", str(project), "--json")  # crashed before
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["items"] == 1
    doc = run_cli("doctor", "--spec-dir", str(spec_dir), "--json")
    assert doc.returncode == 0, doc.stdout
    rows = {r["name"]: r for r in json.loads(doc.stdout)["sections"]["index"]}
    assert rows["damaged copy"]["status"] == "warn"
    assert rows["database"]["status"] == "ok"
    assert rows["drift"]["status"] == "ok" and "1 item(s) in files, 1 in the index" in rows["drift"]["detail"]


def test_two_processes_meeting_one_damaged_index_move_it_aside_once(spec_dir, isolated_env):
    with Memory(spec_dir) as m:
        m.append_gotcha("one")
    _not_a_database(isolated_env)
    import subprocess
    import sys

    code = ("import sys; from graphmem import Memory\n"
            "with Memory(sys.argv[1]) as m: print(m.append_gotcha(sys.argv[2]).index)")
    procs = [subprocess.Popen([sys.executable, "-c", code, str(spec_dir), f"gotcha {i}"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env=dict(os.environ)) for i in range(3)]
    outs = [p.communicate(timeout=120) for p in procs]
    assert [o.strip() for o, _ in outs] == ["indexed"] * 3, [e[-800:] for _, e in outs]
    assert len(db.corrupt_copies(isolated_env)) == 1
    with Memory(spec_dir) as m:
        assert {"one", "gotcha 0", "gotcha 1", "gotcha 2"} <= _texts(m.search("one gotcha", limit=10))
