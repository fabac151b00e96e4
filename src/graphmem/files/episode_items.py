"""Episode records as searchable memory items: a turn, a step, a session's summary.

Built from lines already validated on their way into the files, so ``turn_item`` and
``step_item`` skip re-validation (``MemoryItem.model_construct``): rebuilding an index from
thousands of sessions calls them once per line.
"""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ..models import MemoryItem, hash_id, parse_iso, stable_id


def turn_item(project: str, spec: str, sid: str, t: dict, source: str | Path) -> MemoryItem:
    """A conversation turn as a searchable item (kind "turn")."""
    user = m if isinstance(m := t.get("metadata"), dict) else {}
    meta = {**user, "role": t.get("role"), "speaker": user.get("speaker") or t.get("role"),
            "turn_index": t.get("index"), "turn_id": t.get("id")}
    for key in ("model", "tokens"):
        if t.get(key) is not None:
            meta[key] = t[key]
    return MemoryItem.model_construct(
        id=item_id(project, spec, "turn", sid, str(t.get("id"))), kind="turn",
        text=str(t.get("content", "")), project=project, spec=spec, session=sid, time=_when(t),
        metadata=meta, source=str(source))


def step_text(name: str, status: str, payload: Any) -> str:
    """How a step reads when searched: ``name: status`` and its payload as compact JSON."""
    text = f"{name}: {status}"
    if payload not in (None, {}, []):
        text += " " + json.dumps(payload, ensure_ascii=False, separators=(",", ":"))
    return text


def step_item(project: str, spec: str, sid: str, s: dict, source: str | Path) -> MemoryItem:
    """An execution step as a searchable item (kind "step")."""
    meta = {"step": s.get("name"), "status": s.get("status"), "step_index": s.get("index"),
            "step_id": s.get("id")}
    return MemoryItem.model_construct(
        id=item_id(project, spec, "step", sid, str(s.get("id"))), kind="step",
        text=step_text(str(s.get("name")), str(s.get("status")), s.get("payload")),
        project=project, spec=spec, session=sid, time=_when(s), metadata=meta, source=str(source))


def summary_item(project: str, spec: str, meta: dict, source: str | Path) -> MemoryItem:
    """A session's summary as a searchable fact; one id per session, so a new summary replaces it."""
    sid = meta["session_id"]
    when = parse_iso(meta.get("summary_updated_at")) or parse_iso(meta.get("started_at"))
    return MemoryItem(id=stable_id(project, spec, "session-summary", sid), kind="fact",
                      text=str(meta["summary"]), project=project, spec=spec, session=sid,
                      time=when or datetime.now(timezone.utc),
                      metadata={"field": "session_summary"}, source=str(source))


def item_id(*parts: str) -> str:
    """Like ``models.stable_id`` without normalising: these parts are ids and paths, not prose."""
    return hash_id(*parts)


def _when(rec: dict) -> datetime:
    return parse_iso(rec.get("at")) or datetime.now(timezone.utc)
