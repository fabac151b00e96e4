"""Cross-process locks: one per memory folder, one per ``GRAPHMEM_HOME`` job (consolidation, the
embedded server's start and stop). graphmem's one lock mechanism: ``flock`` is dropped by the
kernel when its process dies, so a killed writer never leaves a stale lock behind.

A lock is ``flock`` on a small file in the folder, plus a re-entrant thread lock so threads of
one process queue up too. The lock file's descriptor is kept open per process (locking is on the
hot path of every write), and re-opened when the file was deleted and recreated by someone else,
or after a fork.
"""

from __future__ import annotations

import fcntl
import os
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from ..errors import StorageError
from .safe import open_fd

LOCK_NAME = ".graphmem.lock"


class _Lock:
    def __init__(self, path: Path):
        self.path = path
        self.thread_lock = threading.RLock()
        self.depth = 0
        self.fd: int | None = None
        self.pid = 0

    def _open(self) -> int:
        if self.fd is not None and self.pid == os.getpid():
            return self.fd
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # O_NOFOLLOW (via open_fd): a planted link, dangling or not, is refused, never created through
        self.fd = open_fd(self.path, os.O_RDWR | os.O_CREAT)
        self.pid = os.getpid()
        return self.fd

    def _drop(self) -> None:
        if self.fd is not None:
            try:
                os.close(self.fd)
            except OSError:
                pass
        self.fd = None

    def acquire(self, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        if not self.thread_lock.acquire(timeout=max(timeout, 0.001)):
            raise StorageError(f"timed out after {timeout:.0f}s waiting for the lock on {self.path.parent}")
        if self.depth:
            self.depth += 1
            return
        try:
            delay = 0.0005
            while True:
                fd = self._open()
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:
                    if time.monotonic() > deadline:
                        raise StorageError(f"timed out after {timeout:.0f}s waiting for the lock on "
                                           f"{self.path.parent}") from None
                    time.sleep(delay)
                    delay = min(delay * 2, 0.01)
                    continue
                try:  # the file we locked must still be the one at the path
                    same = os.fstat(fd).st_ino == os.lstat(self.path).st_ino
                except FileNotFoundError:
                    same = False
                if same:
                    self.depth = 1
                    return
                self._drop()
        except BaseException:
            self.thread_lock.release()
            raise

    def release(self) -> None:
        self.depth -= 1
        if self.depth == 0 and self.fd is not None:
            fcntl.flock(self.fd, fcntl.LOCK_UN)
        self.thread_lock.release()


_LOCKS: dict[Path, _Lock] = {}
_LOCKS_GUARD = threading.Lock()


@contextmanager
def folder_lock(folder: Path, timeout: float = 60.0, name: str = LOCK_NAME) -> Iterator[None]:
    """Hold an exclusive lock on ``folder`` across processes and threads (re-entrant per thread)."""
    path = Path(folder) / name
    with _LOCKS_GUARD:
        lock = _LOCKS.get(path)
        if lock is None:
            lock = _LOCKS[path] = _Lock(path)
    lock.acquire(timeout)
    try:
        yield
    finally:
        lock.release()
