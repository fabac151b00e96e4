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
