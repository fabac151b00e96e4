"""Memory items from session insight files, with retry loops collapsed into one item each.

An agent stuck in a retry loop writes the same lesson in every session ("Failed to complete
subtask: X", the same outcome, the same changed files). Every learning is therefore identified
per spec, not per session: a file by its path, a pattern or gotcha by its text, an insight by its
field and its text (with numbers masked within one subtask: ``insight_shapes.retry_key``). The sessions that share an
identity become one item carrying ``count`` (sessions that said it), ``first``/``last`` (their
times) and ``first_session``/``last_session``; its text is the latest wording. Search, context and
consolidation show that count instead of thousands of copies.
"""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path
from typing import Iterable

from .insight_shapes import Entry, entries as shape_entries, retry_key, session_facts
from .models import MemoryItem, parse_iso, stable_id


def entry_id(project: str, spec: str, e: Entry, subtask: str | None = None) -> str:
    """The identity a learning keeps across the sessions of one spec."""
    if e.kind == "file":
        return stable_id(project, spec, "file", e.path or "")
    if e.kind in ("pattern", "gotcha"):
        return stable_id(project, spec, e.kind, e.text)
    return stable_id(project, spec, "insight", e.field, retry_key(e.text, subtask))


def session_items(project: str, spec: str, data: dict, source: Path, mtime: datetime,
                  found: list[Entry] | None = None) -> list[MemoryItem]:
    """The items of one session file, each counted once (``count`` 1)."""
    found = shape_entries(data) if found is None else found
    session = str(data.get("session_number", ""))
    when = (parse_iso(data.get("timestamp")) or mtime).astimezone(timezone.utc)
    facts = session_facts(data)
    out: dict[str, MemoryItem] = {}
    for e in found:
        meta = {"field": e.field, **facts}
        if e.kind == "file":
            meta.update(path=e.path, purpose=e.purpose)
        iid = entry_id(project, spec, e, facts.get("subtask"))
        out[iid] = MemoryItem(id=iid, kind=e.kind, text=e.text, project=project, spec=spec,
                              session=session, time=when, source=str(source),
                              metadata={**meta, "count": 1, "first": when.isoformat(),
                                        "last": when.isoformat(), "first_session": session,
                                        "last_session": session})
    return list(out.values())


def collapse(per_session: Iterable[list[MemoryItem]]) -> list[MemoryItem]:
    """Merge the items of many sessions (oldest first) that share an id into one with a count."""
    merged: dict[str, MemoryItem] = {}
    for items in per_session:
        for it in items:
            old = merged.get(it.id)
            if old is None:
                merged[it.id] = it
                continue
            m, o = it.metadata, old.metadata
            first = min((o["first"], o["first_session"]), (m["first"], m["first_session"]))
            last = max((o["last"], o["last_session"]), (m["last"], m["last_session"]))
            merged[it.id] = it.model_copy(update={"metadata": {
                **m, "count": o["count"] + m["count"], "first": first[0], "first_session": first[1],
                "last": last[0], "last_session": last[1]}})
    return list(merged.values())


def count_note(metadata: dict) -> str:
    """``seen in N sessions (first ..., last ...)`` for a collapsed item; empty for a single one."""
    n = metadata.get("count")
    if not isinstance(n, int) or n < 2:
        return ""
    first, last = str(metadata.get("first", ""))[:10], str(metadata.get("last", ""))[:10]
    span = f"{first} to {last}" if first != last else first
    fs, ls = metadata.get("first_session"), metadata.get("last_session")
    sessions = f"sessions {fs}-{ls}, " if fs and ls and fs != ls else ""
    return f"seen in {n} sessions ({sessions}{span})"
