"""The file store: atomic writes, corrupt files moved aside, bad input refused with nothing written."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from graphmem import Memory, ValidationError
from graphmem.files import atomic_write_text
from graphmem.files.salvage import CorruptFileWarning
from graphmem.models import stable_id


def snapshot(folder: Path) -> dict[str, bytes]:
    """Every file under ``folder`` (lock files aside) with its bytes."""
    if not folder.exists():
        return {}
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file() and not p.name.endswith(".lock")}


def test_round_trip(spec_dir):
    m = Memory(spec_dir)
    r = m.save_session_insights(3, {"what_worked": ["a"], "discoveries": {"files_understood": {"a.py": "A"}}})
    assert r.files == "written" and r.path.endswith("session_003.json") and r.items == 2
    m.update_codebase_map({"b.py": "B"})
    m.update_codebase_map({"b.py": "B2", "c/d.py": "D"})
    assert m.load_codebase_map() == {"b.py": "B2", "c/d.py": "D"}
    assert m.append_gotcha("  spaced  ").files == "written"
    assert m.append_gotcha("SPACED").files == "unchanged"  # normalised dedupe
    assert m.load_gotchas() == ["spaced"]
    assert m.load_all_insights()[0]["session_number"] == 3


def test_atomic_write_failure_leaves_old_file_and_no_temp(tmp_path, monkeypatch):
    tmp_path = tmp_path / "w"
    tmp_path.mkdir()
    target = tmp_path / "f.json"
    atomic_write_text(target, "old")

    def boom(*a, **k):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(OSError):
        atomic_write_text(target, "new")
    assert target.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["f.json"]


def test_atomic_temp_names_are_unique(tmp_path, monkeypatch):
    seen = []
    real = os.replace

    def spy(src, dst):
        seen.append(Path(src).name)
        return real(src, dst)

    monkeypatch.setattr(os, "replace", spy)
    for i in range(20):
        atomic_write_text(tmp_path / "x.json", str(i))
    assert len(set(seen)) == 20 and all(n.startswith(".x.json.") for n in seen)


def test_truncated_session_json_is_moved_aside_and_reads_go_on(spec_dir):
    m = Memory(spec_dir)
    m.save_session_insights(1, {"what_worked": ["ok"]})
    m.save_session_insights(2, {"what_worked": ["will break"]})
    bad = spec_dir / "memory" / "session_insights" / "session_002.json"
    bad.write_text(bad.read_text()[:25])
    with pytest.warns(CorruptFileWarning, match="session_002.json"):
        insights = m.load_all_insights()
    assert [i["session_number"] for i in insights] == [1]
    moved = list(bad.parent.glob("session_002.json.corrupt-*"))
    assert len(moved) == 1 and not bad.exists()
    from graphmem.cli.doctor import run_doctor

    report = run_doctor(spec_dir, None)
    assert any("session_002.json.corrupt-" in r["detail"] for r in report["sections"]["files"])


def test_invalid_utf8_gotchas_keep_their_good_bullets(spec_dir):
    """One bad byte no longer hides the whole file (issue 14, finding 8): see test_files_salvage."""
    m = Memory(spec_dir)
    m.append_gotcha("fine")
    path = spec_dir / "memory" / "gotchas.md"
    original = path.read_bytes() + b"- bad \xff\xfe bytes\n"
    path.write_bytes(original)
    with pytest.warns(CorruptFileWarning, match="gotchas.md"):
        assert Memory(spec_dir).load_gotchas() == ["fine", "bad \ufffd\ufffd bytes"]
    [side] = path.parent.glob("gotchas.md.corrupt-*")
    assert side.read_bytes() == original  # the damaged original, kept aside
    Memory(spec_dir).append_gotcha("after")
    assert Memory(spec_dir).load_gotchas() == ["fine", "bad \ufffd\ufffd bytes", "after"]


def test_corrupt_codebase_map_moved_aside_then_rewritten(spec_dir):
    m = Memory(spec_dir)
    m.update_codebase_map({"a.py": "A"})
    (spec_dir / "memory" / "codebase_map.json").write_text("{not json")
    with pytest.warns(CorruptFileWarning):
        m.update_codebase_map({"b.py": "B"})
    assert m.load_codebase_map() == {"b.py": "B"}
    assert list((spec_dir / "memory").glob("codebase_map.json.corrupt-*"))


def test_torn_last_bullet_is_ignored_then_repaired(spec_dir):
    m = Memory(spec_dir)
    m.append_gotcha("one")
    path = spec_dir / "memory" / "gotchas.md"
    with open(path, "ab") as f:
        f.write(b"- half a line")  # a power cut mid-append
    assert Memory(spec_dir).load_gotchas() == ["one"]
    Memory(spec_dir).append_gotcha("two")
    assert path.read_text().endswith("- one\n- two\n")


GARBAGE = [
    ("save_session_insights", (0, {}), "session_num"),
    ("save_session_insights", (-3, {}), "session_num"),
    ("save_session_insights", ("1", {}), "session_num"),
    ("save_session_insights", (True, {}), "session_num"),
    ("save_session_insights", (1, "not a dict"), "insights"),
    ("save_session_insights", (1, {"what_worked": "not a list"}), "insights.what_worked"),
    ("save_session_insights", (1, {"what_failed": [1, 2]}), "insights.what_failed[0]"),
    ("save_session_insights", (1, {"discoveries": {"gotchas_encountered": [None]}}),
     "insights.discoveries.gotchas_encountered[0]"),
    ("save_session_insights", (1, {"discoveries": {"files_understood": {"../../etc/passwd": "x"}}}),
     "insights.discoveries.files_understood"),
    ("save_session_insights", (1, {"discoveries": {"files_understood": {"a.py": 3}}}),
     "insights.discoveries.files_understood.a.py"),
    ("save_session_insights", (1, {"what_worked": ["nul\x00byte"]}), "insights.what_worked"),
    ("update_codebase_map", ({"/etc/passwd": "abs"},), "discoveries"),
    ("update_codebase_map", ({"a/../../b.py": "climbs out"},), "discoveries"),
    ("update_codebase_map", ({"a.py": ["list"]},), "discoveries.a.py"),
    ("update_codebase_map", (["a.py"],), "discoveries"),
    ("update_codebase_map", ({"_metadata": "x"},), "discoveries"),
    ("append_gotcha", (None,), "gotcha"),
    ("append_gotcha", (42,), "gotcha"),
    ("append_gotcha", (["a"],), "gotcha"),
    ("append_gotcha", ("",), "gotcha"),
    ("append_gotcha", ("two\nlines",), "gotcha"),
    ("append_pattern", ("nul\x00",), "pattern"),
    ("append_pattern", (b"bytes",), "pattern"),
]


@pytest.mark.parametrize("method,args,field", GARBAGE, ids=[f"{g[0]}-{i}" for i, g in enumerate(GARBAGE)])
def test_garbage_is_refused_naming_the_field_and_nothing_is_written(spec_dir, method, args, field):
    m = Memory(spec_dir)
    m.save_session_insights(1, {"what_worked": ["baseline"]})
    m.append_gotcha("baseline")
    before = snapshot(spec_dir)
    with pytest.raises(ValidationError) as err:
        getattr(m, method)(*args)
    assert err.value.field is not None and err.value.field.startswith(field), err.value
    assert str(err.value).startswith(err.value.field)
    assert snapshot(spec_dir) == before


def test_oversized_item_refused(spec_dir, monkeypatch):
    monkeypatch.setenv("GRAPHMEM_MAX_ITEM_BYTES", "1000")
    m = Memory(spec_dir)
    with pytest.raises(ValidationError, match="over the limit"):
        m.append_gotcha("x" * 2000)
    assert not (spec_dir / "memory" / "gotchas.md").exists()


def test_stable_ids_depend_on_scope_and_normalised_content(spec_dir):
    a = stable_id("/p", "/p/s", "gotcha", "Close  the DB")
    assert a == stable_id("/p", "/p/s", "gotcha", "close the db")
    assert a != stable_id("/q", "/q/s", "gotcha", "close the db")
    m = Memory(spec_dir)
    m.append_gotcha("Close the DB")
    m.save_session_insights(1, {"discoveries": {"gotchas_encountered": ["close the db"]}})
    ids = {i.id for i in m.items() if i.kind == "gotcha"}
    assert len(ids) == 1  # the same gotcha from two files is one item


def test_session_file_keys_match_reference(spec_dir):
    Memory(spec_dir).save_session_insights(7, {})
    data = json.loads((spec_dir / "memory" / "session_insights" / "session_007.json").read_text())
    assert list(data) == ["session_number", "timestamp", "subtasks_completed", "discoveries",
                          "what_worked", "what_failed", "recommendations_for_next_session"]
    assert data["discoveries"] == {"files_understood": {}, "patterns_found": [], "gotchas_encountered": []}


def test_bullet_cache_sees_rewrites_and_other_writers(spec_dir):
    m = Memory(spec_dir)
    m.append_gotcha("alpha")
    m.append_gotcha("beta")
    m.clear()
    m.append_gotcha("gamma")
    assert Memory(spec_dir).load_gotchas() == ["gamma"]
    path = spec_dir / "memory" / "gotchas.md"
    # another program rewrites the file in place with the same length
    text = path.read_text()
    path.write_text(text.replace("gamma", "delta"))
    assert m.load_gotchas() == ["delta"]
    with open(path, "a") as f:  # and another appends by hand
        f.write("- epsilon\n")
    assert m.load_gotchas() == ["delta", "epsilon"]
    assert m.append_gotcha("Epsilon").files == "unchanged"
