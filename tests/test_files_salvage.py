"""Salvage, don't hide (issue 14, finding 8): a damaged file keeps its good records readable, the
damaged original is kept aside and reported, and valid JSON of the wrong type is quarantined."""

from __future__ import annotations

import gc
import json
from pathlib import Path

import pytest

from graphmem import Memory
from graphmem.files import SpecStore
from graphmem.files.salvage import CorruptFileWarning

from reference_impl import load_reference, reference_file


def sides(path: Path) -> list[Path]:
    return sorted(path.parent.glob(f"{path.name}.corrupt-*"))


@pytest.mark.parametrize("kind", ["gotcha", "pattern"])
def test_one_bad_byte_keeps_every_other_bullet(spec_dir, kind, tmp_path):
    m = Memory(spec_dir)
    add = m.append_gotcha if kind == "gotcha" else m.append_pattern
    load = m.load_gotchas if kind == "gotcha" else m.load_patterns
    for text in ("first", "second", "third"):
        add(text)
    path = SpecStore(spec_dir).bullet_file(kind)
    original = path.read_bytes().replace(b"- second", b"- sec\xc3ond")
    path.write_bytes(original)
    with pytest.warns(CorruptFileWarning, match=path.name):
        assert load() == ["first", "sec\ufffdond", "third"]
    [side] = sides(path)
    assert side.read_bytes() == original
    assert SpecStore(spec_dir).corrupt_files() == [side]  # graphmem doctor lists it
    assert path.read_text(encoding="utf-8").endswith("- sec\ufffdond\n- third\n")
    if reference_file() is not None:  # the repaired file reads in the reference too
        ref = load_reference(tmp_path / "refmod")
        loader = ref.load_gotchas if kind == "gotcha" else ref.load_patterns
        assert loader(spec_dir) == ["first", "sec\ufffdond", "third"]


def test_a_bad_byte_appended_behind_the_cache_is_salvaged_too(spec_dir):
    m = Memory(spec_dir)
    m.append_gotcha("one")
    assert m.load_gotchas() == ["one"]  # cached: the next read only looks at new bytes
    path = spec_dir / "memory" / "gotchas.md"
    with open(path, "ab") as f:
        f.write(b"- two \xff\n")
    with pytest.warns(CorruptFileWarning):
        assert m.load_gotchas() == ["one", "two \ufffd"]
    assert m.append_gotcha("three").files == "written"
    assert m.load_gotchas() == ["one", "two \ufffd", "three"]


def test_session_insights_with_a_bad_byte_keep_their_other_fields(spec_dir):
    m = Memory(spec_dir)
    m.save_session_insights(1, {"what_worked": ["caching the schema"], "what_failed": ["naïve retry"]})
    path = spec_dir / "memory" / "session_insights" / "session_001.json"
    original = path.read_bytes().replace("naïve".encode(), b"na\xefve")  # a Latin-1 byte
    path.write_bytes(original)
    with pytest.warns(CorruptFileWarning, match="session_001.json"):
        [data] = m.load_all_insights()
    assert data["what_worked"] == ["caching the schema"]
    assert data["what_failed"] == ["na\ufffdve retry"]
    assert [s.read_bytes() for s in sides(path)] == [original]


def test_a_session_file_holding_a_list_is_quarantined_not_skipped(spec_dir):
    m = Memory(spec_dir)
    m.save_session_insights(1, {"what_worked": ["kept"]})
    path = spec_dir / "memory" / "session_insights" / "session_002.json"
    path.write_text(json.dumps([{"what_worked": ["in a list"]}]))
    original = path.read_bytes()
    with pytest.warns(CorruptFileWarning, match="session_002.json.*holds a JSON list"):
        assert [i["session_number"] for i in m.load_all_insights()] == [1]
    assert not path.exists()
    assert [s.read_bytes() for s in sides(path)] == [original]


def test_a_codebase_map_holding_a_list_is_kept_aside_never_overwritten(spec_dir):
    m = Memory(spec_dir)
    path = spec_dir / "memory" / "codebase_map.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps([{"src/a.py": "entry point"}]))
    original = path.read_bytes()
    with pytest.warns(CorruptFileWarning, match="codebase_map.json.*holds a JSON list"):
        m.update_codebase_map({"src/b.py": "helpers"})
    assert [s.read_bytes() for s in sides(path)] == [original]  # its content is not lost
    assert m.load_codebase_map() == {"src/b.py": "helpers"}
    path.write_text("[1, 2]")
    with pytest.warns(CorruptFileWarning, match="holds a JSON list"):
        assert m.load_codebase_map() == {}  # reading quarantines it as well
    assert len(sides(path)) == 2


@pytest.mark.parametrize("damage", [
    lambda raw: raw[: len(raw) // 2],  # cut in the middle
    lambda raw: b"[]",  # valid JSON, wrong type
    lambda raw: b"[" * 100_000 + b"]" * 100_000,  # nested deeper than json reads
])
def test_a_corrupt_session_json_keeps_its_turns_reachable(spec_dir, damage):
    m = Memory(spec_dir)
    sid = m.start_session(model="m1")
    m.record_turn(sid, "user", "How do I rotate the signing key for staging?")
    m.record_turn(sid, "assistant", "Run keyctl rotate --env staging, then restart the gateway")
    m.close()
    meta = spec_dir / "memory" / "episodes" / sid / "session.json"
    original = damage(meta.read_bytes())
    meta.write_bytes(original)
    m = Memory(spec_dir)
    gc.collect()  # garbage of earlier tests finalised at the parser's recursion limit would raise
    # there ("Exception ignored"), which pytest reports as this test's failure
    with pytest.warns(CorruptFileWarning, match="session.json"):
        session = m.get_session(sid)
    assert session["session_id"] == sid and session["turns"] == 2
    assert [t["content"] for t in m.get_session_history(sid)][1].startswith("Run keyctl rotate")
    assert sid in [s["session_id"] for s in m.list_recent_sessions()]
    [side] = sides(meta)
    rebuilt = json.loads(meta.read_text())
    assert side.read_bytes() == original
    assert rebuilt["status"] == "recovered" and rebuilt["recovered_from"] == side.name
    m.reindex()
    hits = m.search("rotate the signing key", kinds=["turn"], limit=2)
    assert hits and hits[0].session == sid
    m.record_turn(sid, "user", "thanks")  # the session goes on
    assert len(m.get_session_history(sid)) == 3
    m.close()


def test_a_session_json_moved_aside_earlier_is_rebuilt(spec_dir):
    m = Memory(spec_dir)
    sid = m.start_session()
    m.record_turn(sid, "user", "the turns survived")
    m.close()
    meta = spec_dir / "memory" / "episodes" / sid / "session.json"
    meta.rename(meta.with_name("session.json.corrupt-20260101T000000000000Z"))
    with Memory(spec_dir) as m:
        assert m.get_session(sid)["turns"] == 1
        assert json.loads(meta.read_text())["status"] == "recovered"
        assert m.get_session_history(sid)[0]["content"] == "the turns survived"
