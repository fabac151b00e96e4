"""The record path: durable file append first, derived index rows from the background writer.

Reads in the same process see every write at once; a process killed with queued index rows loses
nothing, because the next open catches the indexes up from the files; with the graph on, a turn
that the graph cannot take waits in the outbox before ``record_turn`` returns.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from graphmem import AsyncMemory, Memory, Settings
from graphmem.errors import ValidationError
from graphmem.redact import _PATTERNS, redact_text, substitute

KILL_SCRIPT = r"""
import json, os, signal, sys
from pathlib import Path
from graphmem import Memory
from graphmem.index import db
from graphmem.index.episode_index.writer import writer

spec, home = Path(sys.argv[1]), Path(sys.argv[2])
m = Memory(spec)
sid = m.start_session()
# Hold the database's write lock so the background writer cannot apply anything: the turns are
# durable in the file and their index rows are still queued when the process dies.
blocker = db.connect(home)
blocker.execute("BEGIN IMMEDIATE")
ids = [m.record_turn(sid, "user" if i % 2 == 0 else "assistant",
                     f"turn {i}: the zebrafish aquarium heater is flaky") for i in range(5)]
m.record_step(sid, "pytest", "failed", {"failed": 3})
queued = writer().pending
print(json.dumps({"sid": sid, "ids": ids, "queued": queued}), flush=True)
os.kill(os.getpid(), signal.SIGKILL)
"""


def test_killed_process_with_queued_index_rows_is_caught_up(spec_dir: Path, isolated_env: Path):
    env = dict(os.environ, GRAPHMEM_LOCAL_EMBEDDING_MODEL="wordllama")
    res = subprocess.run([sys.executable, "-c", KILL_SCRIPT, str(spec_dir), str(isolated_env)],
                         capture_output=True, text=True, env=env, timeout=120)
    assert res.returncode == -signal.SIGKILL, res.stderr
    out = json.loads(res.stdout.strip().splitlines()[-1])
    assert out["queued"] == 6  # nothing derived was written before the kill
    lines = (spec_dir / "memory" / "episodes" / out["sid"] / "turns.jsonl").read_text().splitlines()
    assert [json.loads(x)["id"] for x in lines] == out["ids"]  # the acked turns are on disk

    project = spec_dir.parent.parent
    # A project-wide search (no spec folder given) catches the spec up through the index's list.
    with Memory(None, project) as p:
        hits = p.search("zebrafish aquarium heater", scope="project", kinds=["turn"])
    assert {h.metadata["turn_id"] for h in hits} == set(out["ids"])  # only 5 turns exist
    with Memory(spec_dir) as m:
        recent = m.get_recent_turns(10, session_id=out["sid"])
        session = m.get_session(out["sid"])
        steps = m.search("pytest failed", kinds=["step"])
    assert [t["id"] for t in recent] == out["ids"]
    assert session["turns"] == 5 and session["steps"] == 1
    assert session["first_prompt"].startswith("turn 0: the zebrafish")
    assert [h.metadata["step"] for h in steps] == ["pytest"]


def test_every_read_sees_the_writes_before_it(spec_dir: Path, monkeypatch):
    monkeypatch.setenv("GRAPHMEM_LOCAL_EMBEDDING_MODEL", "wordllama")
    words = ["aardvark", "bobsleigh", "cormorant", "dulcimer", "escarpment", "flamingo"]
    with Memory(spec_dir) as m:
        sid = m.start_session()
        for n, word in enumerate(words):
            tid = m.record_turn(sid, "user", f"note {n} mentions the {word}")
            assert m.search(word, kinds=["turn"])[0].metadata["turn_id"] == tid
            assert m.get_recent_turns(1)[0]["id"] == tid
            assert m.get_session(sid)["turns"] == n + 1
        assert m.list_recent_sessions()[0]["first_prompt"] == "note 0 mentions the aardvark"

    async def burst() -> list[str]:
        async with AsyncMemory(spec_dir) as am:
            ids = await asyncio.gather(*[am.record_turn(sid, "assistant", f"burst {i} gryphon")
                                         for i in range(40)])
            found = await am.search("gryphon burst", kinds=["turn"], limit=100)
            assert {h.metadata["turn_id"] for h in found} >= set(ids)
            assert len(await am.get_session_history(sid)) == 46
            return ids

    ids = asyncio.run(burst())
    with Memory(spec_dir) as m:  # a new Memory reads rows applied under the first one
        assert [t["id"] for t in m.get_recent_turns(40, session_id=sid)] == ids


def test_deleting_a_session_right_after_writing_leaves_no_rows(spec_dir: Path, monkeypatch):
    monkeypatch.setenv("GRAPHMEM_LOCAL_EMBEDDING_MODEL", "wordllama")
    with Memory(spec_dir) as m:
        sid = m.start_session()
        for i in range(20):
            m.record_turn(sid, "user", f"ephemeral walrus {i}")
        m.delete_session(sid)  # queued rows land first, then everything goes
        assert m.search("ephemeral walrus", kinds=["turn"]) == []
        assert m.get_recent_turns(5) == []
        assert m.list_recent_sessions() == []


def test_record_turns_checks_every_turn_before_writing(spec_dir: Path):
    with Memory(spec_dir) as m:
        sid = m.start_session()
        m.record_turn(sid, "user", "first")
        path = spec_dir / "memory" / "episodes" / sid / "turns.jsonl"
        before = path.read_bytes()
        good = {"role": "user", "content": "fine"}
        cases = [("nope", "turns"), ([], "turns"), ([good, "text"], "turns[1]"),
                 ([good, {"role": "user", "content": "x", "colour": "red"}], "turns[1]"),
                 ([good, good, good, {"role": "", "content": "x"}], "turns[3].role"),
                 ([good, {"role": "user", "content": 5}], "turns[1].content"),
                 ([good, {"role": "user", "content": "x", "tokens": -1}], "turns[1].tokens"),
                 ([good, {"role": "user", "content": "x", "at": "yesterday"}], "turns[1].at"),
                 ([good, {"role": "user", "content": "x", "metadata": {"v": float("nan")}}],
                  "turns[1].metadata.v"),
                 ([good] * 10_001, "turns")]
        for turns, field in cases:
            with pytest.raises(ValidationError) as err:
                m.record_turns(sid, turns)
            assert err.value.field == field, (field, str(err.value))
        with pytest.raises(ValidationError):
            m.record_turns("../x", [good])
        assert path.read_bytes() == before  # nothing partial

        ids = m.record_turns(sid, [{"role": "user", "content": f"imported {i}", "tokens": 2,
                                    "at": f"2024-01-0{i + 1}T10:00:00+00:00"} for i in range(3)])
        history = m.get_session_history(sid)
        assert [t["id"] for t in history[1:]] == ids and [t["index"] for t in history] == [0, 1, 2, 3]
        assert history[1]["at"].startswith("2024-01-01") and m.get_session(sid)["turns"] == 4
        assert m.end_session(sid)["total_tokens"] == 6


def _plain_redact(text: str) -> str:
    """Every pattern applied without the substring gate (what redact_text did before)."""
    for kind, pattern in _PATTERNS:
        text = substitute(kind, pattern, text)
    return text


def test_redaction_gate_changes_nothing():
    from test_redact import SECRETS

    variants = list(SECRETS.values())
    variants += ["AWS_SECRET_ACCESS_KEY: wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
                 "authorization: BEARER abcdefghijklmnop1234", "bearer\tabcdefghijklmnop1234",
                 "Aws_Secret_Key=wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY",
                 "https://hooks.slack.com/services/T000/B000/XXXX", "rk_test_" + "a" * 20,
                 "sk-ant-" + "b" * 30 + " and sk-" + "c" * 30, "ASIA" + "Q" * 16, "plain words only"]
    texts = []
    for i, v in enumerate(variants):
        other = variants[(i * 7 + 3) % len(variants)]
        texts += [v, f"pre {v} post", f"{v}\n{other}", f"x{v}", v.lower(), v.upper()]
    for text in texts:
        assert redact_text(text) == _plain_redact(text), text
    assert re.search(r"\[REDACTED:aws_secret_key\]", redact_text(variants[len(SECRETS)]))


def test_graph_down_turns_wait_in_the_outbox(spec_dir: Path, monkeypatch, isolated_env):
    from graphmem.files.outbox import Outbox
    from graphmem.graph import server

    monkeypatch.setenv("GRAPHMEM_GRAPH", "on")
    monkeypatch.setenv("GRAPHMEM_LOCAL_EMBEDDING_MODEL", "wordllama")
    settings = Settings.load(graph__retry_after=0.0)
    root = server.EmbeddedServer(settings).root
    try:
        with Memory(spec_dir, settings=settings) as m:
            sid = m.start_session()
            m.record_turn(sid, "user", "the graph is up for this one")
            assert server.EmbeddedServer(settings).stop()
            os.chmod(root, 0o500)  # the server cannot come back for now
            try:
                queued_id = m.record_turn(sid, "assistant", "the graph is down for this one")
                outbox = Outbox(m.files.memory_dir).pending_items()
            finally:
                os.chmod(root, 0o700)
            assert [i.metadata["turn_id"] for i in outbox] == [queued_id]
            m.record_turn(sid, "user", "back again")  # replays the outbox first
            assert Outbox(m.files.memory_dir).size() == 0
            drift = m.drift()
        assert drift["missing"] == [] and drift["in_graph"] == drift["files"] == 3
    finally:
        server.EmbeddedServer(Settings.load()).stop()


EXIT_SCRIPT = r"""
import sys
from pathlib import Path
from graphmem import Memory

m = Memory(Path(sys.argv[1]))  # never closed: the interpreter's exit flushes the queue
sid = m.start_session()
m.record_turns(sid, [{"role": "user", "content": f"exit flush {i}: the llama shearing rota"}
                     for i in range(20)])
print(sid, flush=True)
"""


def test_queued_rows_are_flushed_with_vectors_when_the_interpreter_exits(spec_dir: Path,
                                                                         isolated_env: Path):
    from graphmem.index.local_index import LocalIndex

    res = subprocess.run([sys.executable, "-c", EXIT_SCRIPT, str(spec_dir)], capture_output=True,
                         text=True, timeout=180)
    assert res.returncode == 0, res.stderr
    # Read the index directly, before any Memory could catch it up: the exit flush wrote the rows
    # and embedded them (the default embedder runs batches in a thread pool, which must still
    # take work at exit).
    idx = LocalIndex(isolated_env)
    try:
        assert idx.stats()["items"] == 20 and idx.stats()["vectors"] == 20
    finally:
        idx.close()
