"""Append descriptors kept open between appends (an open and close per append cost as much as
the write itself).

A few per store, checked out while in use so that evicting one never closes it under a writer,
and handed back only while the path still names the same file (inode) in the same process: a
forked child never writes through, or closes, its parent's descriptors.
"""

from __future__ import annotations

import os
import threading
import weakref
from pathlib import Path


class AppendFds:
    """Open append descriptors by path, at most ``limit`` of them; closed when the owner goes."""

    def __init__(self, owner: object, limit: int):
        self.limit = limit
        self._fds: dict[Path, tuple[int, int, int]] = {}  # path -> (fd, inode, pid)
        self._lock = threading.Lock()
        weakref.finalize(owner, _close_all, self._fds, self._lock)

    def take(self, path: Path, ino: int) -> int | None:
        """The open descriptor of ``path`` if it still names file ``ino``, checked out; else None."""
        with self._lock:
            got = self._fds.pop(path, None)
        if got is None:
            return None
        if got[1] == ino and got[2] == os.getpid():
            return got[0]
        if got[2] == os.getpid():
            os.close(got[0])
        return None

    def give(self, path: Path, fd: int, ino: int) -> None:
        """Keep ``fd`` open for the next append to ``path``; the oldest beyond the limit close."""
        with self._lock:
            old = self._fds.pop(path, None)
            self._fds[path] = (fd, ino, os.getpid())
            drop = [old] if old else []
            while len(self._fds) > self.limit:
                drop.append(self._fds.pop(next(iter(self._fds))))
        _close(drop)

    def close(self, folder: Path | None = None) -> None:
        """Close the kept descriptors (of the files in one folder, or all)."""
        with self._lock:
            keys = [k for k in self._fds if folder is None or k.parent == folder]
            drop = [self._fds.pop(k) for k in keys]
        _close(drop)


def _close(drop: list[tuple[int, int, int]]) -> None:
    for f, _, pid in drop:
        if pid == os.getpid():
            try:
                os.close(f)
            except OSError:
                pass


def _close_all(fds: dict, lock: threading.Lock) -> None:
    with lock:
        drop = list(fds.values())
        fds.clear()
    _close(drop)
