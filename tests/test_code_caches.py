"""The read path's caches of code memory never answer stale: after each change to a real git
repository (commit, rename, delete, another branch, amend, reset, a merge, packed objects, an
edit not yet added), a search answered from the caches equals one answered from scratch
(``graphmem.code.forget_caches``), freshness states, commit counts and order alike.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from test_code_freshness import git, project

from graphmem import Memory
from graphmem.code import forget_caches
from graphmem.code.history import History, kept_shares, line_counts

PAY = "def refund(order):\n    return order.total\n\n\ndef charge(order):\n    return 1\n"
API = "def serve():\n    return 1\n\n\ndef stop():\n    return 0\n"
QUERY = "refund charge serve stop helper"


def write(root: Path, files: dict[str, str | None]) -> None:
    for path, text in files.items():
        p = root / path
        if text is None:
            p.unlink()
        else:
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text(text)


def commit(root: Path, msg: str, *extra: str) -> None:
    git(root, "add", "-A")
    git(root, "commit", "-q", *extra, "-m", msg)


def make(tmp_path: Path) -> tuple[Path, Path]:
    return project(tmp_path, {"src/pay.py": PAY, "src/api.py": API,
                              "src/util.py": "def helper():\n    return 1\n",
                              "docs/notes.txt": "one\ntwo\nthree\n"})


def answer(mem: Memory) -> list[tuple[str, dict | None]]:
    """What a search says: each hit's text and freshness, in order."""
    return [(h.text, h.metadata.get("freshness"))
            for h in mem.search(QUERY, scope="project", limit=20)]


def same_as_from_scratch(mem: Memory) -> list[tuple[str, dict | None]]:
    cached = answer(mem)
    forget_caches()
    scratch = answer(mem)
    assert cached == scratch
    return cached


def state_of(got: list[tuple[str, dict | None]], start: str) -> dict:
    return next(f for text, f in got if text.startswith(start))


def test_every_change_to_the_repository_is_seen_as_from_scratch(tmp_path):
    root, spec = make(tmp_path)
    with Memory(spec, root) as mem:
        mem.append_gotcha("refund rounding: `refund` in src/pay.py must round half up")
        mem.append_gotcha("serve wiring: `serve` and `stop` live in src/api.py")
        mem.append_gotcha("helper caching: `helper` is called on every request")
        mem.append_gotcha("notes: docs/notes.txt lists the charge rules")
        first = same_as_from_scratch(mem)
        assert {f["state"] for _, f in first if f} == {"current"}

        write(root, {"src/pay.py": PAY.replace("return order.total", "return round(order.total)")})
        commit(root, "edit refund")
        got = same_as_from_scratch(mem)
        assert state_of(got, "refund")["state"] == "changed"
        assert state_of(got, "refund")["commits"] == {"src/pay.py": 1}

        git(root, "mv", "src/api.py", "src/server.py")
        commit(root, "rename")
        assert state_of(same_as_from_scratch(mem), "serve")["state"] == "moved"

        write(root, {"src/util.py": None})
        commit(root, "delete")
        assert state_of(same_as_from_scratch(mem), "helper")["state"] == "gone"

        # amend: the replaced commit is no longer in HEAD's history, nor in its commit counts
        write(root, {"src/pay.py": PAY.replace("return order.total", "return 0")})
        commit(root, "edit refund again")
        assert state_of(same_as_from_scratch(mem), "refund")["commits"] == {"src/pay.py": 2}
        write(root, {"src/pay.py": PAY.replace("return order.total", "return -1")})
        commit(root, "edit refund again, amended", "--amend")
        assert state_of(same_as_from_scratch(mem), "refund")["commits"] == {"src/pay.py": 2}

        # another branch, then back: nothing of one branch is counted on the other
        main = git(root, "branch", "--show-current")
        git(root, "checkout", "-q", "-b", "side", "HEAD~3")
        write(root, {"src/pay.py": PAY + "\n\ndef audit():\n    pass\n", "src/util.py": None})
        commit(root, "side work")
        got = same_as_from_scratch(mem)
        assert state_of(got, "serve")["state"] == "current"  # api.py was never renamed here
        git(root, "checkout", "-q", main)
        assert state_of(same_as_from_scratch(mem), "serve")["state"] == "moved"

        # a merge of the side branch, then a reset to before it
        git(root, "merge", "-q", "--no-edit", "-X", "theirs", "side")
        same_as_from_scratch(mem)
        git(root, "reset", "-q", "--hard", "HEAD~1")
        same_as_from_scratch(mem)

        # packed objects: blobs are read through git, not the loose object store
        write(root, {"docs/notes.txt": "one\ntwo\nthree\nfour\nfive\nsix\nseven\n"})
        commit(root, "more notes")
        git(root, "gc", "-q", "--prune=now")
        got = same_as_from_scratch(mem)
        assert state_of(got, "notes")["state"] == "current"  # every line it saw is kept

        # an edit added to the index without a commit, then one not added at all
        write(root, {"docs/notes.txt": "other\n"})
        git(root, "add", "docs/notes.txt")
        assert state_of(same_as_from_scratch(mem), "notes")["state"] == "changed"
        write(root, {"src/server.py": "def unrelated():\n    return 2\n"})  # not added
        got = same_as_from_scratch(mem)
        assert state_of(got, "serve")["state"] == "moved"  # the index still has serve and stop


def test_symbols_of_a_blob_are_its_own_when_the_file_holds_an_edit_not_yet_added(tmp_path):
    root, spec = make(tmp_path)
    with Memory(spec, root) as mem:
        mem.append_gotcha("serve wiring: `serve` is started once")
        write(root, {"src/api.py": "def other():\n    return 1\n"})  # not added: the index has serve
        write(root, {"src/pay.py": PAY + "\n"})
        git(root, "add", "src/pay.py")  # a new index state: a new snapshot reads the symbols
        forget_caches()
        got = same_as_from_scratch(mem)
        assert state_of(got, "serve")["state"] == "current"
        git(root, "add", "src/api.py")
        assert state_of(same_as_from_scratch(mem), "serve")["state"] == "gone"


def test_line_counts_check_the_work_tree_file_against_the_blob(tmp_path):
    root, _ = make(tmp_path)
    blob = git(root, "rev-parse", "HEAD:docs/notes.txt")
    write(root, {"docs/notes.txt": "edited\n"})  # the file no longer holds the blob
    forget_caches()
    counts = line_counts(root, {blob}, {blob: "docs/notes.txt"})
    assert counts[blob] == Counter({"one": 1, "two": 1, "three": 1})
    new = git(root, "hash-object", "-w", "docs/notes.txt")
    assert kept_shares(root, {(blob, new)}, {new: "docs/notes.txt"}) == {(blob, new): 0.0}


def test_history_extended_after_commits_equals_one_read_from_scratch(tmp_path):
    root, _ = make(tmp_path)
    hist = History(root)
    hist.update(git(root, "rev-parse", "HEAD"))
    for n in range(3):
        write(root, {"src/pay.py": PAY + f"\n# {n}\n"})
        commit(root, f"edit {n}")
        hist.update(git(root, "rev-parse", "HEAD"))
    git(root, "commit", "-q", "--amend", "-m", "edit 2, amended")
    head = git(root, "rev-parse", "HEAD")
    hist.update(head)
    scratch = History(root)
    scratch.update(head)
    assert hist.pos == scratch.pos and hist.touched == scratch.touched


def test_a_work_line_another_writer_appends_is_read_by_the_next_search_without_a_commit(tmp_path):
    """Two agents share a spec folder. One searches (each hit's work mark is kept for this
    snapshot); the other records what the work at this HEAD wrote, files now gone. The next
    search, with no commit between, marks the memory gone, as a search from scratch does."""
    from graphmem.code.anchor_file import append

    root, spec = make(tmp_path)
    with Memory(spec, root) as mem:
        mem.append_gotcha("refund rounding: `refund` in src/pay.py must round half up")
        assert state_of(same_as_from_scratch(mem), "refund")["state"] == "current"
        assert state_of(answer(mem), "refund")["state"] == "current"  # kept, same snapshot
        append(spec, [{"work": git(root, "rev-parse", "HEAD"), "base": None,
                       "at": "2026-12-01T10:00:00+00:00", "sessions": [], "items": [],
                       "files": ["src/old_a.py", "src/old_b.py"], "deleted": [], "added": {},
                       "changed": {}, "removed": {}, "moved": {}}])
        got = state_of(answer(mem), "refund")
        assert got["state"] == "gone" and got["work_gone"]["files"] == ["src/old_a.py",
                                                                       "src/old_b.py"]
        assert state_of(same_as_from_scratch(mem), "refund") == got


def test_a_state_kept_from_an_earlier_commit_is_dropped_when_what_it_read_changed(tmp_path):
    """Freshness across commits and index changes, checked against a Memory that computes it
    from scratch: each change below leaves the memory's own files as they were, yet changes
    its answer (a cache carrying states across snapshots must not survive any of them)."""
    root, spec = make(tmp_path)
    with Memory(spec, root) as mem:
        for text in ("refund rounding: `refund` must round half up",
                     "notes: docs/notes.txt lists the charge rules",
                     "serve wiring: `serve` and `stop` are the server's two calls",
                     "util: src/util.py holds the shared helpers"):
            mem.append_gotcha(text)
        same_as_from_scratch(mem)
        write(root, {"src/pay.py": PAY.replace("return 1", "return 2")})
        commit(root, "edit charge")
        assert state_of(same_as_from_scratch(mem), "refund")["commits"] == {"src/pay.py": 1}

        # commits that change a file and change it back: the same blob, two more commits
        write(root, {"src/pay.py": PAY.replace("return 1", "return 3")})
        commit(root, "edit charge again")
        write(root, {"src/pay.py": PAY.replace("return 1", "return 2")})
        commit(root, "undo")
        assert state_of(same_as_from_scratch(mem), "refund")["commits"] == {"src/pay.py": 3}

        # refund moves to its own file, then a new file defines it too: no single new home
        write(root, {"src/pay.py": "def charge(order):\n    return 2\n",
                     "src/refunds.py": "def refund(order):\n    return order.total\n"})
        commit(root, "move refund")
        assert state_of(same_as_from_scratch(mem), "refund")["state"] == "moved"
        write(root, {"src/extra.py": "def refund(order):\n    return 0\n"})
        commit(root, "another refund")
        assert state_of(same_as_from_scratch(mem), "refund")["state"] == "changed"

        # a deleted file's content comes back under another name, in a later commit
        write(root, {"docs/notes.txt": None})
        commit(root, "drop notes")
        assert state_of(same_as_from_scratch(mem), "notes")["state"] == "gone"
        write(root, {"docs/rules.txt": "one\ntwo\nthree\n"})
        commit(root, "rules")
        got = state_of(same_as_from_scratch(mem), "notes")
        assert got["state"] == "moved" and got["moved"] == {"docs/notes.txt": "docs/rules.txt"}

        # edits added to the index, no commit: the same HEAD, another snapshot
        write(root, {"src/api.py": API.replace("return 0", "return 5")})
        git(root, "add", "src/api.py")
        assert state_of(same_as_from_scratch(mem), "serve")["state"] == "changed"
        write(root, {"src/util.py": "def helper():\n    return 1\n\n\ndef other():\n    pass\n"})
        commit(root, "one more helper")
        assert state_of(same_as_from_scratch(mem), "util")["state"] == "current"  # edited
        write(root, {"src/util.py": "HELPERS = {}\n"})
        git(root, "add", "src/util.py")
        assert state_of(same_as_from_scratch(mem), "util")["state"] == "changed"
