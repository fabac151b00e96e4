"""graphmem's export: a project's (or a spec's) memory and its history in one JSON Lines file.

One JSON object per line (UTF-8). The first line is the header; the others are items and the
validity events of the spec folders they came from (the README documents every field)::

    {"type": "header", "format": "graphmem-export", "version": 1, "project": "github.com/o/r",
     "spec": null, "exported_at": "2026-12-06T01:00:00+00:00"}
    {"type": "item", "id": "3f0c...", "kind": "gotcha", "text": "...", "spec": ".graphmem",
     "session": null, "time": "...", "source": ".graphmem/memory/gotchas.md", "metadata": {}}
    {"type": "validity", "spec": ".graphmem", "item": "3f0c...", "state": "retired", "by": null,
     "reason": "...", "invalid_at": "...", "recorded_at": "..."}
    {"type": "validity", "spec": ".graphmem", "item": "9a1d...", "state": "pending", ...,
     "who": "agent-hooks", "act": "20261206T031502-9f2c1a", "action": "hold", "was": null}

Version 2 carries review's steps (``files/review_log.py``): a validity line of the log that is a
review line keeps its ``who``, ``act``, ``action`` and ``was`` (and ``proposes``, ``before``,
``undoes``, ``held_by`` when it has them), so an import gives the memory the same review state.
Version 1 (no review fields) is still read.

Version 3 carries the session files themselves (``files/session_transfer.py``): the items of a
session are collapsed across sessions (``insight_items``), so they alone cannot rebuild one::

    {"type": "session", "spec": ".graphmem", "session": 3,
     "source": ".graphmem/memory/session_insights/session_003-1f3a9c.json", "data": {...}}

``data`` is the file's JSON as stored. An older graphmem refuses a version 3 export at its header
(it would refuse the session lines anyway, at their line); versions 1 and 2 are still read.

Version 4 carries the episodes (``files/episode_transfer.py``): a turn's or a step's item line is
what search reads, not the record (its ``at``, ``index``, ``model``, a step's ``payload`` as
stored), so one line per session folder carries its three files::

    {"type": "episode", "spec": ".graphmem", "session": "ses-1f3a9c...",
     "source": ".graphmem/memory/episodes/ses-1f3a9c...", "meta": {...}, "turns": [...],
     "steps": [...]}

``meta`` is its ``session.json``, ``turns`` and ``steps`` the lines of its JSON Lines files, as
stored (``episode_transfer.episode_lines`` writes them, ``episode_transfer.problem`` checks
one). A version 1 to 3 export is still read (its turns and steps reported skipped).

``read_export`` checks every line before anything is written: a line of the wrong shape is a
``ValidationError`` naming the file and line number, except a review line, which is returned
among the bad ones with the field at fault (an import reports it and skips that memory's review).
"""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterable, NamedTuple

from ..errors import ValidationError
from ..models import check_json
from .episode_transfer import problem as episode_problem
from .review_log import ACTIONS
from .session_names import NAME
from .session_transfer import number_problem
from .validity_log import _ID, PENDING, PROPOSED, REVIEW_STATES, STATES

FORMAT = "graphmem-export"
VERSION = 4  # 2: validity lines carry review's fields; 3: session lines; 4: episode lines
READS = (1, 2, 3, 4)
# bytes of an export import reads (held in memory whole): its episodes make it far larger than
# an agent's rules file (``agent_files.MAX_FILE``)
MAX_BYTES = 256 << 20
_Types = dict[str, Any]
ITEM_FIELDS: _Types = {"id": str, "kind": str, "text": str, "spec": (str, type(None)),
                       "session": (str, type(None)), "time": (str, type(None)), "source": str,
                       "metadata": dict}
EVENT_FIELDS: _Types = {"spec": (str, type(None)), "item": str, "state": str,
                        "by": (str, type(None)), "reason": (str, type(None)),
                        "invalid_at": (str, type(None)), "recorded_at": (str, type(None))}
SESSION_FIELDS: _Types = {"spec": (str, type(None)), "session": int, "source": str, "data": dict}
# a review line's own fields (``files/review_log.py``): required, then those it may have
REVIEW_FIELDS: _Types = {"who": (str, type(None)), "act": str, "action": str,
                         "was": (dict, type(None))}
REVIEW_EXTRA: _Types = {"proposes": (str, type(None)), "before": (dict, type(None)),
                        "undoes": (str, type(None)), "held_by": (str, type(None))}
# what an import copies of a validity line into the log, in the log's order (``was`` and
# ``before`` last: a nested event keeps the others)
LOG_FIELDS = ("item", "state", "by", "reason", "invalid_at", "recorded_at", "who", "act", "action",
              "proposes", "undoes", "held_by", "was", "before")
_ACTION_STATE = {"hold": PENDING, "propose": PROPOSED}  # the state a line of that action logs


def header(project: str, spec: str | None) -> dict[str, Any]:
    """The first line of an export."""
    return {"type": "header", "format": FORMAT, "version": VERSION, "project": project, "spec": spec,
            "exported_at": datetime.now(timezone.utc).isoformat(timespec="seconds")}


def item_line(item: Any) -> dict[str, Any]:
    """One ``MemoryItem`` as an export line."""
    return {"type": "item", "id": item.id, "kind": item.kind, "text": item.text, "spec": item.spec,
            "session": item.session, "time": item.time.isoformat() if item.time else None,
            "source": item.source, "metadata": item.metadata}


def session_line(spec: str | None, source: str, data: dict) -> dict[str, Any]:
    """One session file (``source``, relative to the project) as an export line."""
    number = NAME.fullmatch(source.rsplit("/", 1)[-1])
    return {"type": "session", "spec": spec, "session": int(number.group(1)) if number else None,
            "source": source, "data": data}


def _check_session(rec: dict, where: str) -> None:
    """A session line's shape: ``ValidationError`` naming the line and the field at fault."""
    _check(rec, {k: v for k, v in SESSION_FIELDS.items() if k != "session"}, where)
    if "session" not in rec:
        raise ValidationError("has no 'session'", field=where)
    problem = number_problem(rec["session"])
    if problem:
        raise ValidationError(f"'session' {problem}", field=where)
    name = rec["source"].rsplit("/", 1)[-1]
    named = NAME.fullmatch(name)
    if named is None or int(named.group(1)) != rec["session"]:
        raise ValidationError(f"'source' must end in session_{rec['session']:03d}.json (or "
                              f"session_{rec['session']:03d}-<tag>.json), got {name!r:.60}",
                              field=where)
    try:  # what graphmem writes: no deeper than MAX_DEPTH (a deeper one would not be read)
        check_json(rec["data"], "data")
    except ValidationError as exc:
        raise ValidationError(f"'{exc.field}' {str(exc).split(': ', 1)[-1]}", field=where) from None
    if "session_number" in rec["data"]:
        problem = number_problem(rec["data"]["session_number"])
        if problem:
            raise ValidationError(f"'data.session_number' {problem}", field=where)


def event_line(spec: str | None, ev: dict) -> dict[str, Any]:
    """One validity event (``validity_log``) as an export line; a review line with its review
    fields (``REVIEW_FIELDS``, and those of ``REVIEW_EXTRA`` it has)."""
    line = {"type": "validity", "spec": spec, **{k: ev.get(k) for k in EVENT_FIELDS if k != "spec"}}
    if is_review(ev):
        line.update({k: ev.get(k) for k in REVIEW_FIELDS})
        line.update({k: ev[k] for k in REVIEW_EXTRA if k in ev})
    return line


def is_review(rec: dict) -> bool:
    """Whether a validity line is one of review's (it names a step: ``act`` or ``action``)."""
    return "act" in rec or "action" in rec


def review_problem(rec: dict) -> tuple[str, str] | None:
    """(field, what is wrong) of a review line that cannot be replayed, None when it can."""
    item = rec.get("item")
    if not isinstance(item, str) or not _ID.fullmatch(item):
        return "item", ("is missing" if item is None else f"must be a memory id (24 hex "
                        f"characters), got {item!r:.40}")
    for fields, required in ((EVENT_FIELDS, True), (REVIEW_FIELDS, True), (REVIEW_EXTRA, False)):
        for name, types in fields.items():
            if name not in rec:
                if required and name != "spec":
                    return name, "is missing"
                continue
            if not isinstance(rec[name], types):
                return name, f"must be {_names(types)}, got {type(rec[name]).__name__}"
    if rec["action"] not in ACTIONS:
        return "action", f"must be one of {', '.join(ACTIONS)}, got {rec['action']!r:.40}"
    if rec["state"] not in STATES + REVIEW_STATES:
        return "state", f"{rec['state']!r:.40} is not a validity or review state"
    want = _ACTION_STATE.get(rec["action"])
    if want is not None and rec["state"] != want:
        return "state", f"a {rec['action']} line logs {want}, got {rec['state']!r:.40}"
    if rec["state"] == PROPOSED and rec.get("proposes") not in STATES:
        return "proposes", f"must be one of {', '.join(STATES)} on a proposed line"
    if rec["action"] == "undo" and not isinstance(rec.get("undoes"), str):
        return "undoes", "an undo line names the step it undoes"
    for name in ("was", "before"):
        nested = rec.get(name)
        for key in ("item", "by"):
            if isinstance(nested, dict) and not isinstance(nested.get(key), (str, type(None))):
                return f"{name}.{key}", f"must be str or null, got {type(nested[key]).__name__}"
    return None


def dump(lines: Iterable[dict]) -> str:
    """The export's text: one compact JSON object per line."""
    return "".join(json.dumps(x, ensure_ascii=False, default=str, sort_keys=False) + "\n"
                   for x in lines)


def is_export(path: Path) -> bool:
    """Whether ``path`` starts with an export's header line."""
    try:
        with open(path, "rb") as f:
            first = f.readline(4096)
    except OSError:
        return False
    return first.startswith(b"{") and f'"format": "{FORMAT}"'.encode() in first


def _check(rec: dict, fields: dict, where: str) -> None:
    for name, types in fields.items():
        if name not in rec:
            raise ValidationError(f"has no '{name}'", field=where)
        if not isinstance(rec[name], types):
            raise ValidationError(f"'{name}' must be {_names(types)}, got "
                                  f"{type(rec[name]).__name__}", field=where)


def _names(types: Any) -> str:
    types = types if isinstance(types, tuple) else (types,)
    return " or ".join("null" if t is type(None) else t.__name__ for t in types)


Line = tuple[int, dict]  # (line number, the line)


class Export(NamedTuple):
    """An export as read: its header and its lines by type."""

    head: dict
    items: list[dict]
    events: list[Line]  # validity lines, with their numbers
    bad: list[tuple[int, dict, str, str]]  # review lines that cannot be replayed: (n, line, field, why)
    sessions: list[Line]
    episodes: list[Line]


def read_export(path: Path, text: str) -> Export:
    """An export's lines by type; ``ValidationError`` naming the line (``<path> line N``) of
    the first line that is not JSON or not of its type's shape (but a review line's, which is
    among the ``bad``)."""
    items: list[dict] = []
    sessions: list[Line] = []
    episodes: list[Line] = []
    events: list[Line] = []
    bad: list[tuple[int, dict, str, str]] = []
    head: dict | None = None
    for n, line in enumerate(text.splitlines(), 1):
        where = f"{path} line {n}"
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except ValueError as exc:
            raise ValidationError(f"is not JSON: {exc}", field=where) from None
        except RecursionError:
            raise ValidationError("is nested too deep to read", field=where) from None
        if not isinstance(rec, dict):
            raise ValidationError(f"must be a JSON object, got {type(rec).__name__}", field=where)
        if head is None:
            if rec.get("format") != FORMAT:
                raise ValidationError(f"must be the header {{\"format\": \"{FORMAT}\", ...}}",
                                      field=where)
            if rec.get("version") not in READS:
                raise ValidationError(f"version {rec.get('version')!r} is not one this graphmem "
                                      f"reads ({', '.join(map(str, READS))})", field=where)
            head = rec
            continue
        kind = rec.get("type")
        if kind == "item":
            _check(rec, ITEM_FIELDS, where)
            items.append(rec)
        elif kind == "session":
            _check_session(rec, where)
            sessions.append((n, rec))
        elif kind == "episode":
            problem = episode_problem(rec)
            if problem:
                raise ValidationError(f"'{problem[0]}' {problem[1]}", field=where)
            episodes.append((n, rec))
        elif kind == "validity" and is_review(rec):
            problem = review_problem(rec)
            if problem is None:
                events.append((n, rec))
            else:
                bad.append((n, rec, *problem))
        elif kind == "validity":
            _check(rec, EVENT_FIELDS, where)
            events.append((n, rec))
        else:
            raise ValidationError(f"'type' must be 'item', 'session', 'episode' or 'validity', "
                                  f"got {kind!r:.40}", field=where)
    if head is None:
        raise ValidationError("is empty: an export starts with its header line", field=str(path))
    return Export(head, items, events, bad, sessions, episodes)
