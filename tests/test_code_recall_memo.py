"""Code recall's memory of the newest work per file (issue 17, search latency): kept on the
anchor book between searches, it must follow every line the book reads and every rewrite of the
file, answering as a scan from scratch would.

A real ``anchors.jsonl`` written through ``anchor_file.append`` and read through ``book``.
"""

from __future__ import annotations

from graphmem.code.anchor_file import append, book, compact
from graphmem.code.recall import _NewestWork, newest_works


def rec(item: str, session: str, *paths: str) -> dict:
    return {"items": [item], "head": "a" * 40, "at": f"2026-12-01T10:00:{len(item):02d}+00:00",
            "session": session, "anchors": [{"path": p, "blob": "b" * 40} for p in paths]}


def works(spec, path: str) -> list[str]:
    return [item for _, item in newest_works(book(spec), path)]


def from_scratch(spec, weight: dict[str, float]) -> _NewestWork:
    b = book(spec)
    b.__dict__.pop("_newest_works", None)
    return _NewestWork([b], weight)


def test_newest_works_follow_new_lines_and_a_rewritten_file(tmp_path):
    spec = tmp_path / "spec"
    append(spec, [rec("a1", "1", "src/a.py"), rec("a2", "2", "src/a.py", "src/b.py")])
    assert works(spec, "src/a.py") == ["a2", "a1"]
    assert newest_works(book(spec), "src/a.py") is newest_works(book(spec), "src/a.py")  # kept
    # a newer session's memory about the same file comes first at the next search
    append(spec, [rec("a3", "3", "src/a.py")])
    assert works(spec, "src/a.py") == ["a3", "a2", "a1"]
    # a second item of session 2 is the same piece of work: it stands for it, once
    append(spec, [rec("a22", "2", "src/a.py")])
    assert works(spec, "src/a.py") == ["a22", "a3", "a1"]
    weight = {"src/a.py": 1.0, "src/b.py": 0.5}
    cached = _NewestWork([book(spec)], weight)
    scratch = from_scratch(spec, weight)
    assert (cached.ranks, cached.found, cached.item) == (scratch.ranks, scratch.found, scratch.item)
    # the file rewritten (a new inode, the book starts over): still the same answer
    before = works(spec, "src/a.py")
    compact(spec, live={"a1", "a2", "a3", "a22"})
    assert works(spec, "src/a.py") == before
    append(spec, [rec("a4", "4", "src/b.py")])
    assert works(spec, "src/b.py") == ["a4", "a2"]
