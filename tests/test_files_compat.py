"""graphmem reads what the reference wrote, and the reference reads what graphmem writes."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from graphmem import compat
from graphmem import Memory

from reference_impl import load_reference, reference_file, skip_reason

FIXTURE = Path(__file__).parent / "fixtures" / "reference_spec"


@pytest.fixture
def ref(tmp_path):
    """The reference module; tests that need it skip (saying what to set) when it is absent."""
    if reference_file() is None:
        pytest.skip(skip_reason())
    return load_reference(tmp_path / "refmod")


@pytest.fixture
def ref_spec(tmp_path) -> Path:
    """A copy of a memory folder that the reference implementation wrote."""
    dst = tmp_path / "proj" / "specs" / "001"
    shutil.copytree(FIXTURE, dst)
    return dst


def test_graphmem_reads_reference_folder(ref_spec):
    m = Memory(ref_spec)
    insights = m.load_all_insights()
    assert [i["session_number"] for i in insights] == [1, 2]
    assert insights[0]["discoveries"]["gotchas_encountered"] == ["Must close DB connections in workers"]
    assert m.load_codebase_map() == {
        "src/api/auth.py": "Handles JWT authentication and token validation",
        "src/models/user.py": "User database model with password hashing"}
    assert m.load_gotchas() == ["Database connections must be explicitly closed in workers",
                                "API rate limits: 100 req/min per IP"]
    assert m.load_patterns()[1] == "All API responses use {success: bool, data: any, error: string}"
    s = m.summary()
    assert (s["total_sessions"], s["total_files_mapped"], s["total_patterns"], s["total_gotchas"]) == (2, 2, 2, 2)


def test_graphmem_appends_to_reference_folder_without_duplicates(ref_spec):
    m = Memory(ref_spec)
    assert m.append_gotcha("API rate limits: 100 req/min per IP").files == "unchanged"
    m.append_gotcha("Workers must not share sessions")
    text = (ref_spec / "memory" / "gotchas.md").read_text()
    assert text.startswith("# Gotchas and Pitfalls\n\nThings to watch out for in this codebase:\n\n")
    assert text.count("- API rate limits") == 1
    assert text.endswith("- Workers must not share sessions\n")


def test_reference_reads_graphmem_folder(ref, spec_dir):
    m = Memory(spec_dir)
    insights = {
        "subtasks_completed": ["subtask-1"],
        "discoveries": {"files_understood": {"src/a.py": "entry point"},
                        "patterns_found": ["p1"], "gotchas_encountered": ["g1"]},
        "what_worked": ["w"], "what_failed": ["f"], "recommendations_for_next_session": ["r"],
    }
    m.save_session_insights(1, insights)
    m.save_session_insights(2, {"what_worked": ["second"]})
    m.update_codebase_map({"src/a.py": "entry point", "src/b.py": "helpers"})
    m.update_codebase_map({"src/c.py": "more"})
    for g in ["g1", "g2", "g1"]:
        m.append_gotcha(g)
    for p in ["p1", "p2"]:
        m.append_pattern(p)

    loaded = ref.load_all_insights(spec_dir)
    assert [i["session_number"] for i in loaded] == [1, 2]
    assert loaded[0]["discoveries"] == insights["discoveries"]
    assert set(loaded[0]) >= {"session_number", "timestamp", "subtasks_completed", "discoveries",
                              "what_worked", "what_failed", "recommendations_for_next_session"}
    assert ref.load_codebase_map(spec_dir) == {"src/a.py": "entry point", "src/b.py": "helpers",
                                               "src/c.py": "more"}
    raw = json.loads((spec_dir / "memory" / "codebase_map.json").read_text())
    assert raw["_metadata"]["total_files"] == 3 and "last_updated" in raw["_metadata"]
    assert ref.load_gotchas(spec_dir) == ["g1", "g2"]
    assert ref.load_patterns(spec_dir) == ["p1", "p2"]
    # The reference's own dedupe sees graphmem's bullets: appending an existing one adds nothing.
    ref.append_gotcha(spec_dir, "g2")
    assert ref.load_gotchas(spec_dir) == ["g1", "g2"]
    assert ref.get_memory_summary(spec_dir)["total_sessions"] == 2


def test_files_are_byte_compatible_with_reference_output(ref, tmp_path):
    """Same inputs through both implementations give the same bullet files and map layout."""
    a, b = tmp_path / "a" / "s" / "1", tmp_path / "b" / "s" / "1"
    a.mkdir(parents=True), b.mkdir(parents=True)
    for spec, mod in ((a, ref), (b, compat)):
        mod.append_gotcha(spec, "first gotcha")
        mod.append_gotcha(spec, "second gotcha")
        mod.append_pattern(spec, "a pattern")
        mod.update_codebase_map(spec, {"x.py": "X", "a.py": "A"})
    for name in ("gotchas.md", "patterns.md"):
        assert (a / "memory" / name).read_text() == (b / "memory" / name).read_text()
    ja = json.loads((a / "memory" / "codebase_map.json").read_text())
    jb = json.loads((b / "memory" / "codebase_map.json").read_text())
    ja["_metadata"].pop("last_updated"), jb["_metadata"].pop("last_updated")
    assert ja == jb
    assert list(jb) == sorted(jb)  # keys sorted like the reference


def test_session_discoveries_stay_in_the_session_file_as_in_the_reference(ref, tmp_path):
    """The reference's save_session_insights writes only session_NNN.json: files_understood,
    patterns_found and gotchas_encountered reach neither the map nor the bullet files. graphmem
    does the same, and the README's table of what is kept says so."""
    insights = {"discoveries": {"files_understood": {"src/db.py": "connection pool"},
                                "patterns_found": ["pool per worker"],
                                "gotchas_encountered": ["close the pool"]}}
    a, b = tmp_path / "a" / "s" / "1", tmp_path / "b" / "s" / "1"
    a.mkdir(parents=True), b.mkdir(parents=True)
    for spec, mod in ((a, ref), (b, compat)):
        mod.update_codebase_map(spec, {"src/app.py": "entry point"})
        mod.save_session_insights(spec, 1, insights)
    for name in ("load_codebase_map", "load_patterns", "load_gotchas"):
        assert getattr(compat, name)(b) == getattr(ref, name)(a), name
    assert compat.load_codebase_map(b) == {"src/app.py": "entry point"}
    assert compat.load_all_insights(b)[0]["discoveries"] == insights["discoveries"]
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
    kept = [line for line in readme.splitlines() if line.startswith("| ") and "/memory/" in line]
    for line in kept:
        if any(name in line for name in ("codebase_map.json", "patterns.md", "gotchas.md")):
            assert "session discoveries" not in line, line


def test_compat_has_reference_signatures(ref):
    import inspect

    for name in compat.__all__:
        assert inspect.signature(getattr(compat, name)).parameters.keys() == \
            inspect.signature(getattr(ref, name)).parameters.keys(), name


def test_compat_round_trip_and_clear(spec_dir):
    compat.save_session_insights(spec_dir, 1, {"what_worked": ["x"]})
    compat.append_gotcha(spec_dir, "   ")  # ignored, like the reference
    assert compat.load_gotchas(spec_dir) == []
    assert compat.get_memory_summary(spec_dir)["total_sessions"] == 1
    assert compat.get_session_insights_dir(spec_dir) == spec_dir / "memory" / "session_insights"
    assert compat.is_graphiti_memory_enabled() is False
    compat.clear_memory(spec_dir)
    assert compat.load_all_insights(spec_dir) == []
    assert compat.get_memory_summary(spec_dir)["total_sessions"] == 0
