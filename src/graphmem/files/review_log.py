"""Review's lines in the validity log: their fields, and the actions read back for ``undo``.

A review line is a validity event (``validity_log.py``) with four more fields:

    {"item": "3f0c...", "state": "current", "by": null, "reason": "accepted", ...,
     "who": "ana@example.com", "act": "20261206T031502-9f2c1a", "action": "accept",
     "was": {"item": "3f0c...", "state": "pending", ...}}

``who`` made the step (a person's ``team.author``; ``agent-hooks`` or ``graphmem`` for what was
held), ``act`` groups the lines of one step (an accept of a proposal made by a pending memory
accepts both), ``action`` is one of ``ACTIONS`` and ``was`` is the item's event before the line
(None: it had none), without its own ``was``; a proposal also keeps ``before``, the event a
reject gives back. ``undo`` appends, for each line of the latest
accept or reject not yet undone, a line giving the item back its ``was`` (``undoes``: that act).
Standard library only.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any

from graphmem.files.validity_log import log_records

ACTIONS = ("hold", "propose", "accept", "reject", "undo")
UNDOABLE = ("accept", "reject")  # a person's steps; what was held is decided, not undone
MACHINE = "graphmem"  # who proposes what the rule or an LLM judged, held for review


def new_act() -> str:
    """A fresh id for one review step (time first, so ids sort by when they were made)."""
    return time.strftime("%Y%m%dT%H%M%S", time.gmtime()) + "-" + os.urandom(4).hex()


def bare(ev: dict | None) -> dict | None:
    """An event as a later line's ``was`` keeps it: without its own ``was`` (no nesting)."""
    return None if ev is None else {k: v for k, v in ev.items() if k != "was"}


def review_fields(who: str, act: str, action: str, was: dict | None, **extra: Any) -> dict:
    """The fields a review line adds to a validity event."""
    assert action in ACTIONS
    return {"who": who, "act": act, "action": action, "was": bare(was), **extra}


def proposal(state: str, was: dict | None) -> dict:
    """The review fields of a proposal: ``state`` (superseded, possibly superseded) held for a
    person, replacing the event ``was``, which a reject gives back (``before``; kept by every
    line that restores the proposal)."""
    before = None if was is None else {k: v for k, v in was.items() if k not in ("was", "before")}
    return review_fields(MACHINE, new_act(), "propose", was, proposes=state, before=before)


def review_lines(spec_dir: str | Path) -> list[dict]:
    """Every review line of a spec's validity log (those with an ``act``), in log order; a line
    that is not JSON or not a review line is left out, as the log's reader leaves it out."""
    return [rec for rec in log_records(spec_dir)
            if isinstance(rec.get("act"), str) and rec.get("action") in ACTIONS]


def last_undoable(lines: list[dict]) -> tuple[str, list[dict]] | None:
    """The latest accept or reject not undone yet: (its act, its lines in log order)."""
    undone = {rec.get("undoes") for rec in lines if rec["action"] == "undo"}
    acts: dict[str, list[dict]] = {}
    for rec in lines:
        if rec["action"] in UNDOABLE:
            acts.setdefault(rec["act"], []).append(rec)
    for act in reversed(list(acts)):
        if act not in undone:
            return act, acts[act]
    return None


def line_key(rec: dict) -> tuple:
    """What makes a validity line the same line in two logs: a review line its step (``act``),
    item, action and state; any other event its item, state, replacing memory and time."""
    if isinstance(rec.get("act"), str):
        return ("review", rec["item"], rec["act"], rec.get("action"), rec.get("state"))
    return ("event", rec["item"], rec.get("state"), rec.get("by"), rec.get("invalid_at"))


def replay(log: list[dict], incoming: list[tuple[str, str, dict]]
           ) -> tuple[list[dict], list[tuple[str, str]]]:
    """The lines of an import to append to ``log`` (this log's lines, in order), and the notes
    on those left out as (where, why). ``incoming``: (where, exported id, line already under the
    ids here), in the export's order.

    Per memory here: the lines this log already holds are not appended again (importing twice
    adds nothing); when this log's latest line for the memory is one the export does not hold
    (a step made here, or imported from elsewhere), that line stands and the export's are left
    out (an import never overrides a step made here); otherwise the export's lines after the
    one this log ends on are appended, in the export's order. Two exported memories that are
    one memory here (the same text): the first one's lines give it its state."""
    known = {line_key(r) for r in log}
    last = {r["item"]: r for r in log}
    owner: dict[str, str] = {}
    groups: dict[str, list[tuple[int, str, dict]]] = {}
    notes: list[tuple[str, str]] = []
    for idx, (where, src, line) in enumerate(incoming):
        item = line["item"]
        if owner.setdefault(item, src) != src:
            notes.append((where, f"not applied: {owner[item]} of the export is the same memory "
                          f"here ({item}) and gives it its state"))
            continue
        groups.setdefault(item, []).append((idx, where, line))
    new: list[tuple[int, dict]] = []
    for item, rows in groups.items():
        keys = [line_key(line) for _, _, line in rows]
        start = 0
        had = last.get(item)
        if had is not None:
            mine = line_key(had)
            if mine not in keys:
                end = rows[-1][2]
                differs = (end.get("state"), end.get("by")) != (had.get("state"), had.get("by"))
                if differs and any(k not in known for k in keys):
                    who = f" by {had['who']}" if had.get("who") else ""
                    notes.append((rows[-1][1], f"kept this project's own state of {item} "
                                  f"({had.get('state')}{who} at {had.get('recorded_at')}): a "
                                  "step the export does not hold; an import never overrides "
                                  "a step made here"))
                continue
            start = max(i for i, k in enumerate(keys) if k == mine) + 1
        for (idx, _, line), key in zip(rows[start:], keys[start:]):
            if key not in known:
                known.add(key)
                new.append((idx, line))
    return [line for _, line in sorted(new, key=lambda p: p[0])], notes
