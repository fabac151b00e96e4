"""Validity: retiring a memory, or superseding it with a newer one, recorded append-only.

Bi-temporal as in Graphiti: a memory became true at ``valid_at`` (its own time), stopped being
true at ``invalid_at`` (given, or the time of the call), and graphmem learned each at
``recorded_at``. The log is ``<spec>/memory/validity.jsonl``, one JSON object per event, the
reference files untouched::

    {"item": "3f0c...", "state": "superseded", "by": "9a1d...", "reason": "pinned 8.2 now",
     "invalid_at": "2026-12-01T21:00:00+00:00", "recorded_at": "2026-12-01T21:00:00+00:00"}

Searches and contexts leave retired and superseded memories out by default (a context says how
many it hid); ``include_history=True`` returns them with ``metadata["validity"]``. With an LLM
configured, a new gotcha or pattern is judged against the older ones on the same code by the LLM
(``supersession.py``), and those it replaces are superseded. Without one (or when its answer
cannot be used), a new note that reads exactly like an older one except for its numbers marks
the older as "possibly superseded" (``possible_update``): marked and ranked below the newer one,
never hidden. A reversed decision is caught the same way, without an LLM: a session whose
completed subtasks include ``Revert "S"`` (git's message for a revert) marks the earlier session
that completed ``S`` as possibly superseded, naming the reverting session (``reverted_subject``;
its insights, gotchas and patterns when ``S`` was its first subtask, its title, else the line
``S`` alone).
"""

from __future__ import annotations

import logging
import re
import threading
from pathlib import Path
from typing import Callable

from graphmem.files.jsonl_tail import JsonlTail, tail
from graphmem.models import Hit

FILE_NAME = "validity.jsonl"
POSSIBLY = "possibly superseded"
STATES = ("retired", "superseded", POSSIBLY)
MAX_REASON = 2_000
_ID = re.compile(r"[0-9a-f]{24}")
_lock = threading.Lock()
log = logging.getLogger("graphmem.files.validity_log")


def validity_file(spec_dir: str | Path) -> Path:
    """Where a spec folder keeps its validity log."""
    return Path(spec_dir) / "memory" / FILE_NAME


class ValidityLog(JsonlTail):
    """Item id -> its latest validity event, read incrementally from one ``validity.jsonl``."""

    def reset(self) -> None:
        self.events: dict[str, dict] = {}

    def take(self, rec: dict) -> None:
        # a damaged or foreign line must not hide a memory: only the states graphmem writes count
        if isinstance(rec.get("item"), str) and rec.get("state") in STATES:
            self.events[rec["item"]] = rec
        else:
            log.warning("%s: skipped a line that is not a validity event: %.80r", self.path, rec)

    def skipped(self, line: bytes) -> None:
        log.warning("%s: skipped a line that is not JSON: %.80r", self.path, line)


def validity_log(spec_dir: str | Path) -> ValidityLog:
    """The (cached, refreshed) validity events of one spec folder."""
    return tail(ValidityLog, validity_file(spec_dir))


def apply_validity(hits: list[Hit], include_history: bool,
                   spec_dir_of: Callable[[Hit], Path | None]) -> tuple[list[Hit], int]:
    """Hits without retired/superseded ones (and how many were hidden), or all of them marked.

    A memory only *possibly* superseded (the rule in ``possible_update``) stays, marked, and
    moves below the newer memory when both are in the list.
    """
    out, hidden = [], 0
    logs: dict[Path, ValidityLog] = {}  # one refresh per spec folder, not per hit
    for hit in hits:
        where = spec_dir_of(hit)
        if where is not None and where not in logs:
            logs[where] = validity_log(where)
        ev = logs[where].events.get(hit.id) if where else None
        if ev is None:
            out.append(hit)
        elif include_history or ev.get("state") == POSSIBLY:
            out.append(hit.model_copy(update={"metadata": {**hit.metadata, "validity": {
                "state": ev.get("state"), "reason": ev.get("reason"), "by": ev.get("by"),
                "valid_at": hit.time.isoformat() if hit.time else None,
                "invalid_at": ev.get("invalid_at"), "recorded_at": ev.get("recorded_at")}}}))
        else:
            hidden += 1
    pos = {h.id: i for i, h in enumerate(out)}
    for h in list(out):
        by = (h.metadata.get("validity") or {}).get("by")
        if (h.metadata.get("validity") or {}).get("state") == POSSIBLY and by in pos \
                and pos[by] > pos[h.id]:
            out.remove(h)
            out.insert(out.index(next(x for x in out if x.id == by)) + 1, h)
            pos = {x.id: i for i, x in enumerate(out)}
    return out, hidden


_REVERT = re.compile(r'\s*Revert\s+"(?P<subject>.+)"\s*(?:\(#\d+\))?\s*', re.S)
_PR_REF = re.compile(r"\s*\(#\d+\)\s*$")


def reverted_subject(line: str) -> str | None:
    """The subject a completed subtask ``Revert "<subject>"`` (optionally `` (#123)``) reverts,
    or None when the line is not a revert."""
    m = _REVERT.fullmatch(line) if isinstance(line, str) else None
    return m.group("subject").strip() or None if m else None


def subject_key(text: str) -> str:
    """A commit subject as a revert names it: normalised, without a trailing PR reference."""
    from graphmem.models import normalise

    return normalise(_PR_REF.sub("", text))


# A value: digits (a leading "v" too) that do not end a name: f2, m2.py, step12, py311 and
# x_10 are names (no word character may come right before a value's first digit or its "v").
_NUMBER = re.compile(r"(?<!\w)(?:v(?=\d))?\d+(?:[.,_]\d+)*")
_skeletons: dict[str, tuple[int, dict[str, list[str]]]] = {}


def skeleton(text: str) -> str | None:
    """A note with its numbers blanked (None when it has none): the key of the no-LLM rule."""
    from graphmem.models import normalise

    norm = normalise(text)
    blank = _NUMBER.sub("#", norm)
    return blank if blank != norm else None


def possible_update(old: str, new: str) -> bool:
    """The rule without an LLM: the new note reads exactly like the old one except for its
    numbers (a version, a limit, a default), and those differ."""
    key = skeleton(new)
    return key is not None and key == skeleton(old) and \
        _NUMBER.findall(old.casefold()) != _NUMBER.findall(new.casefold())


def older_versions(bullets_file: Path, bullets: list[str], new: str) -> list[str]:
    """The latest older note of ``bullets`` (file order) that ``new`` updates (``possible_update``).

    The skeleton map is kept per file and extended with the lines appended since the last call.
    """
    key = skeleton(new)
    if key is None:
        return []
    with _lock:
        count, index = _skeletons.get(str(bullets_file), (0, {}))
        if count > len(bullets):
            count, index = 0, {}
        for text in bullets[count:]:
            k = skeleton(text)
            if k is not None:
                index.setdefault(k, []).append(text)
        _skeletons[str(bullets_file)] = (len(bullets), index)
        older = [t for t in index.get(key, []) if possible_update(t, new)]
        return older[-1:]  # the latest: older ones were flagged when it came (one event a write)
