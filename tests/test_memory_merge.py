"""Committed project memory merged with plain git: two branches that both learned things merge
(``git merge`` and ``git rebase``) with no conflict, nothing lost and nothing doubled. Real git,
real files, graphmem's own merge driver registered as ``graphmem hooks install`` does."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import run_cli
from graphmem import Memory
from graphmem.files.merge import merge3, register_driver, unconflict
from graphmem.files.spec_store import SpecStore
from graphmem.files.validity_log import validity_log
from test_code_freshness import commit, git

SHARED = 20
ADDED = 200  # per branch: 120 gotchas, 40 patterns, 30 map entries, 10 session insights


def repo(tmp_path: Path) -> tuple[Path, list[str], str]:
    """A repository whose committed project memory holds SHARED gotchas -> (root, their ids,
    the base branch)."""
    root = tmp_path / "proj"
    (root / "src").mkdir(parents=True)
    (root / "src" / "app.py").write_text("def main():\n    pass\n")
    git(root, "init", "-q")
    git(root, "config", "user.email", "t@example.invalid")
    git(root, "config", "user.name", "t")
    with Memory(None, root) as mem:
        for i in range(SHARED):
            mem.append_gotcha(f"Shared gotcha {word(i)} about src/app.py main")
        mem.save_session_insights(1, {"what_worked": ["the first session"]})
    commit(root, "base memory")
    ids = sorted(i.id for i in items(root) if i.kind == "gotcha")
    assert len(ids) == SHARED
    return root, ids, git(root, "symbolic-ref", "--short", "HEAD")


def items(root: Path) -> list:
    return list(SpecStore(root / ".graphmem", root).items())


def word(i: int) -> str:
    """A number spelt in letters: texts that differ by a number would state one fact with two
    values (value supersession), not two memories."""
    return "".join("abcdefghij"[int(d)] for d in f"{i:03d}")


def learn(root: Path, side: str, retire: list[str]) -> set[str]:
    """ADDED memories of several kinds learned on one branch, the shared ones retired -> the
    new items' ids. Sessions are numbered as the agent hooks number them."""
    before = {i.id for i in items(root)}
    with Memory(None, root) as mem:
        for i in range(120):
            mem.append_gotcha(f"Branch {side} gotcha {word(i)}: watch the retry loop of worker {word(i)}")
        for i in range(40):
            mem.append_pattern(f"Branch {side} pattern {word(i)}: handlers of kind {word(i)} go through a queue")
        mem.update_codebase_map({f"src/{side}/mod{i}.py": f"module {i} of {side}" for i in range(30)})
        for i in range(10):
            mem.save_session_insights(mem.files.next_session_number(),
                                      {"what_worked": [f"Branch {side} session lesson {word(i)}"]})
        for iid in retire:
            mem.retire(iid, f"no longer true on branch {side}")
    commit(root, f"learned on {side}")
    return {i.id for i in items(root)} - before


def check(root: Path, shared: list[str], added: set[str], base_ids: set[str]) -> None:
    """No conflict left, every item of both branches once, the shared ones retired once."""
    status = git(root, "status", "--porcelain")
    assert status == "", status
    memory = root / ".graphmem" / "memory"
    for path in memory.rglob("*"):
        if path.is_file() and not path.name.endswith(".lock"):
            assert "<<<<<<<" not in path.read_text(errors="replace"), path
    got = [i.id for i in items(root)]
    assert len(got) == len(set(got))
    assert set(got) - base_ids == added
    assert len(added) == 2 * ADDED
    for name in ("gotchas.md", "patterns.md"):
        bullets = [ln for ln in (memory / name).read_text().splitlines() if ln.startswith("- ")]
        assert len(bullets) == len(set(bullets)), f"a line of {name} is doubled"
    log = validity_log(root / ".graphmem")
    retired = sorted(k for k, ev in log.events.items() if ev["state"] == "retired")
    assert retired == shared
    lines = [json.loads(x) for x in (memory / "validity.jsonl").read_text().splitlines()]
    assert len([x for x in lines if x["state"] == "retired"]) == 2 * SHARED  # both kept, once each
    sessions = sorted(p.name for p in (memory / "session_insights").glob("session_*.json"))
    assert len(sessions) == 1 + 2 * 10, sessions  # the base's, and each branch's ten apart
    texts = {it.text for it in items(root) if it.kind == "insight"}
    for side in "ab":
        assert {f"Branch {side} session lesson {word(i)}" for i in range(10)} <= texts, sessions


@pytest.mark.parametrize("how", ["merge", "rebase"])
def test_two_branches_of_memory_merge_with_plain_git(tmp_path, how):
    root, shared, base = repo(tmp_path)
    register_driver(root, sys.executable)
    base_ids = {i.id for i in items(root)}
    git(root, "checkout", "-q", "-b", "a")
    added = learn(root, "a", shared)
    git(root, "checkout", "-q", "-b", "b", base)
    added |= learn(root, "b", shared)
    if how == "merge":
        git(root, "checkout", "-q", "a")
        out = subprocess.run(["git", "-C", str(root), "merge", "--no-edit", "b"],
                             capture_output=True, text=True)
    else:
        out = subprocess.run(["git", "-C", str(root), "rebase", "a"], capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr
    check(root, shared, added, base_ids)


def test_sessions_of_two_branches_keep_their_own_files_in_a_stable_order(tmp_path):
    root = tmp_path / "proj"
    (root / "src").mkdir(parents=True)
    (root / "src" / "app.py").write_text("def main():\n    pass\n")
    git(root, "init", "-q")
    git(root, "config", "user.email", "t@example.invalid")
    git(root, "config", "user.name", "t")
    commit(root, "start")
    register_driver(root, sys.executable)
    base = git(root, "symbolic-ref", "--short", "HEAD")
    for side in "ab":
        git(root, "checkout", "-q", "-b", side, base)
        with Memory(None, root) as mem:
            for n in (1, 2, 3):
                assert mem.files.next_session_number() == n
                mem.save_session_insights(n, {"what_worked": [f"{side} lesson {word(n)}"]})
            mem.save_session_insights(3, {"what_worked": [f"{side} lesson {word(3)} again"]})
        commit(root, f"sessions on {side}")
    other = tmp_path / "other"
    git(tmp_path, "clone", "-q", str(root), str(other))
    register_driver(other, sys.executable)
    git(other, "checkout", "-q", "b")
    git(root, "checkout", "-q", "a")
    out = subprocess.run(["git", "-C", str(root), "merge", "--no-edit", "b"], capture_output=True,
                         text=True)
    assert out.returncode == 0, out.stdout + out.stderr
    out = subprocess.run(["git", "-C", str(other), "merge", "--no-edit", "origin/a"],
                         capture_output=True, text=True)  # the other way round, elsewhere
    assert out.returncode == 0, out.stdout + out.stderr

    def read(where: Path) -> list[tuple[int, list[str]]]:
        sessions = SpecStore(where / ".graphmem", where).load_all_insights()
        return [(s["session_number"], s["what_worked"]) for s in sessions]

    got = read(root)
    assert len(got) == 6 and [n for n, _ in got] == [1, 1, 2, 2, 3, 3]
    assert sorted(w for _, ws in got for w in ws) == sorted(
        [f"{s} lesson {word(n)}" for s in "ab" for n in (1, 2)] + [f"{s} lesson {word(3)} again"
                                                                  for s in "ab"])
    assert all(len(ws) == 1 for _, ws in got)  # none merged into another
    assert read(other) == got  # the same order on every machine
    with Memory(None, root) as mem:
        assert mem.files.next_session_number() == 4
        summary = Path(mem.consolidate()["path"]).read_text()  # cites "session 1 (<writer>)"
    assert len(set(re.findall(r"session 1 \(([0-9a-f]{6})\)", summary))) == 2, summary
    names = sorted(p.name for p in (root / ".graphmem" / "memory" / "session_insights").iterdir())
    assert len(names) == 6 and all(len(n) == len("session_001-0123ab.json") for n in names)


def test_a_spec_folder_keeps_the_reference_names_and_old_files_keep_theirs(tmp_path):
    root, _, _ = repo(tmp_path)
    spec = root / "specs" / "001-x"
    spec.mkdir(parents=True)
    with Memory(spec, root) as mem:
        mem.save_session_insights(1, {"what_worked": ["in a spec"]})
    assert [p.name for p in (spec / "memory" / "session_insights").iterdir()] == ["session_001.json"]
    folder = root / ".graphmem" / "memory" / "session_insights"
    (folder / "session_002.json").write_text(json.dumps({"session_number": 2}))  # before tags
    with Memory(None, root) as mem:
        mem.save_session_insights(2, {"what_worked": ["saved again"]})
    assert json.loads((folder / "session_002.json").read_text())["what_worked"] == ["saved again"]
    assert len(list(folder.glob("session_002*"))) == 1


def test_without_the_driver_a_conflicted_map_is_read_whole_not_moved_aside(tmp_path):
    """A clone that never ran ``hooks install``: git merges the map as text and leaves markers;
    graphmem reads both sides instead of quarantining the file."""
    root, _, base = repo(tmp_path)
    git(root, "checkout", "-q", "-b", "a")
    with Memory(None, root) as mem:
        mem.update_codebase_map({"src/a.py": "side a"})
    commit(root, "a")
    git(root, "checkout", "-q", "-b", "b", base)
    with Memory(None, root) as mem:
        mem.update_codebase_map({"src/b.py": "side b"})
    commit(root, "b")
    out = subprocess.run(["git", "-C", str(root), "merge", "--no-edit", "a"],
                         capture_output=True, text=True)
    map_file = root / ".graphmem" / "memory" / "codebase_map.json"
    assert out.returncode != 0 and "<<<<<<<" in map_file.read_text()  # no driver: a conflict
    with Memory(None, root) as mem:
        got = mem.load_codebase_map()
    assert got["src/a.py"] == "side a" and got["src/b.py"] == "side b"
    assert map_file.exists()


def test_hooks_install_registers_the_driver_and_the_attributes(tmp_path):
    root, _, _ = repo(tmp_path)
    out = run_cli("hooks", "install", "--project-dir", str(root), "--json")
    assert out.returncode == 0, out.stderr
    assert "-m graphmem.cli merge-driver %O %A %B %P" in git(root, "config", "merge.graphmem.driver")
    attrs = git(root, "check-attr", "merge", "--", ".graphmem/memory/codebase_map.json",
                ".graphmem/memory/gotchas.md", ".graphmem/memory/session_insights/session_001.json")
    assert attrs.splitlines() == [
        ".graphmem/memory/codebase_map.json: merge: graphmem",
        ".graphmem/memory/gotchas.md: merge: union",
        ".graphmem/memory/session_insights/session_001.json: merge: graphmem"]
    assert run_cli("hooks", "uninstall", "--project-dir", str(root)).returncode == 0
    assert subprocess.run(["git", "-C", str(root), "config", "merge.graphmem.driver"],
                          capture_output=True).returncode == 1


def test_merge3_keeps_both_sides_and_what_one_side_removed_stays_removed():
    base = {"x": 1, "l": ["a", "b"], "m": {"k": "v"}}
    ours = {"x": 1, "l": ["a", "b", "c"], "m": {"k": "v", "o": 1}, "new": "o"}
    theirs = {"x": 2, "l": ["b", "d"], "m": {}}
    assert merge3(base, ours, theirs) == {"x": 2, "l": ["b", "c", "d"], "m": {"o": 1}, "new": "o"}
    assert merge3(None, {"t": "2026-01-01T00:00"}, {"t": "2026-02-01T00:00"}) == \
        {"t": "2026-02-01T00:00"}


def test_merge_driver_refuses_garbage_and_leaves_ours_untouched(tmp_path):
    base, ours, theirs = (tmp_path / n for n in ("o", "a", "b"))
    base.write_text("")
    ours.write_text('{"a": 1}')
    theirs.write_text("{not json")
    out = run_cli("merge-driver", str(base), str(ours), str(theirs), "x.json")
    assert out.returncode == 1
    assert ours.read_text() == '{"a": 1}'
    assert unconflict('{"a": 1}') is None


def test_after_a_merge_the_hooks_bring_the_index_up_to_date(tmp_path):
    """A teammate's memory (written in another home) arrives by ``git merge``: with the hooks
    installed, this home's search finds it without anyone running ``reindex``."""
    import time

    from graphmem import Settings

    root, _, base = repo(tmp_path)
    assert run_cli("hooks", "install", "--project-dir", str(root)).returncode == 0
    git(root, "checkout", "-q", "-b", "teammate")
    with Memory(None, root, settings=Settings.load(home=str(tmp_path / "their-home"))) as mem:
        mem.append_gotcha("Zeppelin uploads stall when the quota endpoint times out")
    commit(root, "their memory")
    git(root, "checkout", "-q", base)
    with Memory(None, root) as mem:  # this home never saw it
        assert not [h for h in mem.search("zeppelin uploads quota", limit=30) if "Zeppelin" in h.text]
    git(root, "merge", "-q", "--no-edit", "teammate")
    end = time.monotonic() + 90
    while time.monotonic() < end:
        out = run_cli("search", "zeppelin uploads quota", "--project-dir", str(root), "--json",
                      "--no-server", "--limit", "30")
        if "Zeppelin" in out.stdout:
            return
        time.sleep(1)
    raise AssertionError("the post-merge hook's reindex did not index the merged memory in 90 s")
