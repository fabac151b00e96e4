"""The per-spec memory folder, in the reference layout.

    <spec>/memory/codebase_map.json              path -> purpose, plus _metadata
    <spec>/memory/patterns.md                    "# Code Patterns" + "- " bullets
    <spec>/memory/gotchas.md                     "# Gotchas and Pitfalls" + "- " bullets
    <spec>/memory/session_insights/session_NNN.json

JSON files are replaced atomically; the bullet files are append-only (one whole line per write).
Every mutation holds the folder lock. Corrupt files are moved aside, never silently skipped.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import warnings
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator

from ..models import MemoryItem, normalise, parse_iso, stable_id
from .atomic import append_line, atomic_write_json, atomic_write_text, repair_tail
from .clear import clear_memory_folder
from .lock import folder_lock
from .safe import file_stat, is_link, open_file, read_bytes, real_dir, real_dirs

if TYPE_CHECKING:
    from ..identity import Project

log = logging.getLogger("graphmem.files")

HEADERS = {
    "gotcha": ("gotchas.md", "# Gotchas and Pitfalls\n\nThings to watch out for in this codebase:\n\n"),
    "pattern": ("patterns.md", "# Code Patterns\n\nEstablished patterns to follow in this codebase:\n\n"),
}
INSIGHT_LISTS = ("what_worked", "what_failed", "recommendations_for_next_session", "subtasks_completed")


class CorruptFileWarning(UserWarning):
    """A memory file could not be parsed and was moved aside."""


def quarantine(path: Path, reason: str) -> Path:
    """Move a corrupt file aside to ``<name>.corrupt-<timestamp>`` and warn with its name."""
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S%fZ")
    target = path.with_name(f"{path.name}.corrupt-{stamp}")
    try:
        os.replace(path, target)
    except FileNotFoundError:
        return target
    msg = f"graphmem: corrupt file {path} ({reason}) moved aside to {target.name}"
    log.warning(msg)
    warnings.warn(msg, CorruptFileWarning, stacklevel=3)
    return target


@dataclass
class _BulletCache:
    """What we know of a bullet file without rereading it: identity, length, tail and contents."""

    ident: tuple[int, int]  # (device, inode)
    size: int
    mtime_ns: int
    tail: bytes  # the last bytes we read, to tell an append from a rewrite
    bullets: list[str]
    seen: set[str]


_EMPTY = _BulletCache((0, 0), 0, 0, b"", [], set())


# Shared by every SpecStore of the process, so short-lived façades (the compat functions) do not
# reread a whole bullet file per append. Validated against the file's inode and size each time.
_BULLETS: dict[Path, _BulletCache] = {}
_BULLETS_LOCK = threading.Lock()


class SpecStore:
    """Reads and writes one spec's memory folder. Inputs are validated and redacted upstream."""

    def __init__(self, spec_dir: Path, project: "Project | Path | None" = None):
        from ..identity import Project, resolve_project

        self.spec_dir = Path(spec_dir).resolve()
        # The project names the items (its key) and anchors their paths (its root).
        self.project = project if isinstance(project, Project) else resolve_project(spec_dir, project)
        self.project_dir = self.project.root
        self.memory_dir = self.spec_dir / "memory"
        self.insights_dir = self.memory_dir / "session_insights"
        self.map_file = self.memory_dir / "codebase_map.json"

    # ---- helpers -------------------------------------------------------------------------
    def lock(self):
        """The cross-process lock for this memory folder (created, and refused when a link)."""
        real_dir(self.memory_dir, create=True)
        return folder_lock(self.memory_dir)

    def _has_memory_dir(self) -> bool:
        """Whether the memory folder exists; a link in its place is a ``StorageError``."""
        return real_dir(self.memory_dir)

    def _scope(self) -> tuple[str, str]:
        """(project key, spec folder relative to the project root): the same on every machine."""
        return self.project.key, self.project.rel(self.spec_dir)

    def _read_json(self, path: Path) -> Any | None:
        try:
            if not real_dir(path.parent):
                return None
            raw = read_bytes(path)
        except FileNotFoundError:
            return None
        try:
            return json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            quarantine(path, type(exc).__name__)
            return None

    # ---- session insights ----------------------------------------------------------------
    def session_file(self, session_num: int) -> Path:
        return self.insights_dir / f"session_{session_num:03d}.json"

    def read_session_insights(self, session_num: int) -> dict | None:
        """One session's saved insights, or None when absent or unreadable."""
        path = self.session_file(session_num)
        if not real_dirs(self.memory_dir, self.insights_dir) or is_link(path):
            return None
        data = self._read_json(path)
        return data if isinstance(data, dict) else None

    def save_session_insights(self, session_num: int, insights: dict[str, Any]) -> tuple[Path, dict]:
        """Write ``session_NNN.json`` with the reference's keys; returns its path and content."""
        data = {
            "session_number": session_num,
            "timestamp": datetime.now(timezone.utc).isoformat(),
            "subtasks_completed": insights.get("subtasks_completed", []),
            "discoveries": insights.get("discoveries") or {
                "files_understood": {}, "patterns_found": [], "gotchas_encountered": []},
            "what_worked": insights.get("what_worked", []),
            "what_failed": insights.get("what_failed", []),
            "recommendations_for_next_session": insights.get("recommendations_for_next_session", []),
        }
        for key, value in insights.items():  # keep extra keys an agent chose to store
            data.setdefault(key, value)
        path = self.session_file(session_num)
        with self.lock():
            real_dir(self.insights_dir, create=True)
            atomic_write_json(path, data)
        return path, data

    def load_all_insights(self) -> list[dict]:
        """Every readable session file, oldest first."""
        if not real_dirs(self.memory_dir, self.insights_dir):
            return []
        out = []
        for path in sorted(self.insights_dir.glob("session_*.json"), key=_session_order):
            if is_link(path):
                continue
            data = self._read_json(path)
            if isinstance(data, dict):
                out.append(data)
        return out

    # ---- codebase map --------------------------------------------------------------------
    def update_codebase_map(self, discoveries: dict[str, str]) -> Path:
        """Merge ``discoveries`` into the map and refresh ``_metadata``."""
        with self.lock():
            current = self._read_json(self.map_file)
            cmap = current if isinstance(current, dict) else {}
            cmap.update(discoveries)
            meta = cmap.get("_metadata") if isinstance(cmap.get("_metadata"), dict) else {}
            meta["last_updated"] = datetime.now(timezone.utc).isoformat()
            meta["total_files"] = len([k for k in cmap if k != "_metadata"])
            cmap["_metadata"] = meta
            atomic_write_json(self.map_file, cmap, sort_keys=True)
        return self.map_file

    def load_codebase_map(self) -> dict[str, str]:
        """The map without its ``_metadata``."""
        data = self._read_json(self.map_file)
        if not isinstance(data, dict):
            return {}
        data.pop("_metadata", None)
        return data

    # ---- gotchas and patterns ------------------------------------------------------------
    def bullet_file(self, kind: str) -> Path:
        return self.memory_dir / HEADERS[kind][0]

    def _refresh_bullets(self, kind: str) -> _BulletCache:
        """Bring the cache up to date, reading only bytes appended since the last look."""
        path = self.bullet_file(kind)
        with _BULLETS_LOCK:
            return self._refresh_locked(path)

    def _refresh_locked(self, path: Path) -> _BulletCache:
        st = file_stat(path) if self._has_memory_dir() else None
        if st is None:
            _BULLETS.pop(path, None)
            return _EMPTY
        ident = (st.st_dev, st.st_ino)
        cache = _BULLETS.get(path)
        if cache and cache.ident == ident and cache.size == st.st_size and cache.mtime_ns == st.st_mtime_ns:
            return cache
        with open_file(path) as f:
            start = 0
            if cache and cache.ident == ident and 0 < cache.size < st.st_size:
                f.seek(cache.size - len(cache.tail))
                if f.read(len(cache.tail)) == cache.tail:
                    start = cache.size  # an append: read only the new bytes
            if start == 0:
                cache = _BulletCache(ident, 0, 0, b"", [], set())
            f.seek(start)
            raw = f.read()
        if raw and not raw.endswith(b"\n"):
            raw = raw[: raw.rfind(b"\n") + 1]  # a torn last line is not an item
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            quarantine(path, "invalid UTF-8")
            _BULLETS.pop(path, None)
            return _EMPTY
        # Universal newlines, as the reference reads: a CR ends a line here too.
        for line in text.replace("\r\n", "\n").replace("\r", "\n").split("\n"):
            line = line.strip()
            if line.startswith("- "):
                item = line[2:].strip()
                cache.bullets.append(item)
                cache.seen.add(normalise(item))
        cache.size = start + len(raw)
        cache.mtime_ns = st.st_mtime_ns if cache.size == st.st_size else 0
        cache.tail = (cache.tail + raw)[-64:]
        _BULLETS[path] = cache
        return cache

    def append_bullet(self, kind: str, text: str) -> bool:
        """Append a gotcha or pattern unless an equal one (normalised) is there. True if added."""
        text = text.strip()
        path = self.bullet_file(kind)
        with self.lock():
            if repair_tail(path):
                with _BULLETS_LOCK:
                    _BULLETS.pop(path, None)
            cache = self._refresh_bullets(kind)
            if normalise(text) in cache.seen:
                return False
            st = file_stat(path)
            if st is None or st.st_size == 0:
                atomic_write_text(path, HEADERS[kind][1] + f"- {text}\n")
            else:
                append_line(path, f"- {text}")
            self._refresh_bullets(kind)
        return True

    def load_bullets(self, kind: str) -> list[str]:
        """Every bullet of ``gotchas.md`` or ``patterns.md``, in file order."""
        path = self.bullet_file(kind)
        with _BULLETS_LOCK:
            return list(self._refresh_locked(path).bullets)

    # ---- whole folder --------------------------------------------------------------------
    def clear(self) -> None:
        """Delete the files graphmem wrote in the spec's memory folder (see ``files.clear``)."""
        if not self._has_memory_dir():  # a link in its place is refused here, its target untouched
            return
        with self.lock():
            clear_memory_folder(self.memory_dir)

    def corrupt_files(self) -> list[Path]:
        """Files moved aside as corrupt, for ``graphmem doctor``."""
        if not self.memory_dir.is_dir():
            return []
        return sorted(p for p in self.memory_dir.rglob("*.corrupt-*"))

    # ---- items for indexes and the graph ---------------------------------------------------
    def session_items(self, data: dict, source: Path) -> list[MemoryItem]:
        """The searchable items inside one session file."""
        project, spec = self._scope()
        session = str(data.get("session_number", ""))
        when = parse_iso(data.get("timestamp")) or _mtime(source)
        base = dict(project=project, spec=spec, session=session, time=when,
                    source=self.project.rel(source))
        items: list[MemoryItem] = []
        for field in INSIGHT_LISTS:
            for text in data.get(field) or []:
                if isinstance(text, str) and text.strip():
                    items.append(MemoryItem(
                        id=stable_id(project, spec, "insight", session, field, text), kind="insight",
                        text=text.strip(), metadata={"field": field}, **base))
        disc = data.get("discoveries") if isinstance(data.get("discoveries"), dict) else {}
        for path, purpose in (disc.get("files_understood") or {}).items():
            if isinstance(purpose, str):
                items.append(_file_item(project, spec, path, purpose, base))
        for kind, key in (("pattern", "patterns_found"), ("gotcha", "gotchas_encountered")):
            for text in disc.get(key) or []:
                if isinstance(text, str) and text.strip():
                    items.append(MemoryItem(id=stable_id(project, spec, kind, text), kind=kind,
                                            text=text.strip(), metadata={"field": key}, **base))
        return items

    def map_items(self, files: dict[str, str]) -> list[MemoryItem]:
        project, spec = self._scope()
        base = dict(project=project, spec=spec, session=None, time=_mtime(self.map_file),
                    source=self.project.rel(self.map_file))
        return [_file_item(project, spec, p, v, base) for p, v in files.items() if isinstance(v, str)]

    def bullet_items(self, kind: str, texts: list[str]) -> list[MemoryItem]:
        project, spec = self._scope()
        path = self.bullet_file(kind)
        when = _mtime(path)
        return [MemoryItem(id=stable_id(project, spec, kind, t), kind=kind, text=t, project=project,
                           spec=spec, time=when, source=self.project.rel(path)) for t in texts]

    def items(self) -> Iterator[MemoryItem]:
        """Every searchable item in this spec's files (used to rebuild indexes and the graph)."""
        for data in self.load_all_insights():
            num = data.get("session_number")
            src = self.session_file(num) if isinstance(num, int) else self.insights_dir
            yield from self.session_items(data, src)
        yield from self.map_items(self.load_codebase_map())
        for kind in HEADERS:
            yield from self.bullet_items(kind, self.load_bullets(kind))


def _session_order(path: Path) -> tuple[int, str]:
    """Numeric order, so session_1000 comes after session_999."""
    digits = path.stem.removeprefix("session_")
    return (int(digits) if digits.isdigit() else 1 << 62, path.name)


def _file_item(project: str, spec: str, path: str, purpose: str, base: dict) -> MemoryItem:
    return MemoryItem(id=stable_id(project, spec, "file", path), kind="file",
                      text=f"{path}: {purpose}", metadata={"path": path, "purpose": purpose}, **base)


def _mtime(path: Path) -> datetime:
    try:
        return datetime.fromtimestamp(path.stat().st_mtime, timezone.utc)
    except OSError:
        return datetime.now(timezone.utc)
