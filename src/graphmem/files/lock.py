"""Cross-process locks: one per memory folder, one global per ``GRAPHMEM_HOME`` job."""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from filelock import FileLock, Timeout

from ..errors import StorageError

LOCK_NAME = ".graphmem.lock"


@contextmanager
def folder_lock(folder: Path, timeout: float = 60.0, name: str = LOCK_NAME) -> Iterator[None]:
    """Hold an exclusive lock on ``folder`` across processes and threads."""
    folder.mkdir(parents=True, exist_ok=True)
    lock = FileLock(str(folder / name), timeout=timeout)
    try:
        with lock:
            yield
    except Timeout:
        raise StorageError(f"timed out after {timeout:.0f}s waiting for the lock on {folder}") from None
