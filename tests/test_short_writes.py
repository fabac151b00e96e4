"""A write that stops short (a full disk, a file size limit) never reports success and leaves no
torn line for the next append to cut (issue 35 finding 2).

Each case runs in a subprocess under ``RLIMIT_FSIZE`` with ``SIGXFSZ`` ignored, so that a write
crossing the limit returns a short count and the next one fails with ``EFBIG``, as on a full disk.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

LIGHT = {"GRAPHMEM_LOCAL_EMBEDDING_MODEL": "wordllama", "GRAPHMEM_LOCAL_LATE_INTERACTION": "off"}

PRELUDE = """
import json, os, resource, signal, sys
from pathlib import Path
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)

def limit(size):
    resource.setrlimit(resource.RLIMIT_FSIZE, (size, resource.RLIM_INFINITY))

def unlimit():
    resource.setrlimit(resource.RLIMIT_FSIZE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
"""


def _run(code: str, *args: str) -> dict:
    env = dict(os.environ, **LIGHT)
    proc = subprocess.run([sys.executable, "-c", PRELUDE + textwrap.dedent(code), *args],
                          capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_gotchas_acknowledged_under_a_size_limit_all_survive(spec_dir):
    got = _run("""
        from graphmem import Memory
        from graphmem.errors import StorageError
        m = Memory(Path(sys.argv[1]))
        m.append_gotcha("the first gotcha")
        path = Path(sys.argv[1]) / "memory" / "gotchas.md"
        limit(path.stat().st_size + 30)  # room for part of the next line only
        acked, refused = [], 0
        for i in range(6):
            text = f"gotcha number {i} written against a file size limit"
            try:
                m.append_gotcha(text)
                acked.append(text)
            except StorageError:
                refused += 1
        ends_whole = path.read_bytes().endswith(b"\\n")
        unlimit()
        m.append_gotcha("written after the disk had room again")  # repairs any torn tail
        have = m.load_gotchas()
        print(json.dumps({"acked": acked, "refused": refused, "have": have,
                          "ends_whole": ends_whole}))
    """, str(spec_dir))
    assert got["ends_whole"], "a refused append left a torn line"
    missing = [g for g in got["acked"] if g not in got["have"]]
    assert missing == [], f"acknowledged and lost: {missing}"
    assert got["refused"] >= 5, got  # at most one fits in 30 bytes: the rest are refused
    assert "written after the disk had room again" in got["have"]


def test_jsonl_append_is_whole_or_refused(tmp_path):
    path = tmp_path / "validity.jsonl"
    got = _run("""
        from graphmem.files import append_line
        from graphmem.errors import StorageError
        path = Path(sys.argv[1])
        append_line(path, json.dumps({"item": "a", "state": "retired"}))
        size = path.stat().st_size
        limit(size + 20)
        try:
            append_line(path, json.dumps({"item": "b" * 40, "state": "retired"}))
            outcome = "written"
        except StorageError as exc:
            outcome = "refused: " + str(exc)
        print(json.dumps({"outcome": outcome, "size": size, "after": path.stat().st_size}))
    """, str(path))
    assert got["outcome"].startswith("refused"), got
    assert "validity.jsonl" in got["outcome"]
    assert got["after"] == got["size"], "a torn line was left in the file"
    assert [json.loads(ln)["item"] for ln in path.read_text().splitlines()] == ["a"]


def test_journal_entry_cut_short_is_refused_not_dropped(tmp_path):
    home = tmp_path / "home"
    got = _run("""
        from graphmem.index.journal import Journal
        from graphmem.errors import StorageError
        j = Journal(Path(sys.argv[1]))
        limit(40)  # a journal entry is longer than this
        try:
            entry = j.begin("/some/project/" + "p" * 60, "spec-001")
            entry.release()
            outcome = "written"
        except StorageError as exc:
            outcome = "refused: " + str(exc)
        print(json.dumps({"outcome": outcome}))
    """, str(home))
    assert got["outcome"].startswith("refused"), got
    left = [p.name for p in (home / "index-journal").iterdir()] if (home / "index-journal").exists() else []
    assert left == [], f"a cut journal entry was left behind: {left}"
