"""graphmem's export: a project's (or a spec's) memory and its history in one JSON Lines file.

One JSON object per line (UTF-8). The first line is the header; the others are items and the
validity events of the spec folders they came from (the README documents every field)::

    {"type": "header", "format": "graphmem-export", "version": 1, "project": "github.com/o/r",
     "spec": null, "exported_at": "2026-12-06T01:00:00+00:00"}
    {"type": "item", "id": "3f0c...", "kind": "gotcha", "text": "...", "spec": ".graphmem",
     "session": null, "time": "...", "source": ".graphmem/memory/gotchas.md", "metadata": {}}
    {"type": "validity", "spec": ".graphmem", "item": "3f0c...", "state": "retired", "by": null,
     "reason": "...", "invalid_at": "...", "recorded_at": "..."}

``read_export`` checks every line before anything is written: a line of the wrong shape is a
``ValidationError`` naming the file and line number.
"""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterable

from ..errors import ValidationError

FORMAT = "graphmem-export"
VERSION = 1
ITEM_FIELDS = {"id": str, "kind": str, "text": str, "spec": (str, type(None)),
               "session": (str, type(None)), "time": (str, type(None)), "source": str,
               "metadata": dict}
EVENT_FIELDS = {"spec": (str, type(None)), "item": str, "state": str, "by": (str, type(None)),
                "reason": (str, type(None)), "invalid_at": (str, type(None)),
                "recorded_at": (str, type(None))}


def header(project: str, spec: str | None) -> dict[str, Any]:
    """The first line of an export."""
    return {"type": "header", "format": FORMAT, "version": VERSION, "project": project, "spec": spec,
            "exported_at": datetime.now(timezone.utc).isoformat(timespec="seconds")}


def item_line(item: Any) -> dict[str, Any]:
    """One ``MemoryItem`` as an export line."""
    return {"type": "item", "id": item.id, "kind": item.kind, "text": item.text, "spec": item.spec,
            "session": item.session, "time": item.time.isoformat() if item.time else None,
            "source": item.source, "metadata": item.metadata}


def event_line(spec: str | None, ev: dict) -> dict[str, Any]:
    """One validity event (``validity_log``) as an export line."""
    return {"type": "validity", "spec": spec, **{k: ev.get(k) for k in EVENT_FIELDS if k != "spec"}}


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


def read_export(path: Path, text: str) -> tuple[dict, list[dict], list[dict]]:
    """(header, item lines, validity lines) of an export; ``ValidationError`` naming the line
    (``<path> line N``) of the first line that is not JSON or not of its type's shape."""
    items: list[dict] = []
    events: list[dict] = []
    head: dict | None = None
    for n, line in enumerate(text.splitlines(), 1):
        where = f"{path} line {n}"
        if not line.strip():
            continue
        try:
            rec = json.loads(line)
        except ValueError as exc:
            raise ValidationError(f"is not JSON: {exc}", field=where) from None
        if not isinstance(rec, dict):
            raise ValidationError(f"must be a JSON object, got {type(rec).__name__}", field=where)
        if head is None:
            if rec.get("format") != FORMAT:
                raise ValidationError(f"must be the header {{\"format\": \"{FORMAT}\", ...}}",
                                      field=where)
            if rec.get("version") != VERSION:
                raise ValidationError(f"version {rec.get('version')!r} is not one this graphmem "
                                      f"reads ({VERSION})", field=where)
            head = rec
            continue
        kind = rec.get("type")
        if kind == "item":
            _check(rec, ITEM_FIELDS, where)
            items.append(rec)
        elif kind == "validity":
            _check(rec, EVENT_FIELDS, where)
            events.append(rec)
        else:
            raise ValidationError(f"'type' must be 'item' or 'validity', got {kind!r}", field=where)
    if head is None:
        raise ValidationError("is empty: an export starts with its header line", field=str(path))
    return head, items, events
