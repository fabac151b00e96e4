"""Episode files under stress: torn lines, corrupt lines, concurrent recorders, garbage inputs."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

from graphmem import AsyncMemory, Memory, NotFoundError, ValidationError
from graphmem.files.salvage import CorruptFileWarning


@pytest.fixture(autouse=True)
def fast_embedder(monkeypatch):
    monkeypatch.setenv("GRAPHMEM_LOCAL_EMBEDDING_MODEL", "wordllama")


def turns_file(spec: Path, sid: str) -> Path:
    return spec / "memory" / "episodes" / sid / "turns.jsonl"


def lines(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines()]


def test_torn_last_line_is_cut_on_read_and_earlier_lines_survive(spec_dir: Path):
    with Memory(spec_dir) as m:
        sid = m.start_session()
        ids = [m.record_turn(sid, "user", f"turn {i}", tokens=1) for i in range(3)]
    path = turns_file(spec_dir, sid)
    with open(path, "ab") as f:  # a power cut in the middle of an append
        f.write(b'{"index": 3, "id": "trn-torn", "at": "2026-01-01T00:00:00+00:00", "role": "us')
    with Memory(spec_dir) as m:
        with pytest.warns(CorruptFileWarning, match="torn last line"):
            history = m.get_session_history(sid)
        assert [t["id"] for t in history] == ids
        assert path.read_bytes().endswith(b"\n")
        [kept] = list(path.parent.glob("turns.jsonl.corrupt-torn-*"))
        assert kept.read_bytes().startswith(b'{"index": 3, "id": "trn-torn"')
        new = m.record_turn(sid, "assistant", "after the crash", tokens=1)
        assert [t["index"] for t in lines(path)] == [0, 1, 2, 3] and lines(path)[3]["id"] == new
        assert m.get_session(sid)["turns"] == 4
        assert m.end_session(sid)["total_tokens"] == 4
    from graphmem.files import SpecStore

    assert SpecStore(spec_dir).corrupt_files() == [kept]  # graphmem doctor reports it


def test_torn_line_is_repaired_by_the_next_append(spec_dir: Path):
    with Memory(spec_dir) as m:
        sid = m.start_session()
        m.record_turn(sid, "user", "one")
    path = turns_file(spec_dir, sid)
    with open(path, "ab") as f:
        f.write(b'{"index": 1, "id": "trn-half')
    with Memory(spec_dir) as m:
        with pytest.warns(CorruptFileWarning):
            m.record_turn(sid, "user", "two")
        assert [t["content"] for t in lines(path)] == ["one", "two"]
        assert [t["content"] for t in m.get_recent_turns(5, session_id=sid)] == ["one", "two"]


def test_a_corrupt_middle_line_is_reported_and_skipped(spec_dir: Path):
    with Memory(spec_dir) as m:
        sid = m.start_session()
        for i in range(3):
            m.record_turn(sid, "user", f"t{i}")
    path = turns_file(spec_dir, sid)
    raw = path.read_bytes().split(b"\n")
    raw[1] = b"\xff\xfe not json"
    path.write_bytes(b"\n".join(raw))
    with Memory(spec_dir) as m:
        with pytest.warns(CorruptFileWarning, match="line 2"):
            assert [t["content"] for t in m.get_session_history(sid)] == ["t0", "t2"]
        m.record_turn(sid, "user", "t3")
        assert lines_ok(path)[-1]["index"] == 3  # numbering counts every line, so ids stay unique


def lines_ok(path: Path) -> list[dict]:
    out = []
    for x in path.read_bytes().splitlines():
        try:
            out.append(json.loads(x))
        except ValueError:
            pass
    return out


def check_session(spec: Path, sid: str, expected: int) -> None:
    recs = lines(turns_file(spec, sid))
    assert len(recs) == expected
    assert [r["index"] for r in recs] == list(range(expected))
    assert len({r["id"] for r in recs}) == expected
    with Memory(spec) as m:
        assert m.get_session(sid)["turns"] == expected
        assert len(m.get_recent_turns(expected + 10, session_id=sid)) == expected
        assert m.end_session(sid)["total_tokens"] == expected


def test_concurrent_recorders_threads(spec_dir: Path):
    with Memory(spec_dir) as m:
        sid = m.start_session()
    errors: list[BaseException] = []

    def own_loop(n: int) -> None:  # each thread its own event loop and AsyncMemory
        async def go():
            async with AsyncMemory(spec_dir) as am:
                await asyncio.gather(*[am.record_turn(sid, "user", f"loop{n}-{i}", tokens=1)
                                       for i in range(25)])
        try:
            asyncio.run(go())
        except BaseException as exc:
            errors.append(exc)

    shared = Memory(spec_dir)

    def sync_calls(n: int) -> None:  # threads sharing one sync Memory
        try:
            for i in range(25):
                shared.record_turn(sid, "assistant", f"sync{n}-{i}", tokens=1)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=own_loop, args=(n,)) for n in range(3)]
    threads += [threading.Thread(target=sync_calls, args=(n,)) for n in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    shared.close()
    assert not errors
    check_session(spec_dir, sid, 150)


RECORDER = textwrap.dedent("""
    import sys
    from graphmem import Memory
    spec, sid, tag = sys.argv[1], sys.argv[2], sys.argv[3]
    with Memory(spec) as m:
        for i in range(30):
            m.record_turn(sid, "user", f"{tag}-{i}", tokens=1)
""")


def test_concurrent_recorders_processes(spec_dir: Path):
    with Memory(spec_dir) as m:
        sid = m.start_session()
    procs = [subprocess.Popen([sys.executable, "-c", RECORDER, str(spec_dir), sid, f"p{n}"],
                              stderr=subprocess.PIPE, text=True) for n in range(3)]
    for p in procs:
        _, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
    check_session(spec_dir, sid, 90)
    tags = {r["content"].rsplit("-", 1)[0] for r in lines(turns_file(spec_dir, sid))}
    assert tags == {"p0", "p1", "p2"}


BAD_TURNS = [
    (dict(role="", content="x"), "role"),
    (dict(role="   ", content="x"), "role"),
    (dict(role="user\nassistant", content="x"), "role"),
    (dict(role=None, content="x"), "role"),
    (dict(role=3, content="x"), "role"),
    (dict(role="user", content=""), "content"),
    (dict(role="user", content=" \n "), "content"),
    (dict(role="user", content=b"bytes"), "content"),
    (dict(role="user", content="nul\x00byte"), "content"),
    (dict(role="user", content=["a", "list"]), "content"),
    (dict(role="user", content="x", tokens=-1), "tokens"),
    (dict(role="user", content="x", tokens="12"), "tokens"),
    (dict(role="user", content="x", tokens=True), "tokens"),
    (dict(role="user", content="x", tokens=1.5), "tokens"),
    (dict(role="user", content="x", model=7), "model"),
    (dict(role="user", content="x", metadata=["not", "a", "dict"]), "metadata"),
    (dict(role="user", content="x", metadata={"n": float("nan")}), "metadata"),
    (dict(role="user", content="x", metadata={"s": {1, 2}}), "metadata"),
    (dict(role="user", content="x", at="yesterday"), "at"),
    (dict(role="user", content="x", at=-5), "at"),
    (dict(role="user", content="x", at=float("inf")), "at"),
    (dict(role="user", content="x", at=[2024]), "at"),
    (dict(role="user", content="x" * 1_000_001), "content"),
]


@pytest.mark.parametrize("kwargs,field", BAD_TURNS)
def test_garbage_turns_are_refused_and_nothing_is_written(spec_dir: Path, kwargs, field):
    with Memory(spec_dir) as m:
        sid = m.start_session()
        m.record_turn(sid, "user", "fine")
        path = turns_file(spec_dir, sid)
        before = path.read_bytes()
        with pytest.raises(ValidationError) as err:
            m.record_turn(sid, **kwargs)
        # the field, or the place inside it (``metadata.n``) where the value is wrong
        assert err.value.field == field or err.value.field.startswith(field + "."), err.value
        assert path.read_bytes() == before
        assert m.get_session(sid)["turns"] == 1


def test_garbage_everywhere_else(spec_dir: Path, monkeypatch):
    monkeypatch.setenv("GRAPHMEM_MAX_ITEM_BYTES", "2000")
    with Memory(spec_dir) as m:
        for bad in (None, 42, "", "../../etc", "a/b", "x" * 200):
            with pytest.raises(ValidationError, match="session_id"):
                m.record_turn(bad, "user", "x")
        with pytest.raises(NotFoundError):
            m.record_turn("ses-unknown", "user", "x")
        for call in (m.end_session, m.get_session_history, m.get_session_summary, m.delete_session):
            with pytest.raises(NotFoundError):
                call("ses-unknown")
        sid = m.start_session()
        with pytest.raises(ValidationError, match="content: is 2001 bytes"):
            m.record_turn(sid, "user", "y" * 2001)
        with pytest.raises(ValidationError) as err:
            m.record_step(sid, "build", "ok", payload={"log": "z" * 3000})
        assert err.value.field == "payload"
        for name, status, payload, field in (("", "ok", None, "name"), ("x", None, None, "status"),
                                             ("x", "ok", object(), "payload")):
            with pytest.raises(ValidationError) as err:
                m.record_step(sid, name, status, payload)
            assert err.value.field == field
        for bad, field in (({"model": 3}, "model"), ({"workspace": ""}, "workspace"),
                           ({"mode": ["x"]}, "mode"), ({"at": "noon"}, "at")):
            with pytest.raises(ValidationError) as err:
                m.start_session(**bad)
            assert err.value.field == field
        for bad in (None, "", 5):
            with pytest.raises(ValidationError, match="summary"):
                m.set_session_summary(sid, bad)
        for bad in (0, -1, "5", None, 10**9):
            with pytest.raises(ValidationError, match="limit"):
                m.get_recent_turns(bad)
        with pytest.raises(ValidationError, match="workspace"):
            m.list_recent_sessions(workspace=3)
        assert m.get_session_history(sid) == [] and m.get_session_steps(sid) == []
        assert len(m.list_recent_sessions()) == 1  # only the one good session was created


def test_cancelling_the_batch_leader_loses_no_turn(spec_dir: Path):
    async def run():
        async with AsyncMemory(spec_dir) as m:
            sid = await m.start_session()
            tasks = [asyncio.create_task(m.record_turn(sid, "user", f"c{i}")) for i in range(10)]
            await asyncio.sleep(0)  # every task has submitted; the first leads the batch
            tasks[0].cancel()
            results = await asyncio.gather(*tasks, return_exceptions=True)
            return sid, results

    sid, results = asyncio.run(run())
    assert isinstance(results[0], asyncio.CancelledError)
    assert all(isinstance(r, str) for r in results[1:])
    recs = lines(turns_file(spec_dir, sid))
    assert [r["content"] for r in recs] == [f"c{i}" for i in range(10)]  # durable, in order
    assert {r["id"] for r in recs} >= set(results[1:])
