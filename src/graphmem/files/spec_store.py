"""The per-spec memory folder, in the reference layout.

    <spec>/memory/codebase_map.json              path -> purpose, plus _metadata
    <spec>/memory/patterns.md                    "# Code Patterns" + "- " bullets
    <spec>/memory/gotchas.md                     "# Gotchas and Pitfalls" + "- " bullets
    <spec>/memory/session_insights/session_NNN.json
                                                 (``session_NNN-<writer>.json`` in a project's
                                                 own memory: ``session_names.py``)

JSON files are replaced atomically; the bullet files are append-only (one whole line per write).
Every mutation holds the folder lock. Corrupt files are moved aside, never silently skipped.
"""

from __future__ import annotations

import json
import logging
import os
import pickle
import threading
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator

from graphmem.files import insight_items

from graphmem.files import insight_shapes
from graphmem.files.insight_shapes import Entry
from graphmem.files import agent_formats, session_names
from ..models import MemoryItem, normalise, stable_id
from ..errors import StorageError
from .atomic import append_line, atomic_write_json, atomic_write_text, repair_tail
from .clear import clear_memory_folder
from .lock import folder_lock
from .safe import file_stat, is_link, open_file, read_bytes, real_dir, real_dirs
from .salvage import quarantine, salvage_utf8

if TYPE_CHECKING:
    from ..identity import Project

log = logging.getLogger("graphmem.files")

HEADERS = {
    "gotcha": ("gotchas.md", "# Gotchas and Pitfalls\n\nThings to watch out for in this codebase:\n\n"),
    "pattern": ("patterns.md", "# Code Patterns\n\nEstablished patterns to follow in this codebase:\n\n"),
}
INSIGHT_LISTS = ("what_worked", "what_failed", "recommendations_for_next_session", "subtasks_completed")


class _NeedsSalvage(Exception):
    """A bullet file holds invalid UTF-8 (repaired outside the cache lock, then reread)."""


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


@dataclass
class _SessionFile:
    """One parsed ``session_NNN.json``, valid while its inode, size and mtime are unchanged."""

    key: tuple[int, int, int]
    data: dict
    entries: list[Entry]
    mtime: datetime
    counted: bool  # its files, patterns and gotchas count in the map and bullets (newer shape)
    path: Path
    copy_blob: bytes | None = None  # pickled copy for load_all_insights (faster than deepcopy)
    problem: str | None = None  # what graphmem could not interpret ("" when nothing), see kept_as_written


# Per insights folder: file name -> parsed file. A long-lived process (MCP server) rereads only
# the session files that changed; a retry loop leaves thousands of them.
_SESSIONS: dict[Path, dict[str, _SessionFile]] = {}
_SESSIONS_LOCK = threading.Lock()


# Shared by every SpecStore of the process, so short-lived façades (the compat functions) do not
# reread a whole bullet file per append. Validated against the file's inode and size each time.
_BULLETS: dict[Path, _BulletCache] = {}
_BLOCKS: dict[Path, tuple[tuple[int, int, int], list]] = {}  # path -> (stat key, entries)
_BULLETS_LOCK = threading.Lock()


class SpecStore:
    """Reads and writes one spec's memory folder. Inputs are validated and redacted upstream."""

    def __init__(self, spec_dir: Path, project: "Project | Path | None" = None, sync: bool = True):
        from ..identity import Project, resolve_project

        self.sync = sync  # fsync each write (``files.fsync``)
        self.spec_dir = Path(spec_dir).resolve()
        # The project names the items (its key) and anchors their paths (its root).
        self.project = project if isinstance(project, Project) else resolve_project(spec_dir, project)
        self.project_dir = self.project.root
        self.memory_dir = self.spec_dir / "memory"
        self.insights_dir = self.memory_dir / "session_insights"
        self.map_file = self.memory_dir / "codebase_map.json"
        # a project's own memory is committed and merged: its session files name their writer
        self.committed = self.spec_dir.name == ".graphmem" and self.spec_dir.parent == self.project_dir

    # ---- helpers -------------------------------------------------------------------------
    def lock(self):
        """The cross-process lock for this memory folder (created, and refused when a link)."""
        real_dir(self.memory_dir, create=True)
        if self.committed:
            _ignore_locks(self.spec_dir)
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
        except json.JSONDecodeError as exc:
            from .merge import unconflict

            merged = unconflict(raw.decode("utf-8"))  # a merge without graphmem's driver
            if merged is not None:
                return merged
            quarantine(path, type(exc).__name__)
            return None
        except UnicodeDecodeError:
            if salvage_utf8(path, json.loads, self.lock()):  # a bad byte in one string: keep the rest
                return json.loads(read_bytes(path).decode("utf-8"))
            quarantine(path, "invalid UTF-8")
            return None
        except RecursionError:
            quarantine(path, "nested too deep to read")
            return None

    # ---- session insights ----------------------------------------------------------------
    def session_file(self, session_num: int) -> Path:
        """The file this writer keeps session ``session_num`` in (``session_names.py``)."""
        plain = self.insights_dir / session_names.session_name(session_num)
        if not self.committed or plain.exists():
            return plain
        return self.insights_dir / session_names.session_name(
            session_num, session_names.writer_tag(self.project_dir))

    def next_session_number(self) -> int:
        """One more than the highest session number of any file (of any writer)."""
        if not real_dirs(self.memory_dir, self.insights_dir):
            return 1
        with os.scandir(self.insights_dir) as it:
            nums = [n for e in it if (n := session_names.session_number(e.name)) is not None]
        return max(nums, default=0) + 1

    def read_session_insights(self, session_num: int) -> dict | None:
        """One session's saved insights, or None when absent or unreadable."""
        path = self.session_file(session_num)
        if not real_dirs(self.memory_dir, self.insights_dir) or is_link(path):
            return None
        data = self._read_json(path)
        if data is not None and not isinstance(data, dict):  # kept aside, never overwritten
            quarantine(path, f"holds a JSON {type(data).__name__}, not an object")
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
            atomic_write_json(path, data, sync=self.sync)
        return path, data

    def sessions(self) -> list[tuple[Path, _SessionFile]]:
        """Every readable session file, oldest first, parsed and mapped (``insight_shapes``).

        A file holding valid JSON that is not an object is quarantined like a corrupt one.
        """
        if not real_dirs(self.memory_dir, self.insights_dir):
            return []
        with _SESSIONS_LOCK:
            cache = dict(_SESSIONS.get(self.insights_dir, {}))
        with os.scandir(self.insights_dir) as it:
            found = [e for e in it if e.name.startswith("session_") and e.name.endswith(".json")]
        found.sort(key=lambda e: session_names.name_order(e.name))
        out, fresh = [], {}
        for e in found:
            if e.is_symlink() and is_link(e.path):  # d_type from the listing: no system call
                continue
            try:
                st = e.stat(follow_symlinks=False)
            except FileNotFoundError:
                continue
            key = (st.st_ino, st.st_size, st.st_mtime_ns)
            hit = cache.get(e.name)
            if hit is None or hit.key != key:
                path = self.insights_dir / e.name
                try:  # the folder was checked above; read_bytes refuses a link swapped in since
                    data = json.loads(read_bytes(path))
                except FileNotFoundError:
                    continue
                except (ValueError, RecursionError):  # bad UTF-8 or JSON: salvaged or quarantined
                    data = self._read_json(path)
                if data is None:
                    continue
                if not isinstance(data, dict):
                    quarantine(path, f"holds a JSON {type(data).__name__}, not an object")
                    continue
                hit = _SessionFile(key, data, insight_shapes.entries(data),
                                   datetime.fromtimestamp(st.st_mtime, timezone.utc),
                                   insight_shapes.newer_shape(data), path)
            fresh[e.name] = hit
            out.append((hit.path, hit))
        with _SESSIONS_LOCK:
            _SESSIONS[self.insights_dir] = fresh
        return out

    def load_all_insights(self) -> list[dict]:
        """Every readable session file, oldest first (copies: the parsed files are cached).

        A session in a newer shape also gets the reference's discovery keys, filled from it.
        """
        return [self.insight_copy(s) for _, s in self.sessions()]

    def insight_copy(self, s: _SessionFile) -> dict:
        """A private copy of one parsed session (callers may change it; the cache stays)."""
        if s.copy_blob is None:  # JSON values only, pickled by us: faster than deepcopy
            try:
                s.copy_blob = pickle.dumps(insight_shapes.as_reference(s.data, s.entries), 5)
            except RecursionError:  # nested deeper than pickle goes: parse the file again
                return insight_shapes.as_reference(json.loads(read_bytes(s.path)), s.entries)
        return pickle.loads(s.copy_blob)

    def kept_as_written(self) -> list[tuple[Path, str]]:
        """Session files holding what graphmem cannot interpret (kept as the agent wrote them and
        read for their text), each with its first problem: for ``graphmem doctor``."""
        out = []
        for path, s in self.sessions():
            if s.problem is None:
                s.problem = _problem(s.data)
            if s.problem:
                out.append((path, s.problem))
        return out

    # ---- codebase map --------------------------------------------------------------------
    def update_codebase_map(self, discoveries: dict[str, str]) -> Path:
        """Merge ``discoveries`` into the map and refresh ``_metadata``."""
        with self.lock():
            current = self._read_json(self.map_file)
            if current is not None and not isinstance(current, dict):  # kept aside, not overwritten
                quarantine(self.map_file, f"holds a JSON {type(current).__name__}, not an object")
            cmap = current if isinstance(current, dict) else {}
            cmap.update(discoveries)
            meta = m if isinstance(m := cmap.get("_metadata"), dict) else {}
            meta["last_updated"] = datetime.now(timezone.utc).isoformat()
            meta["total_files"] = len(agent_formats.map_files(cmap))
            cmap["_metadata"] = meta
            atomic_write_json(self.map_file, cmap, sort_keys=True, sync=self.sync)
        return self.map_file

    def load_codebase_map(self, sessions: list | None = None) -> dict[str, str]:
        """The map without its ``_metadata``, plus the file purposes recorded by sessions in a
        newer shape than the reference's (``insight_shapes.newer_shape``); the map's own entries
        win. A session in the reference's shape keeps them to itself, as the reference does."""
        files: dict[str, str] = {}
        for _, s in self.sessions() if sessions is None else sessions:
            if s.counted:
                files.update((e.path, e.purpose) for e in s.entries  # a file entry has both
                             if e.kind == "file" and e.path is not None and e.purpose is not None)
        data = self._read_json(self.map_file)
        if data is not None and not isinstance(data, dict):
            quarantine(self.map_file, f"holds a JSON {type(data).__name__}, not an object")
        if isinstance(data, dict):
            files.update(agent_formats.map_files(data))
        return files

    # ---- gotchas and patterns ------------------------------------------------------------
    def bullet_file(self, kind: str) -> Path:
        return self.memory_dir / HEADERS[kind][0]

    def _refresh_bullets(self, kind: str) -> _BulletCache:
        """Bring the cache up to date, reading only bytes appended since the last look."""
        return self._refresh(self.bullet_file(kind))

    def _refresh(self, path: Path) -> _BulletCache:
        for _ in range(3):
            with _BULLETS_LOCK:
                try:
                    return self._refresh_locked(path)
                except _NeedsSalvage:
                    _BULLETS.pop(path, None)
            # outside the cache lock: the repair takes the folder lock, which writers take first
            salvage_utf8(path, lock=self.lock())
        raise StorageError(f"{path} keeps changing while graphmem repairs its invalid UTF-8")

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
            assert cache is not None  # start > 0 only with a cache of the file's earlier bytes
            f.seek(start)
            raw = f.read()
        if raw and not raw.endswith(b"\n"):
            raw = raw[: raw.rfind(b"\n") + 1]  # a torn last line is not an item
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise _NeedsSalvage() from None  # one bad byte must not hide every other bullet
        # Universal newlines, as the reference reads: a CR ends a line here too.
        for line in text.replace("\r\n", "\n").replace("\r", "\n").split("\n"):
            line = line.strip()
            if line.startswith("- "):
                item = line[2:].strip()
                if normalise(item) not in cache.seen:  # a line both sides of a merge added
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
                atomic_write_text(path, HEADERS[kind][1] + f"- {text}\n", self.sync)
            else:
                append_line(path, f"- {text}", sync=self.sync)
            self._refresh_bullets(kind)
        return True

    def append_bullets(self, kind: str, texts: list[str]) -> list[str]:
        """Append the gotchas or patterns not there yet (normalised), in one write -> those added."""
        path = self.bullet_file(kind)
        with self.lock():
            if repair_tail(path):
                with _BULLETS_LOCK:
                    _BULLETS.pop(path, None)
            seen = set(self._refresh_bullets(kind).seen)
            new = []
            for text in (t.strip() for t in texts):
                if text and normalise(text) not in seen:
                    seen.add(normalise(text))
                    new.append(text)
            if not new:
                return []
            lines = "".join(f"- {t}\n" for t in new)
            st = file_stat(path)
            if st is None or st.st_size == 0:
                atomic_write_text(path, HEADERS[kind][1] + lines, self.sync)
            else:
                append_line(path, lines, sync=self.sync)
            self._refresh_bullets(kind)
        return new

    def load_bullets(self, kind: str) -> list[str]:
        """Every bullet of ``gotchas.md`` or ``patterns.md``, in file order."""
        cache = self._refresh(self.bullet_file(kind))
        with _BULLETS_LOCK:
            return list(cache.bullets)

    def blocks(self, kind: str) -> list[agent_formats.Block]:
        """The ``## [when]`` entries the agent tools append to ``gotchas.md`` or ``patterns.md``
        (``agent_formats``); reread only when the file changed."""
        path = self.bullet_file(kind)
        st = file_stat(path) if self._has_memory_dir() else None
        if st is None:
            return []
        key = (st.st_ino, st.st_size, st.st_mtime_ns)
        with _BULLETS_LOCK:
            hit = _BLOCKS.get(path)
        if hit is not None and hit[0] == key:
            return hit[1]
        try:
            raw = read_bytes(path)
        except FileNotFoundError:
            return []
        found = agent_formats.blocks(raw.decode("utf-8", "replace")) if b"## [" in raw else []
        with _BULLETS_LOCK:
            _BLOCKS[path] = (key, found)
        return found

    def notes(self, kind: str) -> list[str]:
        """The file's bullets, then its ``## [when]`` entries that no bullet already says."""
        out = self.load_bullets(kind)
        seen = {normalise(b) for b in out}
        for b in self.blocks(kind):
            if normalise(b.text) not in seen:
                seen.add(normalise(b.text))
                out.append(b.text)
        return out

    def said(self, kind: str, text: str) -> str | None:
        """The note of the file that already says ``text`` (a bullet, or an entry with or without
        its context, as the agent tools write one before they send it to a graph), or None."""
        key = normalise(text)
        for t in self.load_bullets(kind):
            if normalise(t) == key:
                return t
        return next((b.text for b in self.blocks(kind)
                     if key in (normalise(b.text), normalise(b.body))), None)

    def all_bullets(self, kind: str, sessions: list | None = None) -> list[str]:
        """The notes of the file (bullets and entries), then the patterns or gotchas recorded by
        sessions in a newer shape than the reference's (``insight_shapes.newer_shape``), each once."""
        out = self.notes(kind)
        seen = {normalise(b) for b in out}
        for _, s in self.sessions() if sessions is None else sessions:
            for e in s.entries if s.counted else ():
                if e.kind == kind and normalise(e.text) not in seen:
                    seen.add(normalise(e.text))
                    out.append(e.text)
        return out

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
        """The searchable items inside one session file (each counted once)."""
        project, spec = self._scope()
        rel = self.project.rel(source)
        return insight_items.session_items(project, spec, data, rel, _mtime(source))

    def insight_items(self, only_session: int | None = None) -> list[MemoryItem]:
        """Items of every session file, near-identical ones collapsed with a count
        (``insight_items``); ``only_session``: just the items that session holds."""
        project, spec = self._scope()
        folder = self.project.rel(self.insights_dir)  # once: sources are relative to the root
        return insight_items.collapse(project, spec, [(s.data, f"{folder}/{path.name}", s.mtime,
                                                       s.entries) for path, s in self.sessions()],
                                      only_session)

    def _map_file_only(self) -> dict[str, str]:
        data = self._read_json(self.map_file)
        return agent_formats.map_files(data) if isinstance(data, dict) else {}

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
        yield from self.insight_items()
        yield from self.map_items(self._map_file_only())
        for kind in HEADERS:
            yield from self.bullet_items(kind, self.notes(kind))
        yield from self.attempt_items()

    def attempt_items(self) -> list[MemoryItem]:
        """The recovery manager's ``attempt_history.json`` as insights: one per subtask and
        approach, with how often it was tried (``agent_formats.attempts``)."""
        path = self.memory_dir / "attempt_history.json"
        if not self._has_memory_dir() or file_stat(path) is None:
            return []
        data = self._read_json(path)
        if not isinstance(data, dict):
            return []
        project, spec = self._scope()
        when, source = _mtime(path), self.project.rel(path)
        return [MemoryItem(id=stable_id(project, spec, "attempt", a.subtask, normalise(a.approach)),
                           kind="insight", text=a.text, project=project, spec=spec, time=when,
                           source=source,
                           metadata={"field": "attempt_history", "subtask": a.subtask,
                                     "success": a.success, "count": a.count,
                                     "sessions": list(a.sessions)[-20:]})
                for a in agent_formats.attempts(data)]


def _problem(data: dict) -> str:
    """Why the strict session model refuses ``data`` ("" when it takes it)."""
    from ..models import SessionInsights, parse

    try:
        parse(SessionInsights, data, "insights")
    except Exception as exc:  # ValidationError, or a shape pydantic cannot even walk
        return str(exc)
    return ""


def _file_item(project: str, spec: str, path: str, purpose: str, base: dict) -> MemoryItem:
    return MemoryItem(id=stable_id(project, spec, "file", path), kind="file",
                      text=f"{path}: {purpose}", metadata={"path": path, "purpose": purpose}, **base)


def _mtime(path: Path) -> datetime:
    try:
        return datetime.fromtimestamp(path.stat().st_mtime, timezone.utc)
    except OSError:
        return datetime.now(timezone.utc)


PROJECT_IGNORE = ("# graphmem: memory/ is meant to be committed; its locks, the agent hooks'\n"
                  "# spool and the anchor states the git hooks rewrite after each commit are not\n"
                  "*.lock\n.locks/\nspool/\nmemory/anchor_states.json\n")


def _ignore_locks(folder: Path) -> None:
    """A project's own memory folder (``<project>/.graphmem``) is committed with the code:
    give it a ``.gitignore`` for its lock files and the hooks' spool, and a ``.gitattributes``
    that merges it with plain git (``files/merge.py``), once."""
    from .merge import ATTRIBUTES

    for name, text in ((".gitignore", PROJECT_IGNORE), (".gitattributes", ATTRIBUTES)):
        if not os.path.lexists(folder / name):
            try:
                atomic_write_text(folder / name, text)
            except OSError:
                pass  # a read-only checkout: nothing to write there either
