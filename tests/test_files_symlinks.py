"""No symlink is followed under a memory folder: every link is refused and its target untouched.

Git checks symbolic links out, so a cloned repository can ship ``memory/gotchas.md`` pointing
anywhere. Each case plants a link, runs what graphmem would run, and checks that a
``StorageError`` named the link and that the target is byte-identical afterwards.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from graphmem import Memory
from graphmem.errors import StorageError
from graphmem.files.outbox import Outbox
from graphmem.models import MemoryItem


@pytest.fixture(autouse=True)
def fast_embedder(monkeypatch):
    monkeypatch.setenv("GRAPHMEM_LOCAL_EMBEDDING_MODEL", "wordllama")


def snapshot(root: Path) -> dict[str, bytes | str]:
    """Every file (its bytes), folder and link under ``root``, without following links."""
    out: dict[str, bytes | str] = {}
    for folder, dirs, files in os.walk(root):
        for name in dirs + files:
            path = Path(folder) / name
            rel = str(path.relative_to(root))
            if path.is_symlink():
                out[rel] = "link -> " + os.readlink(path)
            elif path.is_dir():
                out[rel] = "folder"
            else:
                out[rel] = path.read_bytes()
    return out


@pytest.fixture
def target(tmp_path: Path) -> Path:
    """What a planted link points at: someone's files, the last line without its newline."""
    t = tmp_path / "victim"
    (t / "sub").mkdir(parents=True)
    (t / "notes.txt").write_bytes(b"line one\nline two without newline")
    (t / "sub" / "keep.md").write_bytes(b"- keep me\n")
    return t


def memory(spec: Path) -> Path:
    return spec / "memory"


# ---- the memory folder itself ------------------------------------------------------------------
def test_clear_refuses_a_symlinked_memory_folder(spec_dir: Path, target: Path):
    memory(spec_dir).symlink_to(target, target_is_directory=True)
    before = snapshot(target)
    with pytest.raises(StorageError, match="memory.*symbolic link"):
        Memory(spec_dir).clear()
    r = subprocess.run([sys.executable, "-m", "graphmem.cli", "clear", "--spec-dir", str(spec_dir),
                        "--yes"], capture_output=True, text=True, timeout=120)
    assert r.returncode != 0 and "symbolic link" in r.stderr
    assert snapshot(target) == before
    assert memory(spec_dir).is_symlink()


def test_writes_and_reads_refuse_a_symlinked_memory_folder(spec_dir: Path, target: Path):
    memory(spec_dir).symlink_to(target, target_is_directory=True)
    before = snapshot(target)
    m = Memory(spec_dir)
    for write in (lambda: m.append_gotcha("planted"), lambda: m.append_pattern("planted"),
                  lambda: m.update_codebase_map({"a.py": "x"}),
                  lambda: m.save_session_insights(1, {"what_worked": ["x"]}),
                  lambda: m.load_gotchas(), lambda: m.load_codebase_map(),
                  lambda: m.load_all_insights()):
        with pytest.raises(StorageError, match="symbolic link"):
            write()
    with pytest.raises(StorageError, match="symbolic link"):
        Outbox(memory(spec_dir)).add([MemoryItem(id="x", kind="gotcha", text="t", project="p",
                                                 spec="s")])
    assert snapshot(target) == before


# ---- files in the memory folder ------------------------------------------------------------------
@pytest.mark.parametrize("name,kind", [("gotchas.md", "gotcha"), ("patterns.md", "pattern")])
def test_append_refuses_a_linked_bullet_file_and_never_cuts_its_target(spec_dir, target, name, kind):
    m = Memory(spec_dir)
    m.append_gotcha("a real one")  # the folder exists and is real
    (memory(spec_dir) / name).unlink(missing_ok=True)
    (memory(spec_dir) / name).symlink_to(target / "notes.txt")
    before = snapshot(target)
    with pytest.raises(StorageError, match=f"{name}.*symbolic link"):
        (m.append_gotcha if kind == "gotcha" else m.append_pattern)("planted line")
    with pytest.raises(StorageError, match="symbolic link"):  # nor read: it could be ~/.ssh/id_rsa
        (m.load_gotchas if kind == "gotcha" else m.load_patterns)()
    assert snapshot(target) == before


def test_codebase_map_link_is_not_read(spec_dir: Path, target: Path):
    m = Memory(spec_dir)
    m.append_gotcha("folder made")
    (target / "map.json").write_text('{"secret.py": "the secret"}')
    (memory(spec_dir) / "codebase_map.json").symlink_to(target / "map.json")
    before = snapshot(target)
    with pytest.raises(StorageError, match="codebase_map.json.*symbolic link"):
        m.load_codebase_map()
    with pytest.raises(StorageError, match="symbolic link"):
        m.update_codebase_map({"a.py": "x"})
    assert snapshot(target) == before


def test_dangling_lock_link_is_refused_not_created_through(spec_dir: Path, tmp_path: Path):
    memory(spec_dir).mkdir()
    planted = tmp_path / "created-through-the-link"
    (memory(spec_dir) / ".graphmem.lock").symlink_to(planted)
    with pytest.raises(StorageError, match=r"\.graphmem\.lock.*symbolic link"):
        Memory(spec_dir).append_gotcha("x")
    assert not planted.exists()


def test_outbox_link_is_refused(spec_dir: Path, target: Path):
    memory(spec_dir).mkdir()
    (memory(spec_dir) / "graph_outbox.jsonl").symlink_to(target / "notes.txt")
    before = snapshot(target)
    box = Outbox(memory(spec_dir))
    with pytest.raises(StorageError, match="symbolic link"):
        box.add([MemoryItem(id="x", kind="gotcha", text="t", project="p", spec="s")])
    with pytest.raises(StorageError, match="symbolic link"):
        box.entries()
    assert snapshot(target) == before


# ---- sub-folders ---------------------------------------------------------------------------------
def test_symlinked_session_insights_folder_gets_no_files(spec_dir: Path, target: Path):
    memory(spec_dir).mkdir()
    (memory(spec_dir) / "session_insights").symlink_to(target, target_is_directory=True)
    before = snapshot(target)
    m = Memory(spec_dir)
    with pytest.raises(StorageError, match="session_insights.*symbolic link"):
        m.save_session_insights(1, {"what_worked": ["x"]})
    with pytest.raises(StorageError, match="session_insights.*symbolic link"):
        m.load_all_insights()
    assert snapshot(target) == before


def test_symlinked_episodes_folder_gets_no_files(spec_dir: Path, target: Path):
    memory(spec_dir).mkdir()
    (memory(spec_dir) / "episodes").symlink_to(target, target_is_directory=True)
    before = snapshot(target)
    with Memory(spec_dir) as m:
        with pytest.raises(StorageError, match="episodes.*symbolic link"):
            m.start_session()
    assert snapshot(target) == before


def test_symlinked_session_folder_and_turns_file_are_refused(spec_dir: Path, target: Path):
    with Memory(spec_dir) as m:
        sid = m.start_session()
        m.record_turn(sid, "user", "first", tokens=1)
        folder = memory(spec_dir) / "episodes" / sid
        turns = folder / "turns.jsonl"
        turns.unlink()
        turns.symlink_to(target / "notes.txt")  # last line without a newline: a repair would cut it
        before = snapshot(target)
        with pytest.raises(StorageError, match="turns.jsonl.*symbolic link"):
            m.record_turn(sid, "user", "through the link", tokens=1)
        with pytest.raises(StorageError, match="turns.jsonl.*symbolic link"):
            m.get_session_history(sid)
        assert snapshot(target) == before

        other = m.start_session()
        real = memory(spec_dir) / "episodes" / other
        moved = target / "moved-session"
        os.replace(real, moved)
        real.symlink_to(moved, target_is_directory=True)
        before = snapshot(target)
        with pytest.raises(StorageError, match=f"{other}.*symbolic link"):
            m.record_turn(other, "user", "into the linked folder", tokens=1)
        assert snapshot(target) == before


# ---- clear -------------------------------------------------------------------------------------
def test_clear_deletes_only_graphmems_files_and_never_through_links(spec_dir: Path, target: Path):
    with Memory(spec_dir) as m:
        m.append_gotcha("g")
        m.append_pattern("p")
        m.update_codebase_map({"a.py": "x"})
        m.save_session_insights(1, {"what_worked": ["w"]})
        sid = m.start_session()
        m.record_turn(sid, "user", "hello", tokens=1)
    mem = memory(spec_dir)
    (mem / "README.txt").write_text("the user's own notes")  # foreign files stay
    (mem / "session_insights" / "mine.json").write_text("{}")
    (mem / "docs").mkdir()
    (mem / "docs" / "design.md").write_text("a foreign folder")
    (mem / "linked").symlink_to(target, target_is_directory=True)  # links stay, targets untouched
    (mem / "episodes" / "linked-session").symlink_to(target, target_is_directory=True)
    (mem / "session_insights" / "session_002.json").symlink_to(target / "notes.txt")
    before = snapshot(target)
    with Memory(spec_dir) as m:  # listings skip links: one planted link does not stop a search
        assert [i["session_number"] for i in m.load_all_insights()] == [1]
        assert m.search("hello", limit=5)
    Memory(spec_dir).clear()
    assert snapshot(target) == before
    left = snapshot(mem)
    assert left["README.txt"] == b"the user's own notes"
    assert left["session_insights/mine.json"] == b"{}"
    assert left["docs/design.md"] == b"a foreign folder"
    assert left["linked"].startswith("link -> ")
    assert left["episodes/linked-session"].startswith("link -> ")
    assert left["session_insights/session_002.json"].startswith("link -> ")
    for gone in ("gotchas.md", "patterns.md", "codebase_map.json", "session_insights/session_001.json",
                 f"episodes/{sid}"):
        assert gone not in left, gone


# ---- everything else that opens memory files ----------------------------------------------------
def test_consolidate_reads_no_linked_session_and_writes_into_no_linked_folder(spec_dir, target):
    (target / "secret.json").write_text(json.dumps({
        "session_number": 9, "discoveries": {"gotchas_encountered": ["the production password"]}}))
    with Memory(spec_dir) as m:
        m.save_session_insights(1, {"discoveries": {"gotchas_encountered": ["a real gotcha"]}})
        insights = memory(spec_dir) / "session_insights"
        (insights / "session_009.json").symlink_to(target / "secret.json")
        r = m.consolidate()
        assert r["sessions_scanned"] == 1
        text = (memory(spec_dir) / "memory_summary.md").read_text()
        assert "a real gotcha" in text and "production password" not in text
        other = spec_dir.parent / "002-other"
        other.mkdir()
        (other / "memory").symlink_to(target, target_is_directory=True)  # skipped, never read
        (spec_dir.parent.parent / ".graphmem").symlink_to(target, target_is_directory=True)
        before = snapshot(target)
        with pytest.raises(StorageError, match=r"\.graphmem.*symbolic link"):
            m.consolidate(project=True)  # the project summary's folder is a link: refused
    assert snapshot(target) == before


def test_doctor_and_compat_name_a_linked_memory_folder(spec_dir: Path, target: Path):
    from graphmem import compat

    memory(spec_dir).symlink_to(target, target_is_directory=True)
    before = snapshot(target)
    r = subprocess.run([sys.executable, "-m", "graphmem.cli", "doctor", "--spec-dir", str(spec_dir),
                        "--json"], capture_output=True, text=True, timeout=120)
    rows = [row for rows in json.loads(r.stdout)["sections"].values() for row in rows]
    [folder] = [row for row in rows if row["name"] == "memory folder"]
    assert folder["status"] == "error" and "symbolic link" in folder["detail"]
    with pytest.raises(StorageError, match="symbolic link"):
        compat.get_session_insights_dir(spec_dir)
    assert snapshot(target) == before


def test_a_fifo_in_place_of_a_memory_file_is_refused_without_hanging(spec_dir: Path):
    m = Memory(spec_dir)
    m.append_gotcha("the folder exists")
    (memory(spec_dir) / "patterns.md").unlink(missing_ok=True)
    os.mkfifo(memory(spec_dir) / "patterns.md")  # opened for reading it would block forever
    with pytest.raises(StorageError, match="patterns.md is not a regular file"):
        m.append_pattern("x")
    with pytest.raises(StorageError, match="patterns.md is not a regular file"):
        m.load_patterns()


def test_linked_validity_and_anchor_logs_are_refused(spec_dir: Path, target: Path):
    from graphmem.code.anchors import book
    from graphmem.files.validity_log import validity_log

    with Memory(spec_dir) as m:
        m.append_gotcha("Refunds over 500 EUR need a second approver")
        item = m.search("refund approver", kinds=["gotcha"], limit=1)[0].id
    for name in ("validity.jsonl", "anchors.jsonl"):
        (memory(spec_dir) / name).unlink(missing_ok=True)
        (memory(spec_dir) / name).symlink_to(target / "notes.txt")
    before = snapshot(target)
    with pytest.raises(StorageError, match="symbolic link"):
        validity_log(spec_dir)
    with pytest.raises(StorageError, match="symbolic link"):
        book(spec_dir)
    with Memory(spec_dir) as m, pytest.raises(StorageError, match="symbolic link"):
        m.retire(item, "the approval limit moved")
    assert snapshot(target) == before
