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

from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Iterable

from graphmem.files.insight_shapes import Entry, entries as shape_entries, retry_key, session_facts
from graphmem.models import MemoryItem, hash_id, normalise, parse_iso


def entry_id(project: str, spec: str, e: Entry, subtask: str | None = None) -> str:
    """The identity a learning keeps across the sessions of one spec."""
    return _Ids(project, spec).of(e, subtask)


class _Ids:
    """``entry_id`` for one spec, memoised: a retry loop repeats the same few entries."""

    def __init__(self, project: str, spec: str):
        self.prefix = f"{normalise(project)}\x1f{normalise(spec)}\x1f"  # as stable_id joins them
        self.memo: dict[tuple, str] = {}

    def _hash(self, *parts: str) -> str:
        return hash_id(self.prefix + "\x1f".join(normalise(p) for p in parts))

    def of(self, e: Entry, subtask: str | None) -> str:
        key = (e.kind, e.field, e.text, e.path, subtask if e.kind == "insight" else None)
        iid = self.memo.get(key)
        if iid is None:
            if e.kind == "file":
                iid = self._hash("file", e.path or "")
            elif e.kind in ("pattern", "gotcha"):
                iid = self._hash(e.kind, e.text)
            else:
                iid = self._hash("insight", e.field, retry_key(e.text, subtask))
            self.memo[key] = iid
        return iid


@dataclass
class _Seen:
    """What is known of one learning so far: its latest entry and where it was seen."""

    entry: Entry
    facts: dict
    source: str
    session: str
    when: datetime
    count: int
    first: tuple[datetime, str]
    last: tuple[datetime, str]


def _session_when(data: dict, mtime: datetime) -> datetime:
    return (parse_iso(data.get("timestamp")) or mtime).astimezone(timezone.utc)


def collapse(project: str, spec: str,
             sessions: Iterable[tuple[dict, Path | str, datetime, list[Entry] | None]],
             only_session: int | None = None) -> list[MemoryItem]:
    """The items of many session files (oldest first), those with one id merged into one item
    with a count. ``only_session``: just the items that session holds (still counted over all)."""
    sessions = list(sessions)
    ids = _Ids(project, spec)
    wanted: set[str] | None = None
    if only_session is not None:
        wanted = set()
        for data, _, _, found in sessions:
            if data.get("session_number") == only_session:
                subtask = session_facts(data).get("subtask")
                wanted.update(ids.of(e, subtask) for e in (found if found is not None
                                                            else shape_entries(data)))
    acc: dict[str, _Seen] = {}
    for data, source, mtime, found in sessions:
        facts = session_facts(data)
        subtask = facts.get("subtask")
        session = str(data.get("session_number", ""))
        when = None
        counted: set[str] = set()
        for e in found if found is not None else shape_entries(data):
            iid = ids.of(e, subtask)
            if wanted is not None and iid not in wanted:
                continue
            when = when or _session_when(data, mtime)
            seen = acc.get(iid)
            if seen is None:
                acc[iid] = _Seen(e, facts, str(source), session, when, 1, (when, session),
                                 (when, session))
                counted.add(iid)
                continue
            seen.entry, seen.facts, seen.source, seen.session, seen.when = \
                e, facts, str(source), session, when  # the latest wording wins
            if iid not in counted:  # a session counts once, however often it says it
                counted.add(iid)
                seen.count += 1
                seen.first = min(seen.first, (when, session))
                seen.last = max(seen.last, (when, session))
    return [_item(iid, s, project, spec) for iid, s in acc.items()]


def _item(iid: str, s: _Seen, project: str, spec: str) -> MemoryItem:
    e = s.entry
    meta: dict = {"field": e.field, **s.facts}
    if e.kind == "file":
        meta.update(path=e.path, purpose=e.purpose)
    meta.update(count=s.count, first=s.first[0].isoformat(), last=s.last[0].isoformat(),
                first_session=s.first[1], last_session=s.last[1])
    return MemoryItem(id=iid, kind=e.kind, text=e.text, project=project, spec=spec,
                      session=s.session, time=s.when, source=s.source, metadata=meta)


def session_items(project: str, spec: str, data: dict, source: Path | str, mtime: datetime,
                  found: list[Entry] | None = None) -> list[MemoryItem]:
    """The items of one session file, each counted once (``count`` 1)."""
    return collapse(project, spec, [(data, source, mtime, found)])


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
