"""Pending index work, kept durably in ``GRAPHMEM_HOME/index-journal/`` until the index has it.

    <home>/index-journal/<time>-<random>.json   {"project": path, "spec": path | null, "at": iso}

A spec write makes its entry (written, fsync'd, then renamed into place) before it touches the
files, and holds an exclusive ``flock`` on it until the local index has the write; then it deletes
the entry. An entry is left behind when the index update failed ("database is locked", a corrupt
database, a full disk) or when the process died in between (the kernel drops its lock). The next
process that opens, searches or writes the index replays what it can lock: the spec (or, with no
spec, the whole project) is reconciled against its files, which is idempotent, so replaying an
entry twice or replaying a write that never reached the files is harmless. Entries still locked
belong to writes in progress and are left alone.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os
import time
import uuid
from datetime import datetime, timezone
from pathlib import Path
from typing import Iterator

from ..errors import StorageError
from ..files.atomic import write_all
from ..files.safe import private_dir

log = logging.getLogger("graphmem.index")

JOURNAL_DIR = "index-journal"
_FLAGS = os.O_CLOEXEC | os.O_NOFOLLOW
STALE_TMP = 3600.0  # seconds


class Entry:
    """One journal entry held (locked) by this process: ``finish`` drops it, ``release`` keeps it."""

    _fd: int | None  # None once released

    def __init__(self, path: Path, fd: int, data: dict):
        self.path, self._fd, self.data = path, fd, data

    @property
    def project(self) -> str:
        return str(self.data.get("project") or "")

    @property
    def spec(self) -> str | None:
        spec = self.data.get("spec")
        return str(spec) if spec else None

    def finish(self) -> None:
        """The index has this work: delete the entry (before the lock goes, so no one replays it)."""
        if self._fd is None:
            return
        try:
            self.path.unlink(missing_ok=True)
        finally:
            self.release()

    def release(self) -> None:
        """Keep the entry for a later replay; let other processes take it."""
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)

    def hand_over(self) -> "Entry":
        """The same entry and its lock for another holder (a write's background job); this
        object lets go of it without releasing the lock."""
        fd, self._fd = self._fd, None
        if fd is None:
            raise ValueError("journal entry already released")
        return Entry(self.path, fd, self.data)

    def __enter__(self) -> "Entry":
        return self

    def __exit__(self, *exc) -> None:
        self.release()


class Journal:
    """The index journal of one ``GRAPHMEM_HOME``."""

    def __init__(self, home: Path):
        self.dir = Path(home) / JOURNAL_DIR

    def begin(self, project: str, spec: str | None = None, name: str | None = None,
              sync: bool = True) -> Entry | None:
        """A durable, locked entry for work about to happen (raises ``StorageError``). With a
        ``name``, None when an entry of that name is already waiting. ``sync=False``
        (``files.fsync``): not synced, as the spec write it stands for."""
        data = {"project": project, "spec": spec, "at": datetime.now(timezone.utc).isoformat()}
        unique = name is None
        try:
            private_dir(self.dir)
            name = name or f"{time.time_ns():020d}-{uuid.uuid4().hex[:12]}.json"
            tmp = self.dir / f".{name}.{uuid.uuid4().hex[:8]}.tmp"
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _FLAGS, 0o600)
        except OSError as exc:
            raise StorageError(f"cannot write the index journal in {self.dir}: {exc}") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)  # held through the rename: replayers never see it free
            write_all(fd, json.dumps(data, ensure_ascii=False).encode("utf-8"))  # whole or raises
            if sync:
                os.fsync(fd)
            if unique:
                os.replace(tmp, self.dir / name)
            else:
                try:
                    os.link(tmp, self.dir / name)  # never replaces an entry already waiting
                except FileExistsError:
                    os.close(fd)
                    tmp.unlink()
                    return None
                tmp.unlink()
            if sync:
                _fsync_dir(self.dir)
        except OSError as exc:
            os.close(fd)
            tmp.unlink(missing_ok=True)
            raise StorageError(f"cannot write the index journal in {self.dir}: {exc}") from None
        return Entry(self.dir / name, fd, data)

    def add_project(self, project: str) -> None:
        """Ask the next replay to index a whole project (once: an entry already waiting is kept)."""
        import hashlib

        key = hashlib.sha1(project.encode("utf-8")).hexdigest()[:16]
        entry = self.begin(project, None, name=f"project-{key}.json")
        if entry is not None:
            entry.release()

    def names(self) -> list[str]:
        """Every entry's file name, oldest first (cheap: one directory listing). A temp file
        left by a process that died while making its entry is removed after an hour."""
        try:
            found = list(os.scandir(self.dir))
        except (FileNotFoundError, NotADirectoryError):
            return []
        for e in found:
            if e.name.startswith(".") and e.name.endswith(".tmp"):
                try:
                    if time.time() - e.stat(follow_symlinks=False).st_mtime > STALE_TMP:
                        os.unlink(e.path)
                except OSError:
                    pass
        return sorted(e.name for e in found if e.name.endswith(".json") and not e.name.startswith("."))

    def held(self) -> int:
        """How many waiting entries a live process holds (its write is being indexed now)."""
        count = 0
        for name in self.names():
            try:
                fd = os.open(self.dir / name, os.O_RDONLY | _FLAGS)
            except OSError:
                continue
            try:
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except OSError:
                count += 1
            finally:
                os.close(fd)
        return count

    def claim(self) -> Iterator[Entry]:
        """Entries no live process holds, each locked by us until finished or released."""
        for name in self.names():
            path = self.dir / name
            try:
                fd = os.open(path, os.O_RDONLY | _FLAGS)
            except OSError:  # finished meanwhile (or a link planted in our folder: never followed)
                continue
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:  # a write in progress holds it
                os.close(fd)
                continue
            try:
                if os.fstat(fd).st_nlink == 0:  # finished between our open and our lock
                    os.close(fd)
                    continue
                data = json.loads(os.read(fd, 1 << 20).decode("utf-8"))
                if not isinstance(data, dict) or not data.get("project"):
                    raise ValueError("no project")
            except (OSError, ValueError) as exc:
                log.warning("index journal entry %s unreadable (%s); dropped", path, exc)
                path.unlink(missing_ok=True)
                os.close(fd)
                continue
            yield Entry(path, fd, data)


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
