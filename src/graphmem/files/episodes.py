"""Episodic sessions as human-readable, append-only files: the truth the episodes index derives from.

    <spec>/memory/episodes/<session_id>/session.json   id, workspace, model, mode, times, tokens, summary
    <spec>/memory/episodes/<session_id>/turns.jsonl    one conversation turn per line, in order
    <spec>/memory/episodes/<session_id>/steps.jsonl    one execution step per line, in order
    <spec>/memory/episodes/.locks/<nn>.lock            cross-process locks, one per bucket of sessions

``session.json`` is replaced atomically; the JSON Lines files only ever grow, one fsynced
``write`` per batch of whole lines, under the session's lock. A torn final line (power cut in the
middle of an append) is cut off on the next read or write and its bytes kept beside the file as
``<name>.corrupt-torn-<time>`` (which ``graphmem doctor`` lists); every line before it survives.
Lock files live outside the session folder so that deleting a session never removes a lock another
process may be waiting on; sessions share 16 of them by hash, because every lock keeps a
descriptor open for the life of the process.
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import warnings
import zlib
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator

from ..errors import NotFoundError, StorageError, ValidationError
from ..models import MemoryItem, parse_iso
from .append_fds import AppendFds
from .atomic import atomic_write_json, fsync_dir, repair_tail, write_all
from .lock import folder_lock
from .safe import file_stat, is_link, open_fd, open_file, read_bytes, real_dir, real_dirs
from .episode_items import step_item, summary_item, turn_item
from .salvage import CorruptFileWarning, quarantine, salvage_utf8

if TYPE_CHECKING:
    from ..identity import Project

log = logging.getLogger("graphmem.files.episodes")

SESSION_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,127}$")
TURNS, STEPS = "turns.jsonl", "steps.jsonl"
LOCK_BUCKETS = 16
OPEN_FILES = 8  # append descriptors kept open per store


def check_session_id(value: Any) -> str:
    """A session id is a short, path-safe token; anything else is a ValidationError."""
    if not isinstance(value, str):
        raise ValidationError(f"must be a string, got {type(value).__name__}", field="session_id")
    if not SESSION_ID.match(value) or value in (".", ".."):
        raise ValidationError("must be 1-128 letters, digits, '.', '_' or '-' (as returned by "
                              "start_session)", field="session_id")
    return value


def iso(t: datetime) -> str:
    """The one time format of the episode files: ISO 8601 in UTC."""
    return t.astimezone(timezone.utc).isoformat()


@dataclass
class _Tail:
    """How far we have counted a JSONL file: its identity, size and number of lines."""

    ino: int
    size: int
    lines: int


@dataclass
class Appended:
    """What one locked append wrote: the session, the new records and the files' new sizes."""

    session: dict
    turns: list[dict]
    steps: list[dict]
    turns_size: int
    steps_size: int


class EpisodeStore:
    """Reads and writes one spec's episodic session files. Inputs are validated upstream."""

    def __init__(self, spec_dir: Path, fsync: bool = True):
        self.spec_dir = Path(spec_dir).resolve()
        self.fsync = fsync  # False: one write(2) per batch, no fdatasync (settings.episodes.fsync)
        self.memory_dir = self.spec_dir / "memory"
        self.root = self.memory_dir / "episodes"
        self._locks = self.root / ".locks"
        self._tails: dict[Path, _Tail] = {}
        self._meta: dict[str, tuple[int, int, dict]] = {}
        self._path_cache: dict[str, tuple[Path, Path, Path, Path, str]] = {}
        self._fds = AppendFds(self, OPEN_FILES)

    # ---- paths and locks ------------------------------------------------------------------
    def _paths(self, sid: str) -> tuple[Path, Path, Path, Path, str]:
        """(folder, session.json, turns.jsonl, steps.jsonl, lock name), built once per session."""
        got = self._path_cache.get(sid)
        if got is None:
            folder = self.root / sid
            bucket = zlib.crc32(sid.encode("utf-8")) % LOCK_BUCKETS
            got = self._path_cache[sid] = (folder, folder / "session.json", folder / TURNS,
                                           folder / STEPS, f"{bucket:02d}.lock")
        return got

    def session_dir(self, sid: str) -> Path:
        return self._paths(sid)[0]

    def session_file(self, sid: str) -> Path:
        return self._paths(sid)[1]

    def lock(self, sid: str):
        """The cross-process lock of one session (shared with the sessions of its hash bucket)."""
        real_dir(self.memory_dir, create=True)  # links refused, not followed
        real_dirs(self.root, self._locks, create=True, mode=0o700)  # private, as the files are
        return folder_lock(self._locks, name=self._paths(sid)[4])

    def _real_folder(self, sid: str) -> bool:
        """Whether the session's folder exists; a link on the way to it is a ``StorageError``."""
        return real_dirs(self.memory_dir, self.root, self._paths(sid)[0])

    def session_ids(self) -> list[str]:
        """Every session folder that holds a ``session.json``."""
        if not real_dirs(self.memory_dir, self.root):
            return []
        return sorted(p.name for p in self.root.iterdir() if not p.name.startswith(".")
                      and not is_link(p) and not is_link(p / "session.json")
                      and ((p / "session.json").is_file() or _orphaned(p)))

    # ---- session metadata -----------------------------------------------------------------
    def create_session(self, meta: dict) -> None:
        """Create the session folder and its ``session.json``; an existing id is refused."""
        sid = meta["session_id"]
        with self.lock(sid):
            try:
                self.session_dir(sid).mkdir(mode=0o700)
            except FileExistsError:
                raise ValidationError(f"session {sid} already exists", field="session_id") from None
            try:
                atomic_write_json(self.session_file(sid), meta)
            except BaseException:
                shutil.rmtree(self.session_dir(sid), ignore_errors=True)
                raise
            fsync_dir(self.root)

    def read_session(self, sid: str) -> dict | None:
        """The session's metadata, or None when there is no such session (cached by mtime)."""
        path = self.session_file(sid)
        st = file_stat(path) if self._real_folder(sid) else None
        if st is None:
            self._meta.pop(sid, None)
            if self._real_folder(sid) and _orphaned(self.session_dir(sid)):
                return self._rebuild(sid, None)  # its session.json was moved aside earlier
            return None
        cached = self._meta.get(sid)
        if cached and cached[0] == st.st_mtime_ns and cached[1] == st.st_ino:
            return dict(cached[2])
        data: dict | None
        try:
            data = _session_json(read_bytes(path).decode("utf-8"))
        except FileNotFoundError:
            return None
        except (ValueError, RecursionError) as exc:  # ValueError includes UnicodeDecodeError
            data = self._salvage_session(sid, path, exc)
            if data is None:
                return None
            st = file_stat(path) or st
        self._meta[sid] = (st.st_mtime_ns, st.st_ino, data)
        return dict(data)

    def _salvage_session(self, sid: str, path: Path, exc: Exception) -> dict | None:
        """A damaged ``session.json`` never hides the session's intact turns and steps: bad bytes
        are replaced (original kept aside) or, when it cannot be parsed or is no object, it is
        moved aside and a ``recovered`` one is rebuilt from the turns and steps."""
        if isinstance(exc, UnicodeDecodeError) and salvage_utf8(path, _session_json, self.lock(sid)):
            return _session_json(read_bytes(path).decode("utf-8"))
        with self.lock(sid):
            try:
                damaged = read_bytes(path).decode("utf-8", "replace")
            except FileNotFoundError:
                damaged = ""
            side = quarantine(path, str(exc) if isinstance(exc, UnicodeDecodeError) else
                              f"{type(exc).__name__}: {exc}")
            return self._rebuild(sid, side.name, _readable_fields(damaged))

    def _rebuild(self, sid: str, side: str | None, known: dict | None = None) -> dict | None:
        """Write a ``recovered`` session.json from the session's turns and steps (None: none),
        keeping ``known`` fields read from the damaged file."""
        path = self.session_file(sid)
        with self.lock(sid):
            if file_stat(path) is not None:  # rebuilt meanwhile by another reader
                return _session_json(read_bytes(path).decode("utf-8"))
            turns, steps = self.read_lines(sid, TURNS, locked=True), self.read_lines(sid, STEPS, locked=True)
            if not turns and not steps:
                return None
            times = sorted(t for t in (parse_iso(r.get("at")) for r in turns + steps) if t)
            project = str(self.spec_dir.parent.parent)  # the default layout's project folder
            meta = {"session_id": sid, "workspace": project, "project": project,
                    "spec": str(self.spec_dir), "model": None, "mode": None,
                    "started_at": iso(times[0]) if times else iso(datetime.now(timezone.utc)),
                    **(known or {}), "ended_at": None, "status": "recovered",
                    "total_tokens": sum(t["tokens"] for t in turns if isinstance(t.get("tokens"), int)),
                    "summary": (known or {}).get("summary"), "recovered_from": side}
            atomic_write_json(path, meta)
        log.warning("graphmem: session %s rebuilt from its %d turns and %d steps", sid, len(turns),
                    len(steps))
        return meta

    def require(self, sid: str) -> dict:
        """The session's metadata; NotFoundError when it does not exist."""
        meta = self.read_session(sid)
        if meta is None:
            raise NotFoundError(f"no session {sid} in {self.root}")
        return meta

    def update_session(self, sid: str, change: Callable[[dict], dict]) -> dict:
        """Apply ``change`` to the metadata under the session lock and replace the file atomically."""
        self.require(sid)
        with self.lock(sid):
            meta = self.require(sid)
            new = change(dict(meta))
            atomic_write_json(self.session_file(sid), new)
        return new

    # ---- append ---------------------------------------------------------------------------
    def append(self, sid: str, turns: list[dict], steps: list[dict],
               then: Callable[[Appended], None] | None = None,
               check: Callable[[dict], None] | None = None) -> Appended:
        """Append turns and steps under the session lock; numbers them and fsyncs once per file.

        ``check(meta)`` may refuse the write (e.g. an ended session). ``then`` runs while the lock
        is still held, so derived rows are written in the same order as the lines.
        """
        check_session_id(sid)
        _, _, turns_path, steps_path, _ = self._paths(sid)
        with self.lock(sid):
            meta = self.require(sid)
            if check:
                check(meta)
            out_t, size_t = self._append_file(turns_path, turns)
            out_s, size_s = self._append_file(steps_path, steps)
            done = Appended(meta, out_t, out_s, size_t, size_s)
            if then:
                then(done)
        return done

    def _append_file(self, path: Path, records: list[dict]) -> tuple[list[dict], int]:
        """Append ``records`` as numbered lines; returns them and the file's new size.

        An untouched file reports size 0 without a ``stat``: the index keeps the larger size it
        knows (``EpisodeIndex.add_rows``).
        """
        if not records:
            return [], 0
        tail = self._tails.get(path)
        st = file_stat(path)  # a link in the file's place is refused: lines never go through it
        if st is not None and tail and tail.ino == st.st_ino and tail.size == st.st_size:
            start = tail.lines  # unchanged since our own last append, which ended with a newline
        else:
            self._repair(path)
            start = self._count(path)
        out = [{"index": start + i, **r} for i, r in enumerate(records)]
        data = "".join(_line(r) for r in out).encode("utf-8")
        fd = self._fds.take(path, st.st_ino) if st is not None else None
        fresh = fd is None
        if fd is None:
            fd = open_fd(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
        try:
            if st is None or fresh:
                st = os.fstat(fd)
            before = st.st_size  # we hold the lock: nobody else appends
            try:
                write_all(fd, data)
                if self.fsync:
                    os.fdatasync(fd)
            except OSError as exc:
                os.ftruncate(fd, before)  # a failed write leaves no partial lines behind
                raise StorageError(f"cannot append to {path}: {exc}") from None
        except BaseException:
            os.close(fd)
            raise
        self._fds.give(path, fd, st.st_ino)
        if before == 0 and self.fsync:
            fsync_dir(path.parent)
        size = before + len(data)
        self._tails[path] = _Tail(st.st_ino, size, start + len(out))
        return out, size

    def _count(self, path: Path) -> int:
        """Lines in ``path``, reading only what was appended since the last count."""
        st = file_stat(path)
        if st is None:
            return 0
        tail = self._tails.get(path)
        if tail and tail.ino == st.st_ino and tail.size == st.st_size:
            return tail.lines
        start, lines = (tail.size, tail.lines) if tail and tail.ino == st.st_ino \
            and tail.size < st.st_size else (0, 0)
        with open_file(path) as f:
            f.seek(start)
            for chunk in iter(lambda: f.read(1 << 20), b""):
                lines += chunk.count(b"\n")
        self._tails[path] = _Tail(st.st_ino, st.st_size, lines)
        return lines

    def _repair(self, path: Path) -> bool:
        """Cut a torn last line (caller holds the lock), keeping its bytes in a side file."""
        torn = repair_tail(path, keep_aside=True)
        if torn is None:
            return False
        self._tails.pop(path, None)
        msg = f"graphmem: torn last line of {path} ({len(torn)} bytes) cut off and kept aside"
        log.warning(msg)
        warnings.warn(msg, CorruptFileWarning, stacklevel=3)
        return True

    # ---- read -----------------------------------------------------------------------------
    def read_lines(self, sid: str, name: str, *, locked: bool = False) -> list[dict]:
        """Every record of ``turns.jsonl`` or ``steps.jsonl``, in file order.

        ``locked``: the caller already holds the session lock.
        """
        path = self.session_dir(sid) / name
        try:
            if not self._real_folder(sid):
                return []
            raw = read_bytes(path)
        except FileNotFoundError:
            return []
        if raw and not raw.endswith(b"\n"):
            if locked:
                self._repair(path)
            else:
                with self.lock(sid):  # a writer may be mid-append: decide only under the lock
                    self._repair(path)
            raw = read_bytes(path)
            raw = raw[: raw.rfind(b"\n") + 1]
        out = []
        for n, line in enumerate(raw.split(b"\n")[:-1], 1):
            try:
                rec = json.loads(line.decode("utf-8"))
                if not isinstance(rec, dict):
                    raise ValueError("not a JSON object")
            except ValueError as exc:  # includes UnicodeDecodeError
                msg = f"graphmem: skipping unreadable line {n} of {path}: {exc}"
                log.warning(msg)
                warnings.warn(msg, CorruptFileWarning, stacklevel=2)
                continue
            out.append(rec)
        return out

    def sizes(self, sid: str) -> tuple[int, int, int]:
        """(turns bytes, steps bytes, session.json mtime ns): what the index compares to notice changes."""
        folder = self.session_dir(sid)
        try:
            mtime = os.lstat(folder / "session.json").st_mtime_ns
        except FileNotFoundError:
            mtime = 0
        return _size(folder / TURNS), _size(folder / STEPS), mtime

    def delete(self, sid: str) -> None:
        """Remove a session's folder (its lock file stays: a waiter may hold it open)."""
        self.require(sid)
        with self.lock(sid):
            folder = self.session_dir(sid)
            # Rename first so no reader ever sees half a session.
            trash = self.root / f".deleted-{sid}-{os.getpid()}"
            os.replace(folder, trash)
            fsync_dir(self.root)
            shutil.rmtree(trash, ignore_errors=True)
        self._fds.close(folder)
        for key in [p for p in self._tails if p.parent == folder]:
            self._tails.pop(key, None)
        self._meta.pop(sid, None)
        self._path_cache.pop(sid, None)

    def records(self) -> Iterator[tuple[dict, list[dict], list[dict]]]:
        """(session, turns, steps) for every session in this spec."""
        for sid in self.session_ids():
            meta = self.read_session(sid)
            if meta is not None:
                yield meta, self.read_lines(sid, TURNS), self.read_lines(sid, STEPS)

    def items(self, project: "Project") -> Iterator[MemoryItem]:
        """Every searchable item of this spec's sessions (used to rebuild indexes and the graph);
        keyed by ``project.key`` with paths relative to its root."""
        key, spec, rel = project.key, project.rel(self.spec_dir), project.rel
        for meta, turns, steps in self.records():
            sid = meta["session_id"]
            for t in turns:
                yield turn_item(key, spec, sid, t, rel(self.session_dir(sid) / TURNS))
            for s in steps:
                yield step_item(key, spec, sid, s, rel(self.session_dir(sid) / STEPS))
            if meta.get("summary"):
                yield summary_item(key, spec, meta, rel(self.session_file(sid)))


# ---- reading damaged files ----------------------------------------------------------------
_FIELD = re.compile(r'"(workspace|project|spec|model|mode|started_at|summary)"\s*:\s*("(?:[^"\\]|\\.)*")')


def _readable_fields(text: str) -> dict:
    """The string fields still readable in a damaged session.json (e.g. one cut short)."""
    out: dict[str, Any] = {}
    for key, value in _FIELD.findall(text):
        try:
            out.setdefault(key, json.loads(value))
        except ValueError:
            pass
    return out


def _orphaned(folder: Path) -> bool:
    """A session folder whose session.json is gone but whose turns or steps are there."""
    return not (folder / "session.json").exists() and any(
        (folder / n).is_file() and not (folder / n).is_symlink() for n in (TURNS, STEPS))


def _session_json(text: str) -> dict:
    data = json.loads(text)
    if not isinstance(data, dict):
        raise ValueError(f"holds a JSON {type(data).__name__}, not an object")
    return data


_ENCODER = json.JSONEncoder(ensure_ascii=False, separators=(", ", ": "))  # built once, not per line


def _line(record: dict) -> str:
    return _ENCODER.encode(record) + "\n"


def encode_lines(records: list[dict]) -> bytes:
    """Records as the bytes of a turns or steps file: one line each, as an append writes them."""
    return "".join(_line(r) for r in records).encode("utf-8")


def _size(path: Path) -> int:
    try:
        return os.lstat(path).st_size  # a link's own size: links are never followed
    except FileNotFoundError:
        return 0
