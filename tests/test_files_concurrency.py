"""Many processes writing one spec lose nothing and duplicate nothing; SIGKILL never tears a file."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

from graphmem import Memory

WRITER = Path(__file__).with_name("writer_proc.py")


def _spawn(spec: Path, worker: int, count: int) -> subprocess.Popen:
    # The subject is the file store; the derived index is written too, with the light static
    # embedder so that eight model loads do not dominate the run.
    env = dict(os.environ, GRAPHMEM_LOCAL_EMBEDDING_MODEL="wordllama")
    return subprocess.Popen([sys.executable, str(WRITER), str(spec), str(worker), str(count)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def _check_all_files_parse(spec: Path) -> None:
    mem = spec / "memory"
    for path in mem.rglob("*.json"):
        json.loads(path.read_text(encoding="utf-8"))
    for name, header in (("gotchas.md", "# Gotchas and Pitfalls"), ("patterns.md", "# Code Patterns")):
        path = mem / name
        if path.exists():
            text = path.read_text(encoding="utf-8")
            assert text.startswith(header) and text.endswith("\n")
            body = [ln for ln in text.split("\n")[4:] if ln]
            assert all(ln.startswith("- ") for ln in body), body[:3]
    assert not list(mem.rglob("*.corrupt-*"))


def _expect(acks: list[tuple[int, str]], spec: Path) -> None:
    m = Memory(spec)
    gotchas, patterns = m.load_gotchas(), m.load_patterns()
    cmap = m.load_codebase_map()
    sessions = {i["session_number"] for i in m.load_all_insights()}
    for op, value in acks:
        if op == 0:
            assert value in gotchas, value
        elif op == 1:
            assert value in patterns, value
        elif op == 2:
            assert value in cmap, value
        else:
            assert int(value) in sessions, value
    assert len(gotchas) == len(set(gotchas)) and len(patterns) == len(set(patterns))


def test_eight_processes_two_hundred_mixed_writes(spec_dir):
    workers, count = 8, 200
    procs = [_spawn(spec_dir, w, count) for w in range(workers)]
    acks = []
    for p in procs:
        out, err = p.communicate(timeout=240)
        assert p.returncode == 0, err[-2000:]
        acks += [(int(op), v) for _, op, v in (ln.split(" ", 2) for ln in out.splitlines())]
    assert len(acks) == workers * count
    _check_all_files_parse(spec_dir)
    _expect(acks, spec_dir)
    m = Memory(spec_dir)
    # exact counts: every unique item once, the shared gotchas once each
    assert len(m.load_gotchas()) == workers * 25 + len({i % 10 for i in range(0, count, 8)})
    assert len(m.load_patterns()) == workers * 50
    assert len(m.load_codebase_map()) == workers * 50
    assert len(m.load_all_insights()) == workers * 50
    meta = json.loads((spec_dir / "memory" / "codebase_map.json").read_text())["_metadata"]
    assert meta["total_files"] == workers * 50


def test_sigkill_at_random_points_never_tears_a_file(spec_dir):
    rng = random.Random(1234)
    acked: list[tuple[int, str]] = []
    for round_ in range(15):
        p = _spawn(spec_dir, round_, 10_000)
        first = p.stdout.readline()  # the writer is up and has written once
        assert first.startswith("ACK"), p.stderr.read()[-2000:]
        lines = [first]
        time.sleep(rng.uniform(0.0, 0.4))
        os.kill(p.pid, signal.SIGKILL)
        rest, _ = p.communicate(timeout=60)
        lines += rest.split("\n")[:-1]  # only newline-terminated ACKs count
        for line in lines:
            _, op, value = line.rstrip("\n").split(" ", 2)
            acked.append((int(op), value))
        _check_all_files_parse(spec_dir)
    assert len(acked) > 15
    _expect(acked, spec_dir)
