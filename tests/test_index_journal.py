"""Index writes lost to a crash or to contention are replayed from the files, and ``doctor``
shows and fixes index drift (issue 14 finding 7)."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from graphmem import Memory
from graphmem.index import db

from conftest import run_cli

WRITER = Path(__file__).with_name("writer_proc.py")
LIGHT = {"GRAPHMEM_LOCAL_EMBEDDING_MODEL": "wordllama", "GRAPHMEM_LOCAL_LATE_INTERACTION": "off"}


@pytest.fixture(autouse=True)
def light(monkeypatch):
    for key, value in LIGHT.items():
        monkeypatch.setenv(key, value)


def _journal(home: Path) -> list[str]:
    return sorted(p.name for p in (home / "index-journal").glob("*.json"))


def _drift(spec: Path) -> dict:
    doc = run_cli("doctor", "--spec-dir", str(spec), "--json")
    return {r["name"]: r for r in json.loads(doc.stdout)["sections"]["index"]}


def test_a_writer_killed_between_its_file_and_index_writes_is_found_by_search(spec_dir, isolated_env):
    with Memory(spec_dir) as m:
        m.append_gotcha("an earlier gotcha")  # the index exists and knows the project
    code = ("import sys; from graphmem import Memory\n"
            "m = Memory(sys.argv[1]); m.append_gotcha('killed writer gotcha about sockets')\n"
            "print('returned', flush=True)")
    holder = sqlite3.connect(db.db_path(isolated_env), isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # the writer's index transaction waits behind this one
    proc = subprocess.Popen([sys.executable, "-c", code, str(spec_dir)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=dict(os.environ))
    try:
        gotchas = spec_dir / "memory" / "gotchas.md"
        deadline = time.monotonic() + 60
        while "killed writer gotcha" not in gotchas.read_text() and time.monotonic() < deadline:
            time.sleep(0.02)
        assert "killed writer gotcha" in gotchas.read_text(), proc.stderr.read()[-2000:]
        time.sleep(0.3)  # well into its wait for the index's write lock
        assert proc.poll() is None
        os.kill(proc.pid, signal.SIGKILL)
        out, _ = proc.communicate(timeout=30)
        assert "returned" not in out
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert len(_journal(isolated_env)) == 1  # the entry outlived its process
    with Memory(spec_dir) as m:  # no reindex: the search replays the journal first
        hits = m.search("killed writer sockets", kinds=["gotcha"])
    assert [h.text for h in hits][:1] == ["killed writer gotcha about sockets"]
    assert _journal(isolated_env) == []


def test_a_save_that_finds_the_index_locked_says_failed_and_is_replayed(spec_dir, isolated_env,
                                                                       monkeypatch):
    monkeypatch.setenv("GRAPHMEM_INDEX_BUSY_TIMEOUT", "0.3")  # "database is locked" quickly
    with Memory(spec_dir) as m:
        m.append_gotcha("an earlier gotcha")
        sid = m.start_session()
    holder = sqlite3.connect(db.db_path(isolated_env), isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")  # another process's long write transaction
    try:
        with Memory(spec_dir) as m:
            report = m.append_gotcha("written while the index was locked")
            summary = m.set_session_summary(sid, "summary written while the index was locked")
        assert (report.files, report.index) == ("written", "failed")
        assert summary.index == "failed"
        assert "written while the index was locked" in (spec_dir / "memory" / "gotchas.md").read_text()
        assert len(_journal(isolated_env)) == 2  # one entry per write, kept for replay
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    with Memory(spec_dir) as m:  # the next process's search replays both from the files
        gotchas = [h.text for h in m.search("written while locked", kinds=["gotcha"])]
        facts = [h.text for h in m.search("summary written while locked", kinds=["fact"])]
    assert "written while the index was locked" in gotchas
    assert facts == ["summary written while the index was locked"]
    assert _journal(isolated_env) == []


def test_eight_writer_processes_leave_nothing_missing_from_the_index(spec_dir):
    workers, count = 8, 60
    env = dict(os.environ)
    procs = [subprocess.Popen([sys.executable, str(WRITER), str(spec_dir), str(w), str(count)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
             for w in range(workers)]
    acked = []
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err[-2000:]
        acked += [ln.split(" ", 2) for ln in out.splitlines()]
    assert len(acked) == workers * count
    with Memory(spec_dir) as m:
        gotcha = next(v for _, op, v in acked if op == "0" and v.startswith("gotcha w3"))
        assert gotcha in [h.text for h in m.search(gotcha, kinds=["gotcha"], limit=3)]
    rows = _drift(spec_dir)
    assert rows["drift"]["status"] == "ok", rows["drift"]
    assert rows["journal"]["status"] == "ok", rows["journal"]


def test_doctor_shows_index_drift_and_fix_repairs_it(spec_dir, isolated_env):
    with Memory(spec_dir) as m:
        m.append_gotcha("gotcha that stays")
        m.append_gotcha("gotcha removed by hand")
        m.update_codebase_map({"src/a.py": "module a", "src/b.py": "module b"})
    # drift both ways: two rows lost, one row whose line a user deleted from gotchas.md
    conn = sqlite3.connect(db.db_path(isolated_env))
    conn.execute("DELETE FROM search_items WHERE kind='file'")
    conn.commit()
    conn.close()
    path = spec_dir / "memory" / "gotchas.md"
    path.write_text(path.read_text().replace("- gotcha removed by hand\n", ""))

    rows = _drift(spec_dir)
    assert rows["drift"]["status"] == "warn"
    assert "3 item(s) in files, 2 in the index, 2 missing, 1 no longer in files" in rows["drift"]["detail"]
    assert "graphmem doctor --fix" in rows["drift"]["detail"]

    out = run_cli("doctor", "--fix", "--spec-dir", str(spec_dir), "--json")
    assert out.returncode == 0, out.stdout + out.stderr
    data = json.loads(out.stdout)
    assert data["fixed"]["index"][0]["added"] == 2 and data["fixed"]["index"][0]["removed"] == 1
    drift = {r["name"]: r for r in data["sections"]["index"]}["drift"]
    assert drift["status"] == "ok" and "3 item(s) in files, 3 in the index" in drift["detail"]
    with Memory(spec_dir) as m:
        assert "src/b.py: module b" in [h.text for h in m.search("module b", kinds=["file"])]
        assert not m.search("removed by hand", kinds=["gotcha"], limit=5) or all(
            h.text != "gotcha removed by hand" for h in m.search("removed by hand", kinds=["gotcha"]))


def test_fix_removes_only_stale_temp_files(spec_dir):
    with Memory(spec_dir) as m:
        m.append_gotcha("x")
    mem = spec_dir / "memory"
    old, new = mem / ".codebase_map.json.1a2b.tmp", mem / ".gotchas.md.3c4d.tmp"
    old.write_text("{")
    new.write_text("{")
    os.utime(old, (time.time() - 7200, time.time() - 7200))
    out = run_cli("doctor", "--fix", "--spec-dir", str(spec_dir), "--json")
    assert json.loads(out.stdout)["fixed"]["temp_files_removed"] == [str(old)]
    assert not old.exists() and new.exists()  # a fresh one may belong to a write in progress


def test_garbage_in_the_journal_is_dropped_and_a_link_never_followed(spec_dir, isolated_env, tmp_path):
    with Memory(spec_dir) as m:
        m.append_gotcha("a gotcha about garbage")
    journal = isolated_env / "index-journal"
    (journal / "00000000000000000001-garbage.json").write_bytes(b"\xff\x00 not json")
    (journal / "00000000000000000002-list.json").write_text("[1, 2]")
    target = tmp_path / "elsewhere.json"
    target.write_text(json.dumps({"project": str(tmp_path), "spec": None}))
    (journal / "00000000000000000003-link.json").symlink_to(target)
    stale, fresh = journal / ".000-old.json.ab12.tmp", journal / ".000-new.json.cd34.tmp"
    stale.write_text("{")
    fresh.write_text("{")
    os.utime(stale, (time.time() - 7200, time.time() - 7200))
    with Memory(spec_dir) as m:
        assert [h.text for h in m.search("garbage", kinds=["gotcha"])] == ["a gotcha about garbage"]
    assert _journal(isolated_env) == ["00000000000000000003-link.json"]  # left, never opened
    assert target.read_text().startswith("{")
    assert not stale.exists() and fresh.exists()  # a fresh one may be an entry being made


def test_doctor_fix_refuses_folders_that_do_not_exist(tmp_path):
    out = run_cli("doctor", "--fix", "--spec-dir", str(tmp_path / "nope"))
    assert out.returncode == 4 and "spec folder not found" in out.stderr, out.stderr
    out = run_cli("doctor", "--fix", "--project-dir", str(tmp_path / "nope"))
    assert out.returncode == 4 and "project folder not found" in out.stderr, out.stderr
    assert not (tmp_path / "nope").exists()
