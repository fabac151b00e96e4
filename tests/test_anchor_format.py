"""``anchors.jsonl``'s format on real files: anchor lists stored once and named by records, files
in the format before that still load (``reindex`` rewrites them), and damaged lines cost nothing
but themselves."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

from graphmem import Memory
from graphmem.code import anchor_file
from graphmem.code.anchors import anchors_file, compact, record
from test_anchor_compaction import reader_view
from test_code_freshness import PAY, commit, project

API = "def serve():\n    return 1\n\n\ndef stop():\n    return 0\n"


def lines(spec: Path) -> list[dict]:
    return [json.loads(x) for x in anchors_file(spec).read_text().splitlines()]


def old_format(spec: Path) -> str:
    """The file as the format before sets wrote it: each record holds its anchors inline."""
    b = anchor_file.AnchorBook(anchors_file(spec)).refresh()
    recs = list({id(r): r for r in b.records.values()}.values())
    return "".join(json.dumps({k: v for k, v in r.items() if k != "set_names"}) + "\n" for r in recs)


def replace(path: Path, text: str) -> None:
    """Write a whole new file in ``path``'s place, as an editor or a restore would."""
    path.with_name("new").write_text(text)
    os.replace(path.with_name("new"), path)


def session(mem: Memory, n: int) -> None:
    """One session whose lessons name different code, over the same two files."""
    mem.save_session_insights(n, {
        "what_worked": [f"`refund` keeps cents, take {n}", f"`serve` starts once, take {n}",
                        f"`stop` drains first, take {n}", f"nothing about code, take {n}"],
        "discoveries": {"files_understood": {"src/pay.py": "payments", "src/api.py": "server"}}})


def lessons_and_a_turn(tmp_path: Path) -> tuple[Path, Path]:
    """A project whose anchors hold a session's lessons and an episodic session's turn."""
    root, spec = project(tmp_path, {"src/pay.py": PAY, "src/api.py": API})
    with Memory(spec, root) as mem:
        session(mem, 1)
        sid = mem.start_session()
        mem.record_turn(sid, "user", "the refund in src/pay.py rounds")
        mem.end_session(sid)
    return root, spec


def test_a_session_s_files_are_stored_once_and_records_name_them(tmp_path):
    root, spec = project(tmp_path, {"src/pay.py": PAY, "src/api.py": API})
    with Memory(spec, root) as mem:
        session(mem, 1)
        view = reader_view(spec)
    recs = lines(spec)
    sets = {r["set"]: r["anchors"] for r in recs if "set" in r}
    lessons = [r for r in recs if "session_files" in r]
    assert len(lessons) >= 4  # three lessons naming code, one naming none, and the file items
    assert len({r["session_files"] for r in lessons}) == 1  # one list of the session's files ...
    assert sum(1 for r in recs if "set" in r and r["set"] == lessons[0]["session_files"]) == 1
    assert {a["path"] for a in sets[lessons[0]["session_files"]]} == {"src/pay.py", "src/api.py"}
    # ... which readers see on every lesson, after the lesson's own anchors
    refund = next(a for i, (a, _) in view[0].items() if any(x.get("symbol") == "refund" for x in a))
    assert [(x["path"], x.get("symbol"), x.get("via")) for x in refund] == [
        ("src/pay.py", "refund", None), ("src/pay.py", None, "session"),
        ("src/api.py", None, "session")]


def test_anchors_said_again_are_not_written_again(tmp_path):
    root, spec = project(tmp_path, {"src/pay.py": PAY, "src/api.py": API})
    with Memory(spec, root) as mem:
        session(mem, 1)
        items = mem.items()
        once = anchors_file(spec).stat().st_size
        for _ in range(20):  # the same items anchored again at the same code: records only
            record(root, spec, items)
    recs = lines(spec)
    assert len({r["set"] for r in recs if "set" in r}) == sum(1 for r in recs if "set" in r)
    again = anchors_file(spec).read_bytes()[once:].decode()
    assert again.count('"items"') >= 20 and '"path"' not in again  # records naming sets only


def test_a_file_in_the_format_before_sets_loads_and_reindex_rewrites_it(tmp_path):
    root, spec = lessons_and_a_turn(tmp_path)
    with Memory(spec, root) as mem:
        new_view = reader_view(spec)
        replace(anchors_file(spec), old_format(spec))
        assert all(isinstance(r["anchors"], list) for r in lines(spec))
        assert reader_view(spec) == new_view  # the old file reads the same
        (root / "src/api.py").unlink()
        commit(root, "drop the server")
        before = {h.text: h.metadata["freshness"]["state"]
                  for h in mem.search("serve starts once", limit=20) if "freshness" in h.metadata}
        assert before["`serve` starts once, take 1"] == "gone"
        mem.reindex()
        after = lines(spec)
        assert after and all(isinstance(r["anchors"], str) for r in after if "items" in r
                             and "anchors" in r)  # written again in the format with sets
        assert reader_view(spec) == new_view
        again = {h.text: h.metadata["freshness"]["state"]
                 for h in mem.search("serve starts once", limit=20) if "freshness" in h.metadata}
    assert again == before


def test_damaged_lines_are_skipped_with_a_warning_and_nothing_else_is_lost(tmp_path, caplog):
    root, spec = lessons_and_a_turn(tmp_path)
    path = anchors_file(spec)
    good = path.read_text().splitlines(keepends=True)
    view = reader_view(spec)
    garbage = ['{"items": ["torn', "\x00\x00 not json at all\n", "[1, 2, 3]\n",
               '{"items": 5, "anchors": []}\n', '{"items": ["x"], "anchors": "000000000000"}\n',
               '{"set": "abc", "anchors": "not a list"}\n', '{"items": [], "head": null}\n']
    mixed = [good[0], garbage[0] + "\n", *garbage[1:4], *good[1:-1], *garbage[4:], good[-1]]
    replace(path, "".join(mixed))
    with caplog.at_level(logging.WARNING, logger="graphmem.code"):
        assert reader_view(spec) == view  # every record the damaged lines did not touch
    assert len([r for r in caplog.records if "skipped" in r.getMessage()]) == len(garbage)
    compact(spec)  # a compaction keeps them all too, and leaves the damage out
    assert reader_view(spec) == view
    assert all("items" in r or "set" in r for r in lines(spec))


def test_a_torn_last_line_does_not_swallow_the_next_append(tmp_path):
    root, spec = project(tmp_path, {"src/pay.py": PAY, "src/api.py": API})
    with Memory(spec, root) as mem:
        mem.append_gotcha("`refund` keeps cents")
        path = anchors_file(spec)
        with path.open("a") as fh:
            fh.write('{"set": "half written')  # a crash in the middle of a line
        mem.append_gotcha("`serve` starts once")
        serve = next(i for i in mem.items() if i.text == "`serve` starts once")
    got = anchor_file.AnchorBook(path).refresh().records[serve.id]
    assert [(a["path"], a["symbol"]) for a in got["anchors"]] == [("src/api.py", "serve")]


def test_the_file_compacts_while_the_code_keeps_changing(tmp_path, tune_code):
    root, spec = project(tmp_path, {"src/pay.py": PAY, "src/api.py": API})
    tune_code(compact_min_bytes=4_000)
    with Memory(spec, root) as mem:
        mem.append_gotcha("`refund` keeps cents")
        items = mem.items()
        for n in range(60):  # every commit changes the code: each anchoring names a new set
            (root / "src/pay.py").write_text(PAY.replace("order.total", f"order.total + {n}"))
            commit(root, f"edit {n}")
            record(root, spec, items)
        view = reader_view(spec)
    recs = lines(spec)
    needed = anchor_file.needed(anchors_file(spec).read_bytes().splitlines())
    assert len(recs) <= 2 * len(needed) + 40, (len(recs), len(needed))  # compacted as it grew
    assert reader_view(spec) == view
