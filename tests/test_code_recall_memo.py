"""Code recall's memory of the newest work per file (issue 17, search latency): kept on the
anchor book between searches, it must follow every line the book reads and every rewrite of the
file, answering as a scan from scratch would.

A real ``anchors.jsonl`` written through ``anchor_file.append`` and read through ``book``.
"""

from __future__ import annotations

import bisect

from graphmem.code.anchor_file import append, book, compact
from graphmem.code.reorder import _History, _NewestWork, newest_works


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


def test_newest_works_follow_an_item_recorded_again_about_another_file(tmp_path):
    """A newer record of an item names only another file: the file's list of items is as it
    was, but that item is now another piece of work there (session 2's, twice: once)."""
    spec = tmp_path / "spec"
    append(spec, [rec("a1", "1", "src/a.py"), rec("a2", "2", "src/a.py"), rec("c", "3", "src/c.py")])
    assert works(spec, "src/a.py") == ["a2", "a1"] and works(spec, "src/c.py") == ["c"]
    kept = newest_works(book(spec), "src/c.py")
    append(spec, [rec("a1", "2", "src/b.py")])
    assert works(spec, "src/a.py") == ["a2"]
    assert newest_works(book(spec), "src/c.py") is kept  # nothing it met changed: not walked again
    assert works(spec, "src/b.py") == ["a1"]


def at(n: int) -> str:
    return f"2026-12-01T10:{n // 60:02d}:{n % 60:02d}+00:00"


def timed(item: str, session: str, n: int) -> dict:
    return {**rec(item, session, "src/a.py"), "at": at(n)}


def from_scratch_position(spec, when: str) -> float:
    times = sorted(r.get("at") or "" for r in book(spec).records.values())
    return bisect.bisect_right(times, when) / len(times)


def test_write_positions_follow_every_record_the_book_reads(tmp_path):
    """An item's place in the write history (1 = newest) is kept between searches; after each
    write it is what sorting every record's time gives: new items push older ones down, an
    item recorded again moves to its new time, and a rewritten file starts over."""
    spec = tmp_path / "spec"
    append(spec, [timed(f"i{n}", "s", 10 * n) for n in range(1, 21)])  # times 10 .. 200
    h = _History()
    assert h.position(book(spec), at(200)) == 1.0 and h.position(book(spec), at(100)) == 0.5
    append(spec, [timed("i21", "s", 210)])
    assert h.position(book(spec), at(200)) == 20 / 21 == from_scratch_position(spec, at(200))
    append(spec, [timed("i1", "s", 220)])  # i1 (time 10) recorded again, newest now
    for n in (5, 10, 100, 200, 220):
        assert h.position(book(spec), at(n)) == from_scratch_position(spec, at(n)), n
    assert h.position(book(spec), at(10)) == 0.0
    before = book(spec).records
    compact(spec, live={f"i{n}" for n in range(2, 22)})  # i1 left out
    assert book(spec).records is not before  # a new file: the book starts over
    for n in (10, 20, 200, 220):
        assert h.position(book(spec), at(n)) == from_scratch_position(spec, at(n)), n


def test_query_symbols_are_read_once_per_text_and_each_caller_gets_its_own_list():
    """A search asks for the query's code names three times (removal, touched, asked_gone);
    the names come from one scan, and a caller changing its list changes no other's."""
    from graphmem.code.anchors import _query_symbols, query_symbols

    text = "Why does `refund` call pkg.Client.charge and parse_args()?"
    first = query_symbols(text)
    assert first == ["refund", "pkg.Client.charge", "Client.charge", "parse_args"]
    first.append("changed by the caller")
    hits = _query_symbols.cache_info().hits
    assert query_symbols(text) == ["refund", "pkg.Client.charge", "Client.charge", "parse_args"]
    assert _query_symbols.cache_info().hits == hits + 1


def test_a_file_whose_list_grew_is_walked_through_its_new_items_as_from_scratch(tmp_path, monkeypatch):
    """Files gaining items between searches are extended (``recall._extended``), not walked
    again: with a small ``SCAN`` and window, random writes (new sessions, more items of a
    session, items recorded again about other files, records with no session) answer as a walk
    from scratch after every write."""
    import random

    from graphmem.code import reorder as recall

    monkeypatch.setattr(recall, "SCAN", 4)
    monkeypatch.setattr(recall, "SCAN_ITEMS", 8)  # often fewer than SCAN works in it
    spec = tmp_path / "spec"
    paths = ["src/a.py", "src/b.py", "src/c.py"]
    rnd = random.Random(7)
    items: list[str] = []
    extended = 0
    plain = recall._extended

    def counted(*a):
        nonlocal extended
        got = plain(*a)
        extended += got is not None
        return got

    monkeypatch.setattr(recall, "_extended", counted)
    for n in range(160):
        item = rnd.choice(items) if items and rnd.random() < 0.2 else f"i{n}"
        items.append(item)
        r = rec(item, str(rnd.randrange(4)), *rnd.sample(paths, rnd.randint(1, 2)))
        if rnd.random() < 0.15:
            del r["session"]  # a piece of work of its own
        append(spec, [r])
        kept = {p: works(spec, p) for p in paths}
        b = book(spec)
        memo = b.__dict__.pop("_newest_works")
        assert {p: works(spec, p) for p in paths} == kept
        b.__dict__["_newest_works"] = memo
    assert extended > 50  # the path under test ran
