"""The untracked files of a git snapshot are listed again exactly when something that could change
them changed (``code/tree_watch.py``), on real repositories built here.

Each change is checked with the time-to-live both long past (0) and never reached (1e9, so only
the watch can notice it); ``git ls-files -o`` runs are counted by wrapping ``subprocess.run``
(it still runs git)."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest

from graphmem.code import tree

PAY = "def refund(order):\n    return order.total\n"


def git(root: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True,
                          text=True).stdout.strip()


def repo(tmp_path: Path) -> Path:
    """A committed repository with tracked, untracked, ignored files and an empty folder."""
    root = tmp_path / "proj"
    files = {"src/pay.py": PAY, "src/deep/ledger.py": PAY, ".gitignore": "*.log\nbuild/\n",
             "docs/notes.txt": "x\n"}
    for path, text in files.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text)
    git(root, "init", "-q")
    git(root, "config", "user.email", "t@example.invalid")
    git(root, "config", "user.name", "t")
    git(root, "add", "src", ".gitignore")
    git(root, "commit", "-q", "-m", "start")
    (root / "src" / "draft.py").write_text("def draft():\n    return 1\n")  # untracked
    (root / "build" / "gen").mkdir(parents=True)
    (root / "build" / "gen" / "out.py").write_text("generated = 1\n")  # ignored
    (root / "logs").mkdir()
    (root / "logs" / "run.log").write_text("noise\n")  # a folder of ignored files only
    (root / "empty").mkdir()
    (root / "src" / "deep" / "later").mkdir()  # an empty folder beside tracked files
    (root / "vendored" / "lib").mkdir(parents=True)  # a nested repository: git lists it whole
    git(root / "vendored" / "lib", "init", "-q")
    time.sleep(0.05)  # older than the racy margin: the first listing can be trusted
    return root


@pytest.fixture
def listings(monkeypatch):
    """How many ``git ls-files -o`` ran (subprocess.run wrapped to count, git runs)."""
    runs = []
    real = subprocess.run

    def counting(args, *a, **kw):
        if "ls-files" in args and "-o" in args:
            runs.append(args)
        return real(args, *a, **kw)

    monkeypatch.setattr(subprocess, "run", counting)
    return runs


@pytest.fixture
def listed(tmp_path, tune_code) -> Path:
    """``repo`` read once, with the time-to-live always past."""
    tune_code(untracked_ttl=0.0)
    root = repo(tmp_path)
    untracked(root)
    return root


def untracked(root: Path) -> dict[str, str]:
    snap = tree.snapshot(root, max_age=0)
    return {p: b for p, b in snap.files.items() if p in snap.untracked}


def blob(root: Path, path: str) -> str:
    return git(root, "hash-object", path)


def _new_file(root: Path) -> None:
    (root / "src" / "fresh.py").write_text("x = 1\n")


def _deleted(root: Path) -> None:
    (root / "src" / "draft.py").unlink()


def _renamed(root: Path) -> None:
    (root / "src" / "draft.py").rename(root / "src" / "deep" / "draft2.py")


def _new_subdir(root: Path) -> None:
    (root / "src" / "cli").mkdir()
    (root / "src" / "cli" / "flags.py").write_text("flags = 1\n")


def _nested_dirs(root: Path) -> None:
    (root / "src" / "a" / "b" / "c").mkdir(parents=True)
    (root / "src" / "a" / "b" / "c" / "deep.py").write_text("deep = 1\n")


def _in_empty_folder(root: Path) -> None:
    (root / "empty" / "first.py").write_text("first = 1\n")


def _in_nested_empty_folder(root: Path) -> None:
    (root / "src" / "deep" / "later" / "mod.py").write_text("mod = 1\n")


def _beside_ignored_files(root: Path) -> None:
    (root / "logs" / "parse.py").write_text("parse = 1\n")


def _edited(root: Path) -> None:
    (root / "src" / "draft.py").write_text("def draft():\n    return 2 + 2\n")


def _gitignore_hides(root: Path) -> None:
    (root / ".gitignore").write_text("*.log\nbuild/\ndraft.py\n")


def _gitignore_reveals(root: Path) -> None:
    (root / ".gitignore").write_text("")


def _nested_gitignore(root: Path) -> None:
    (root / "src" / ".gitignore").write_text("draft.py\n")


def _info_exclude(root: Path) -> None:
    (root / ".git" / "info" / "exclude").write_text("src/draft.py\n")


EXPECT = {  # change -> (paths that must be untracked after it, paths that must not)
    _new_file: ({"src/draft.py", "src/fresh.py"}, set()),
    _deleted: (set(), {"src/draft.py"}),
    _renamed: ({"src/deep/draft2.py"}, {"src/draft.py"}),
    _new_subdir: ({"src/cli/flags.py"}, set()),
    _nested_dirs: ({"src/a/b/c/deep.py"}, set()),
    _in_empty_folder: ({"empty/first.py"}, set()),
    _in_nested_empty_folder: ({"src/deep/later/mod.py"}, set()),
    _beside_ignored_files: ({"logs/parse.py"}, {"logs/run.log"}),
    _edited: ({"src/draft.py"}, set()),
    _gitignore_hides: (set(), {"src/draft.py"}),
    _gitignore_reveals: ({"build/gen/out.py", "logs/run.log", "src/draft.py"}, set()),
    _nested_gitignore: (set(), {"src/draft.py"}),
    _info_exclude: (set(), {"src/draft.py"}),
}


@pytest.mark.parametrize("ttl", [0.0, 1e9], ids=["ttl-past", "ttl-never"])
@pytest.mark.parametrize("change", list(EXPECT), ids=lambda f: f.__name__.strip("_"))
def test_a_change_of_the_work_tree_shows_in_the_next_snapshot(tmp_path, tune_code, change, ttl):
    tune_code(untracked_ttl=ttl)
    root = repo(tmp_path)
    before = untracked(root)
    assert set(before) == {"src/draft.py", "docs/notes.txt"}
    change(root)
    after = untracked(root)
    present, absent = EXPECT[change]
    assert present <= set(after) and not absent & set(after)
    assert all(after[p] == blob(root, p) for p in after)  # the blob ids of the bytes now
    assert after == untracked(root)


def test_nothing_is_listed_again_while_nothing_changed(listings, listed):
    root = listed
    first = untracked(root)
    for _ in range(5):
        assert untracked(root) == first
    (root / "src" / "pay.py").write_text(PAY + "# edited, not added\n")  # a tracked file's edit
    (root / "build" / "gen" / "new.py").write_text("ignored = 1\n")  # inside an ignored folder
    (root / "vendored" / "lib" / "x.py").write_text("x = 1\n")  # inside a nested repository
    assert untracked(root) == first
    assert len(listings) == 1


def test_an_edit_of_an_untracked_file_hashes_it_again_without_a_listing(listings, listed):
    root = listed
    for n in range(3):  # read at once after each edit: the racy stat is hashed again next time
        (root / "src" / "draft.py").write_text(f"def draft():\n    return {n}{n}\n")
        assert untracked(root)["src/draft.py"] == blob(root, "src/draft.py")
        assert untracked(root)["src/draft.py"] == blob(root, "src/draft.py")
    assert len(listings) == 1


def test_a_commit_reads_the_index_again_but_not_the_untracked_list(listings, listed):
    root = listed
    git(root, "add", "src/draft.py")
    git(root, "commit", "-q", "-m", "draft")
    snap = tree.snapshot(root, max_age=0)
    assert "src/draft.py" in snap.files and "src/draft.py" not in snap.untracked
    assert set(snap.untracked) == {"docs/notes.txt"}
    assert len(listings) == 1
    git(root, "rm", "-q", "--cached", "src/pay.py")  # tracked no more, still on disk
    snap = tree.snapshot(root, max_age=0)
    assert snap.untracked.get("src/pay.py") == blob(root, "src/pay.py")
    assert len(listings) == 2


@pytest.mark.parametrize("new_file", [True, False], ids=["edit-and-new-file", "edit-only"])
def test_a_change_in_the_same_second_as_the_listing_is_not_missed(tmp_path, tune_code,
                                                                  new_file):
    """On a file system of whole-second mtimes, an edit of the same size in the same second as
    the listing leaves every stat as it was: the racy rule lists (or hashes) again."""
    tune_code(untracked_ttl=1e9)
    root = repo(tmp_path)
    draft, folder = root / "src" / "draft.py", root / "src"
    second = time.time_ns() // 1_000_000_000 * 1_000_000_000
    for path in (draft, folder):
        os.utime(path, ns=(second, second))
    assert untracked(root)["src/draft.py"] == blob(root, "src/draft.py")
    draft.write_text(draft.read_text().replace("1", "9"))  # the same size
    if new_file:
        (folder / "late.py").write_text("late = 1\n")
    for path in (draft, folder):
        os.utime(path, ns=(second, second))
    after = untracked(root)
    assert after["src/draft.py"] == blob(root, "src/draft.py")
    assert ("src/late.py" in after) is new_file


def test_a_write_naming_a_new_file_still_lists_again(tmp_path, listings):
    root = repo(tmp_path)
    untracked(root)
    tree.snapshot(root, untracked_age=0)
    assert len(listings) == 2


def test_past_the_cap_the_list_is_kept_for_its_time_to_live(tmp_path, tune_code, listings):
    tune_code(max_watched=3, untracked_ttl=1e9)
    root = repo(tmp_path)
    first = untracked(root)
    _new_file(root)
    assert untracked(root) == first  # not watched: kept, as before the watch, until the TTL
    tune_code(untracked_ttl=0.0)
    assert "src/fresh.py" in untracked(root)
    assert len(listings) == 2


def test_a_wide_watch_is_checked_only_once_the_list_is_older_than_its_time_to_live(
        tmp_path, tune_code, listings):
    tune_code(check_each_read=3, untracked_ttl=1e9)
    root = repo(tmp_path)
    first = untracked(root)
    tune_code(untracked_ttl=0.0)
    assert untracked(root) == first and len(listings) == 1  # checked, nothing changed
    tune_code(untracked_ttl=1e9)
    _new_file(root)
    assert untracked(root) == first  # young: reused unchecked, as before the watch
    tune_code(untracked_ttl=0.0)
    assert "src/fresh.py" in untracked(root) and len(listings) == 2


def test_outside_git_a_walk_is_reused_until_a_file_or_folder_changes(tmp_path, monkeypatch):
    root = tmp_path / "plain"
    (root / "src").mkdir(parents=True)
    (root / "src" / "pay.py").write_text(PAY)
    time.sleep(0.05)
    walks = []
    real = os.walk

    def counting(top, *a, **kw):
        walks.append(top)
        return real(top, *a, **kw)

    monkeypatch.setattr(os, "walk", counting)
    first = tree.snapshot(root, max_age=0)
    assert tree.snapshot(root, max_age=0) is first and len(walks) == 1
    (root / "src" / "pay.py").write_text(PAY + "# edited\n")
    assert tree.snapshot(root, max_age=0).files["src/pay.py"] != first.files["src/pay.py"]
    (root / "src" / "new").mkdir()
    (root / "src" / "new" / "mod.py").write_text("mod = 1\n")
    assert "src/new/mod.py" in tree.snapshot(root, max_age=0).files
    assert len(walks) == 3
