"""The graph outbox: items the graph could not take yet, kept durably beside the spec's memory.

    <spec>/memory/graph_outbox.jsonl   one JSON object per line:
        {"entry": "<random id>", "queued_at": "...", "error": "...", "items": [MemoryItem, ...]}

Adding appends one whole line (fsync'd) under the folder lock; replay reads the entries, writes
them to the graph, then rewrites the file atomically without the entries that went through.
Graph writes are idempotent on item ids, so an entry replayed twice (two processes replaying at
once, or a crash between the graph write and the rewrite) never duplicates anything.
"""

from __future__ import annotations

import json
import logging
import uuid
from datetime import datetime, timezone
from pathlib import Path
from typing import Iterable

from ..models import MemoryItem
from .atomic import append_line, atomic_write_text, repair_tail
from .lock import folder_lock
from .safe import file_stat, read_bytes, real_dir

log = logging.getLogger("graphmem.outbox")

OUTBOX_NAME = "graph_outbox.jsonl"


class Outbox:
    """The durable queue of graph writes for one memory folder."""

    def __init__(self, memory_dir: Path):
        self.memory_dir = Path(memory_dir)
        self.path = self.memory_dir / OUTBOX_NAME

    def add(self, items: Iterable[MemoryItem], error: str = "") -> str | None:
        """Queue ``items``; returns the entry id (None when there was nothing to queue)."""
        items = list(items)
        if not items:
            return None
        entry = uuid.uuid4().hex
        line = json.dumps({"entry": entry, "queued_at": datetime.now(timezone.utc).isoformat(),
                           "error": error[:500], "items": [i.model_dump(mode="json") for i in items]},
                          ensure_ascii=False)
        real_dir(self.memory_dir, create=True)  # a link in its place is refused, never followed
        with folder_lock(self.memory_dir):
            repair_tail(self.path)
            append_line(self.path, line)
        return entry

    def entries(self) -> list[dict]:
        """Every readable entry, oldest first. A torn or unreadable line is logged and skipped
        here but stays in the file until ``remove`` rewrites it aside."""
        try:
            if not real_dir(self.memory_dir):
                return []
            raw = read_bytes(self.path).decode("utf-8", errors="replace")
        except FileNotFoundError:
            return []
        out = []
        for n, line in enumerate(raw.splitlines(), 1):
            if not line.strip():
                continue
            try:
                data = json.loads(line)
                data["items"] = [MemoryItem.model_validate(i) for i in data["items"]]
                out.append(data)
            except (ValueError, KeyError, TypeError) as exc:
                log.warning("graph outbox %s line %d unreadable (%s)", self.path, n, exc)
        return out

    def pending_items(self) -> list[MemoryItem]:
        """The queued items, deduplicated by id (``latest_items``)."""
        return latest_items(self.entries())

    def size(self) -> int:
        """How many distinct items are waiting."""
        return len(self.pending_items())

    def remove(self, entry_ids: Iterable[str]) -> None:
        """Drop entries that reached the graph; entries added meanwhile are kept."""
        done = set(entry_ids)
        if not done or not real_dir(self.memory_dir) or not file_stat(self.path):
            return
        with folder_lock(self.memory_dir):
            try:
                raw = read_bytes(self.path).decode("utf-8", errors="replace")
            except FileNotFoundError:
                return
            keep = []
            for line in raw.splitlines():
                if not line.strip():
                    continue
                try:
                    if json.loads(line).get("entry") in done:
                        continue
                except ValueError:
                    if not raw.endswith("\n") and line == raw.splitlines()[-1]:
                        continue  # a torn last line from a crash mid-append: never complete
                keep.append(line)
            if keep:
                atomic_write_text(self.path, "\n".join(keep) + "\n")
            else:
                self.path.unlink(missing_ok=True)


def latest_items(entries: Iterable[dict]) -> list[MemoryItem]:
    """The items of outbox entries (oldest first), each id once: its latest version, in the
    order the latest versions were queued."""
    latest: dict[str, MemoryItem] = {}
    for entry in entries:
        for item in entry["items"]:
            latest.pop(item.id, None)
            latest[item.id] = item
    return list(latest.values())
