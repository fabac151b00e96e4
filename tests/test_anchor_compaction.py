"""``anchors.jsonl`` compaction on real files: readers see the same anchors before and after, a
crash in the middle leaves the old file whole, and appends racing a compaction are never lost."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from graphmem import Memory
from graphmem.code import anchor_file
from graphmem.code import anchors as anchors_mod
from graphmem.code.anchors import anchors_file, book, compact
from test_code_freshness import PAY, project

REPO = Path(__file__).resolve().parent.parent


def reader_view(spec: Path) -> tuple[dict, dict]:
    """What readers of the anchors see, from a fresh read of the file."""
    b = anchor_file.AnchorBook(anchors_file(spec)).refresh()
    return ({i: (r["anchors"], r.get("head")) for i, r in b.records.items()},
            {s: r["anchors"] for s, r in b.sessions.items()})


def grow(mem: Memory, rounds: int) -> None:
    """Re-save one session again and again (each save anchors its items again)."""
    for n in range(rounds):
        mem.save_session_insights(1, {"what_worked": [f"`refund` in src/pay.py rounds up {k}"
                                                      for k in range(n % 3 + 3)],
                                      "discoveries": {"files_understood": {"src/pay.py": "payments"}}})
        mem.append_gotcha(f"Client.charge retry {n}")


def test_the_file_compacts_itself_and_readers_see_the_same_anchors(tmp_path, monkeypatch):
    root, spec = project(tmp_path, {"src/pay.py": PAY})
    monkeypatch.setattr(anchor_file, "COMPACT_MIN_BYTES", 20_000)
    with Memory(spec, root) as mem:
        sid = mem.start_session()
        mem.record_turn(sid, "user", "fix src/pay.py please")
        mem.end_session(sid)
        grow(mem, 2)
        monkeypatch.setattr(anchor_file, "COMPACT_MIN_BYTES", 10**9)  # a copy that never compacts
        for _ in range(150):
            anchors_mod.record(root, spec, [i for i in mem.items()  # as a save anchors them
                                            if "rounds up" in i.text or i.kind == "file"])
        full = anchors_file(spec).read_bytes()
        expected = reader_view(spec)
        monkeypatch.setattr(anchor_file, "COMPACT_MIN_BYTES", 20_000)
        anchor_file._compacted.clear()
        grow(mem, 1)  # this write sees the file is mostly dead lines and compacts it
        after = anchors_file(spec).read_bytes()
        view = reader_view(spec)
        fresh = {h.text: h.metadata.get("freshness") for h in mem.search("refund rounds up", limit=20)}
    assert len(after) < len(full) / 4, (len(after), len(full))
    for item_id, rec in expected[0].items():
        assert view[0][item_id] == rec  # the same anchors for every item known before
    assert view[1] == expected[1]  # and the same files per episodic session
    assert all(f and f["state"] == "current" for t, f in fresh.items() if "rounds up" in t)
    assert not [p for p in anchors_file(spec).parent.iterdir() if p.name.endswith(".tmp")]


def test_reindex_drops_the_lines_of_items_the_files_no_longer_hold(tmp_path):
    root, spec = project(tmp_path, {"src/pay.py": PAY})
    with Memory(spec, root) as mem:
        for n in range(40):  # each save replaces session 1's insights: the old items are gone
            mem.save_session_insights(1, {"what_worked": [f"`refund` version {n} in src/pay.py"]})
        before = len(anchors_file(spec).read_text().splitlines())
        mem.reindex()
        live = {i.id for i in mem.items()}
        kept = book(spec).records
    assert before >= 40
    assert set(kept) == {i for i in live if i in kept} and len(kept) == 1
    lines = [json.loads(x) for x in anchors_file(spec).read_text().splitlines()]
    assert [r["items"] for r in lines if "items" in r] == [list(kept)]  # one record, and its set
    assert [r["set"] for r in lines if "set" in r] == [lines[-1]["anchors"]]


@pytest.mark.parametrize("death", ["os.replace", "os.fsync"])
def test_a_crash_in_the_middle_of_a_compaction_leaves_the_old_file_whole(tmp_path, death):
    root, spec = project(tmp_path, {"src/pay.py": PAY})
    with Memory(spec, root) as mem:
        mem.save_session_insights(1, {"what_worked": ["`refund` rounds up", "retry once"],
                                      "discoveries": {"files_understood": {"src/pay.py": "pay"}}})
        for _ in range(30):
            anchors_mod.record(root, spec, mem.items())
    path = anchors_file(spec)
    view = reader_view(spec)
    # half of it in the format before sets, as an older release wrote it: compaction rewrites it
    inline = "".join(json.dumps(r) + "\n" for r in
                     {id(r): r for r in anchor_file.AnchorBook(path).refresh().records.values()}.values())
    path.write_bytes(inline.encode() + path.read_bytes())
    data = path.read_bytes()
    assert reader_view(spec) == view
    code = textwrap.dedent(f"""
        import os, signal, sys
        from graphmem.code.anchors import compact
        {death} = lambda *a: os.kill(os.getpid(), signal.SIGKILL)  # die before the rename
        compact({str(spec)!r})
    """)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=60)
    assert proc.returncode == -9, proc.stderr
    assert path.read_bytes() == data  # untouched
    assert [p.name for p in path.parent.iterdir() if p.name.endswith(".tmp")]  # its stray temp
    assert reader_view(spec) == view
    before, after = compact(spec)  # the next compaction works and readers agree
    assert after < before and reader_view(spec) == view
    assert '"via"' not in path.read_text()  # every record now names its sets


def test_appends_racing_compactions_are_never_lost(tmp_path):
    root, spec = project(tmp_path, {"src/pay.py": PAY})
    Memory(spec, root).append_gotcha("`refund` rounds up")
    writer = textwrap.dedent(f"""
        import sys
        from graphmem import Memory
        from graphmem.code.anchors import record
        with Memory({str(spec)!r}, {str(root)!r}) as mem:
            first = [i for i in mem.items() if i.text == "`refund` rounds up"]
            for n in range(25):
                mem.append_gotcha(f"`refund` worker {{sys.argv[1]}} note {{n}}")
                for _ in range(4):  # lines a compaction drops: it rewrites the file every time
                    record({str(root)!r}, {str(spec)!r}, first)
    """)
    compactor = textwrap.dedent(f"""
        import time
        from graphmem.code.anchors import compact
        end = time.monotonic() + 60
        while time.monotonic() < end:
            compact({str(spec)!r})
            if open({str(tmp_path / "stop")!r}, "a").tell():
                break
    """)
    env = {**os.environ, "GRAPHITI_TELEMETRY_ENABLED": "false"}
    comp = subprocess.Popen([sys.executable, "-c", compactor], env=env)
    writers = [subprocess.Popen([sys.executable, "-c", writer, str(w)], env=env) for w in range(3)]
    try:
        assert all(w.wait(timeout=240) == 0 for w in writers)
    finally:
        (tmp_path / "stop").write_text("stop")
        comp.wait(timeout=60)
    with Memory(spec, root) as mem:
        ids = {i.id for i in mem.items() if i.kind == "gotcha"}
    assert len(ids) == 76
    assert ids <= set(reader_view(spec)[0])  # every note's anchors survived the compactions
