"""A compat write returns once its file and its index-journal entry are on disk; the index
follows in the background (issue 33 item 5): the process reads its own writes, a crash after the
acknowledgement loses nothing, garbage is refused with nothing left behind."""

from __future__ import annotations

import json
import os
import select
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from graphmem import Memory, compat
from graphmem.errors import ValidationError
from graphmem.index import db
from graphmem.settings import Settings

from conftest import run_cli

LIGHT = {"GRAPHMEM_LOCAL_EMBEDDING_MODEL": "wordllama", "GRAPHMEM_LOCAL_LATE_INTERACTION": "off"}

CHILD = """
import sys, time
from graphmem import compat
spec = sys.argv[1]
for n in (1, 2, 3):
    compat.save_session_insights(spec, n, {"what_worked": [f"acknowledged lesson {n} about sockets"]})
compat.append_gotcha(spec, "acknowledged gotcha about the connection pool")
compat.update_codebase_map(spec, {"src/pool.py": "acknowledged purpose: the connection pool"})
print("acked", flush=True)
time.sleep(120)
"""


@pytest.fixture(autouse=True)
def light(monkeypatch):
    for key, value in LIGHT.items():
        monkeypatch.setenv(key, value)


def _journal(home: Path) -> list[str]:
    return sorted(p.name for p in (home / "index-journal").glob("*.json"))


def _journal_row(spec: Path) -> dict:
    doc = run_cli("doctor", "--spec-dir", str(spec), "--json")
    rows = {r["name"]: r for r in json.loads(doc.stdout)["sections"]["index"]}
    return rows["journal"]


def _journal_emptied(home: Path) -> list[str]:
    """The journal once this process's last entry let go (a burst of writes shares one entry,
    deleted ``write_behind.LINGER`` seconds after its last write is indexed)."""
    from graphmem.facade import write_behind

    deadline = time.monotonic() + write_behind.LINGER + 30
    while _journal(home) and time.monotonic() < deadline:
        time.sleep(0.05)
    return _journal(home)


def test_writes_acknowledged_while_the_index_is_locked_survive_sigkill(spec_dir, isolated_env):
    with Memory(spec_dir) as m:
        m.append_gotcha("an earlier gotcha")  # the index exists and knows the project
    holder = sqlite3.connect(db.db_path(isolated_env), isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # every index write waits behind this transaction
    proc = subprocess.Popen([sys.executable, "-c", CHILD, str(spec_dir)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=dict(os.environ))
    try:
        assert proc.stdout is not None
        # acknowledged with the index locked: the writes never waited for its lock (an index
        # write in the write path would wait GRAPHMEM_INDEX_BUSY_TIMEOUT, 30 s, for each of five)
        ready, _, _ = select.select([proc.stdout], [], [], 60)
        line = proc.stdout.readline() if ready else ""
        running = _journal_row(spec_dir) if line.strip() == "acked" else {}
        os.kill(proc.pid, signal.SIGKILL)
        _, err = proc.communicate(timeout=30)
        assert line.strip() == "acked", err[-2000:]
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    # while the writer lived, doctor saw its entry as work in progress, not as a lost write
    assert running["status"] == "ok" and "being indexed" in running["detail"], running
    # the burst of five writes shared one entry; it outlived its process (none was indexed)
    assert len(_journal(isolated_env)) == 1
    dead = _journal_row(spec_dir)
    assert dead["status"] == "warn" and "not in the index yet" in dead["detail"], dead
    memory = spec_dir / "memory"
    assert len(list((memory / "session_insights").glob("session_*.json"))) == 3
    with Memory(spec_dir) as m:  # the search replays the journal from the files first
        texts = {h.text for h in m.search("acknowledged sockets connection pool", limit=20)}
    assert {"acknowledged lesson 1 about sockets", "acknowledged lesson 2 about sockets",
            "acknowledged lesson 3 about sockets",
            "acknowledged gotcha about the connection pool"} <= texts
    assert any("acknowledged purpose" in t for t in texts)
    assert _journal(isolated_env) == []


def test_the_process_reads_its_own_compat_writes_at_once(spec_dir, isolated_env):
    compat.save_session_insights(spec_dir, 1, {"what_worked": ["the frobnicator needs a warm cache"]})
    compat.append_gotcha(spec_dir, "Pin pytest to 7.4 in the CI image")
    compat.append_gotcha(spec_dir, "Pin pytest to 8.2 in the CI image")
    with Memory(spec_dir) as m:  # another Memory of this process: it settles the queue first
        warm = [h.text for h in m.search("frobnicator warm cache", limit=3)]
        hits = m.search("which pytest version is pinned in the CI image", limit=5)
    assert warm[:1] == ["the frobnicator needs a warm cache"]
    by_text = {h.text: h for h in hits}
    old, new = by_text["Pin pytest to 7.4 in the CI image"], by_text["Pin pytest to 8.2 in the CI image"]
    # the validity flag, computed behind the write, is there too
    assert old.metadata["validity"]["state"] == "possibly superseded"
    assert old.metadata["validity"]["by"] == new.id
    assert _journal_emptied(isolated_env) == []


def test_memory_with_write_behind_reports_the_index_queued(spec_dir, isolated_env):
    settings = Settings.load()
    settings.index.write_behind = True
    with Memory(spec_dir, settings=settings) as m:
        report = m.append_gotcha("queued gotcha about retries")
        assert (report.files, report.index, report.graph, report.items) == ("written", "queued",
                                                                            "off", 1)
        assert [h.text for h in m.search("queued gotcha retries", limit=1)] == [
            "queued gotcha about retries"]
    with Memory(spec_dir) as m:  # without it (the Memory default) the write is indexed in line
        assert m.append_pattern("inline pattern").index == "indexed"


@pytest.mark.parametrize("session_num, insights, field", [
    ("seven", {"what_worked": ["x"]}, "session_num"),
    (-1, {"what_worked": ["x"]}, "session_num"),
    (4, ["not", "a", "dict"], "insights"),
    (4, {"what_worked": {1, 2}}, "insights"),
])
def test_garbage_through_the_deferred_path_is_refused_and_leaves_nothing(
        spec_dir, isolated_env, session_num, insights, field):
    with pytest.raises(ValidationError) as err:
        compat.save_session_insights(spec_dir, session_num, insights)
    assert (err.value.field or "").split(".")[0] == field
    insights_dir = spec_dir / "memory" / "session_insights"
    assert not insights_dir.exists() or not list(insights_dir.iterdir())
    assert _journal(isolated_env) == []
    with pytest.raises(ValidationError):
        compat.update_codebase_map(spec_dir, {"src/a.py": 5})
    assert not (spec_dir / "memory" / "codebase_map.json").exists()
    assert _journal(isolated_env) == []


def test_a_failing_background_index_keeps_the_entry_for_the_next_process(spec_dir, isolated_env,
                                                                         monkeypatch):
    monkeypatch.setenv("GRAPHMEM_INDEX_BUSY_TIMEOUT", "0.3")  # "database is locked" quickly
    with Memory(spec_dir) as m:
        m.append_gotcha("an earlier gotcha")
    holder = sqlite3.connect(db.db_path(isolated_env), isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        compat.append_gotcha(spec_dir, "written behind a locked index")
        deadline = time.monotonic() + 30
        from graphmem.facade import write_behind

        while write_behind.pending() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert write_behind.pending() == 0
        assert len(_journal(isolated_env)) == 1  # the background write failed: kept for replay
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    with Memory(spec_dir) as m:
        assert "written behind a locked index" in [h.text for h in m.search(
            "written behind a locked index", kinds=["gotcha"], limit=3)]
    assert _journal(isolated_env) == []
    assert json.loads(json.dumps(compat.load_gotchas(spec_dir)))[-1] == "written behind a locked index"


@pytest.mark.parametrize("fsync, synced", [(None, True), ("false", False)])
def test_files_fsync_is_on_unless_turned_off(spec_dir, isolated_env, monkeypatch, fsync, synced):
    """A compat write syncs its file, its folder and its journal entry before it returns; with
    ``GRAPHMEM_FILES_FSYNC=false`` (opt-in) it syncs nothing and writes the same files."""
    if fsync is not None:
        monkeypatch.setenv("GRAPHMEM_FILES_FSYNC", fsync)
    calls: list[str] = []
    real_fsync, real_fdatasync = os.fsync, os.fdatasync

    def spy(real):
        def call(fd):
            calls.append(threading.current_thread().name)
            return real(fd)
        return call

    compat.append_gotcha(spec_dir, "warm-up")  # the loop, the index and the journal exist
    from graphmem.facade import write_behind

    while write_behind.pending():
        time.sleep(0.02)
    monkeypatch.setattr(os, "fsync", spy(real_fsync))
    monkeypatch.setattr(os, "fdatasync", spy(real_fdatasync))
    compat.save_session_insights(spec_dir, 7, {"what_worked": ["synced or not"]})
    compat.append_gotcha(spec_dir, "a gotcha synced or not")
    in_write = [c for c in calls if c != "graphmem-write-behind"]  # before each call returned
    assert bool(in_write) is synced, calls
    assert json.loads((spec_dir / "memory" / "session_insights" / "session_007.json").read_text())[
        "what_worked"] == ["synced or not"]
    assert compat.load_gotchas(spec_dir)[-1] == "a gotcha synced or not"


def test_compat_settings_follow_the_environment_and_config_file_between_calls(
        isolated_env, monkeypatch, tmp_path):
    """compat loads the settings again only when what they are read from changed (a load costs
    about a millisecond a call): each change is seen by the next call."""
    from graphmem.compat import _store

    monkeypatch.chdir(tmp_path)
    assert _store.settings().index.write_behind is True  # compat's default
    assert _store.settings() is _store.settings()  # nothing changed: not loaded again
    monkeypatch.setenv("GRAPHMEM_INDEX_WRITE_BEHIND", "false")
    assert _store.settings().index.write_behind is False
    monkeypatch.delenv("GRAPHMEM_INDEX_WRITE_BEHIND")
    (tmp_path / "graphmem.toml").write_text("[index]\nwrite_behind = false\n")
    assert _store.settings().index.write_behind is False
    (tmp_path / "graphmem.toml").write_text("[index]\nwrite_behind = true\nbusy_timeout = 7\n")
    assert _store.settings().index.busy_timeout == 7
    (tmp_path / "graphmem.toml").write_text("[index]\nwrite_behind = [\n")
    with pytest.raises(Exception, match="graphmem.toml"):
        _store.settings()
