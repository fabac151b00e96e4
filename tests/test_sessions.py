"""Episodic sessions through the façade: lifecycle, ordering, tokens, first prompts, search, rebuild."""

from __future__ import annotations

import asyncio
import json
import os
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from graphmem import AsyncMemory, Memory, NotFoundError, ValidationError
from graphmem.index.db import db_path


@pytest.fixture(autouse=True)
def fast_embedder(monkeypatch):
    # The bundled static embedder: real vectors, a fraction of bge's cost per text.
    monkeypatch.setenv("GRAPHMEM_LOCAL_EMBEDDING_MODEL", "wordllama")


def session_dir(spec: Path, sid: str) -> Path:
    return spec / "memory" / "episodes" / sid


def test_lifecycle_round_trip(spec_dir: Path):
    with Memory(spec_dir) as m:
        sid = m.start_session(model="claude-x", mode="build")
        t0 = m.record_turn(sid, "user", "Add a retry to the upload client", tokens=12,
                           metadata={"channel": "cli"})
        m.record_turn(sid, "assistant", "Added tenacity retries around upload()", model="claude-x",
                      tokens=30)
        step = m.record_step(sid, "pytest", "passed", {"passed": 41, "failed": 0})
        m.set_session_summary(sid, "Retries added to the upload client; tests pass.")
        ended = m.end_session(sid)

        history = m.get_session_history(sid)
        assert [t["role"] for t in history] == ["user", "assistant"]
        assert history[0]["id"] == t0 and history[0]["index"] == 0
        assert history[0]["metadata"] == {"channel": "cli"}
        assert history[1]["model"] == "claude-x"
        steps = m.get_session_steps(sid)
        assert steps[0]["id"] == step and steps[0]["payload"] == {"passed": 41, "failed": 0}
        assert m.get_session_summary(sid) == "Retries added to the upload client; tests pass."
        assert ended["status"] == "ended" and ended["total_tokens"] == 42
        assert ended["workspace"] == str(m.project_dir) and ended["model"] == "claude-x"
        assert ended["mode"] == "build" and ended["turns"] == 2 and ended["steps"] == 1

    # The files are human-readable JSON and JSON Lines.
    folder = session_dir(spec_dir, sid)
    meta = json.loads((folder / "session.json").read_text())
    assert meta["status"] == "ended" and meta["total_tokens"] == 42
    lines = (folder / "turns.jsonl").read_text().splitlines()
    assert json.loads(lines[1])["content"] == "Added tenacity retries around upload()"
    assert json.loads((folder / "steps.jsonl").read_text())["name"] == "pytest"

    # A fresh Memory (another process, in effect) reads the same.
    with Memory(spec_dir) as m2:
        assert [t["id"] for t in m2.get_session_history(sid)] == [t["id"] for t in history]
        m2.delete_session(sid)
        assert not folder.exists()
        with pytest.raises(NotFoundError):
            m2.get_session_history(sid)
        assert m2.list_recent_sessions() == []


def test_turn_order_and_recent_turns(spec_dir: Path):
    base = datetime(2024, 3, 1, 9, 0, tzinfo=timezone.utc)
    with Memory(spec_dir) as m:
        a = m.start_session(at=base)
        b = m.start_session(at=base + timedelta(hours=1))
        for i in range(6):  # interleaved, imported with their real times
            m.record_turn(a, "user", f"a{i}", at=base + timedelta(minutes=2 * i))
            m.record_turn(b, "user", f"b{i}", at=(base + timedelta(minutes=2 * i + 1)).timestamp())
        assert [t["content"] for t in m.get_session_history(a)] == [f"a{i}" for i in range(6)]
        assert [t["index"] for t in m.get_session_history(b)] == list(range(6))
        recent = m.get_recent_turns(3)
        assert [t["content"] for t in recent] == ["b4", "a5", "b5"]  # oldest of the three first
        assert [t["content"] for t in m.get_recent_turns(2, session_id=a)] == ["a4", "a5"]
        assert recent[-1]["at"] == (base + timedelta(minutes=11)).isoformat()
        # Recorded order wins over timestamps within a session: an imported late line stays last.
        m.record_turn(a, "assistant", "late import", at=base - timedelta(days=1))
        assert m.get_session_history(a)[-1]["content"] == "late import"
        assert m.get_recent_turns(1, session_id=a)[0]["content"] == "late import"


def test_token_totals_and_first_prompts(spec_dir: Path):
    with Memory(spec_dir) as m:
        s1 = m.start_session(workspace="/work/alpha")
        m.record_turn(s1, "system", "You are a coding agent")
        m.record_turn(s1, "user", "Fix the flaky test", tokens=7)
        m.record_turn(s1, "assistant", "Done", tokens=5)
        m.record_turn(s1, "user", "Now the docs", tokens=4)
        s2 = m.start_session(workspace="/work/alpha")
        m.record_turn(s2, "user", "Second session prompt")
        s3 = m.start_session(workspace="/work/beta")
        m.record_turn(s3, "user", "Elsewhere")
        assert m.end_session(s1)["total_tokens"] == 16
        assert m.end_session(s2)["total_tokens"] == 0
        assert m.end_session(s1)["total_tokens"] == 16  # ending twice keeps the first end

        listed = m.list_recent_sessions("/work/alpha")
        assert [s["session_id"] for s in listed] == [s2, s1]  # most recent first
        assert [s["first_prompt"] for s in listed] == ["Second session prompt", "Fix the flaky test"]
        assert [s["first_prompt"] for s in m.list_recent_sessions("/work/beta")] == ["Elsewhere"]
        assert len(m.list_recent_sessions("/work/alpha", limit=1)) == 1
        assert m.list_recent_sessions() == []  # default workspace: this project folder
        with pytest.raises(ValidationError, match="session_id: session .* has ended"):
            m.record_turn(s1, "user", "too late")


def test_index_is_rebuilt_from_the_files(spec_dir: Path, isolated_env: Path):
    with Memory(spec_dir) as m:
        sid = m.start_session()
        for i in range(5):
            m.record_turn(sid, "user" if i % 2 == 0 else "assistant", f"turn {i}", tokens=1)
        m.end_session(sid)
    for suffix in ("", "-wal", "-shm"):
        Path(str(db_path(isolated_env)) + suffix).unlink(missing_ok=True)
    import graphmem.index.episode_index.tables as epi

    epi._open.clear()
    with Memory(spec_dir) as m:
        [row] = m.list_recent_sessions()
        assert row["session_id"] == sid and row["turns"] == 5 and row["total_tokens"] == 5
        assert row["first_prompt"] == "turn 0"
        assert [t["content"] for t in m.get_recent_turns(2)] == ["turn 3", "turn 4"]
        assert m.rebuild_episode_index() == 1


def test_turns_are_searchable_and_redacted(spec_dir: Path):
    with Memory(spec_dir) as m:
        sid = m.start_session()
        m.record_turn(sid, "user", "The staging database password rotation broke the deploy")
        m.record_turn(sid, "assistant", "Use the key sk-ant-api03-abcdefghijklmnopqrstuvwx to call")
        m.record_step(sid, "alembic upgrade", "failed", {"error": "relation missing"})
        hits = m.search("database password rotation", kinds=["turn"])
        assert hits and hits[0].kind == "turn" and hits[0].session == sid
        assert "rotation" in hits[0].text and hits[0].metadata["role"] == "user"
        steps = m.search("alembic upgrade failed", kinds=["step"])
        assert steps and steps[0].kind == "step" and "relation missing" in steps[0].text
        raw = (session_dir(spec_dir, sid) / "turns.jsonl").read_text()
        assert "sk-ant-" not in raw and "[REDACTED:anthropic_key]" in raw
        # reindex collects episode items too
        counts = m.reindex()
        assert counts["items"] >= 3
        assert m.search("database password rotation", kinds=["turn"])[0].session == sid
        m.delete_session(sid)
        assert not [h for h in m.search("database password rotation") if h.session == sid]
        m.reindex()
        assert not [h for h in m.search("database password rotation") if h.session == sid]


def test_event_hook_acks_only_durable_turns(spec_dir: Path):
    class Bus:  # the smallest real bus: acks an event once every handler has returned
        def __init__(self):
            self.handlers, self.acked = {}, []

        async def subscribe(self, name, fn):
            self.handlers.setdefault(name, []).append(fn)

        async def emit(self, name, data):
            for fn in self.handlers.get(name, []):
                self.acked.append(await fn(type("Event", (), {"data": data})()))

    async def run():
        async with AsyncMemory(spec_dir) as m:
            sid = await m.start_session()
            bus = Bus()
            await m.subscribe(bus)
            await asyncio.gather(*[bus.emit("ConversationTurn", {
                "session_id": sid, "role": "user" if i % 2 == 0 else "assistant",
                "content": f"emitted {i}", "tokens_used": 2}) for i in range(20)])
            with pytest.raises(ValidationError, match="content"):
                await bus.emit("ConversationTurn", {"session_id": sid, "role": "user", "content": ""})
            return sid, bus.acked

    sid, acked = asyncio.run(run())
    lines = (session_dir(spec_dir, sid) / "turns.jsonl").read_text().splitlines()
    assert sorted(json.loads(x)["id"] for x in lines) == sorted(acked) and len(acked) == 20
    assert sorted(json.loads(x)["index"] for x in lines) == list(range(20))
    with Memory(spec_dir) as m:
        assert m.end_session(sid)["total_tokens"] == 40


def test_cli_lists_sessions_and_shows_one(spec_dir: Path):
    from conftest import run_cli

    with Memory(spec_dir) as m:
        sid = m.start_session(model="m1")
        m.record_turn(sid, "user", "Explain the outbox")
        m.record_step(sid, "grep", "ok")
    out = run_cli("sessions", "--spec-dir", str(spec_dir), "--json")
    assert out.returncode == 0, out.stderr
    [row] = json.loads(out.stdout)
    assert row["session_id"] == sid and row["first_prompt"] == "Explain the outbox"
    show = run_cli("session", sid, "--spec-dir", str(spec_dir), "--json")
    assert show.returncode == 0, show.stderr
    data = json.loads(show.stdout)
    assert data["turns"][0]["content"] == "Explain the outbox" and data["steps"][0]["name"] == "grep"
    missing = run_cli("session", "ses-doesnotexist", "--spec-dir", str(spec_dir))
    assert missing.returncode == 4 and "ses-doesnotexist" in missing.stderr
    assert os.path.isdir(spec_dir / "memory" / "episodes")


def test_unsynced_mode_still_writes_whole_lines(spec_dir: Path, monkeypatch):
    monkeypatch.setenv("GRAPHMEM_EPISODES_FSYNC", "false")
    with Memory(spec_dir) as m:
        assert m.settings.episodes.fsync is False
        sid = m.start_session()
        ids = [m.record_turn(sid, "user", f"quick {i}") for i in range(3)]
    monkeypatch.setenv("GRAPHMEM_EPISODES_FSYNC", "yes-please")
    from graphmem import ConfigError

    with pytest.raises(ConfigError, match="episodes.fsync"):
        Memory(spec_dir)
    monkeypatch.delenv("GRAPHMEM_EPISODES_FSYNC")
    with Memory(spec_dir) as m:
        assert [t["id"] for t in m.get_session_history(sid)] == ids
