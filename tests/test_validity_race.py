"""Retire and supersede raced by real processes: the check that a memory is still valid and the
append to ``validity.jsonl`` are one step, so exactly one call wins and the others are refused."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

from graphmem import Memory

RACER = Path(__file__).with_name("validity_proc.py")
NOTES = [f"Refund rule {name} holds for the checkout" for name in "abcdef"]


def test_processes_retiring_or_superseding_one_memory_at_once_exactly_one_wins(spec_dir, tmp_path,
                                                                               monkeypatch):
    monkeypatch.setenv("GRAPHMEM_LOCAL_EMBEDDING_MODEL", "wordllama")  # light model loads
    with Memory(spec_dir) as mem:
        for note in NOTES:
            mem.append_gotcha(note)
        by_text = {h.text: h.id for h in mem.search("refund rule checkout", limit=20)}
    items = [by_text[n] for n in NOTES]
    meet = tmp_path / "meet"
    meet.mkdir()
    racers = 4
    procs = [subprocess.Popen([sys.executable, str(RACER), str(spec_dir), ",".join(items), str(w),
                               str(racers), str(meet)], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env=dict(os.environ))
             for w in range(racers)]
    lines = []
    for p in procs:
        out, err = p.communicate(timeout=180)
        assert p.returncode == 0, err[-2000:]
        lines += out.splitlines()
    won = Counter(ln.split(" ")[0] for ln in lines if ln.split(" ")[1] == "WON")
    assert won == Counter(items), lines  # each memory: one winner among the racers
    refused = [ln for ln in lines if ln.split(" ")[1] != "WON"]
    assert len(refused) == (racers - 1) * len(items)
    assert all(ln.split(" ")[1:3] == ["REFUSED", "id"] for ln in refused), refused
    events = [json.loads(x) for x in
              (spec_dir / "memory" / "validity.jsonl").read_text().splitlines()]
    assert sorted(e["item"] for e in events) == sorted(items)  # one event each
    # a refused supersede wrote no new note: only the winners' replacements were added
    superseded = sum(e["state"] == "superseded" for e in events)
    assert len(Memory(spec_dir).load_gotchas()) == len(NOTES) + superseded
