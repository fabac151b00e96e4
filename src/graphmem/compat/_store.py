"""One ``Memory`` per spec folder and settings for the process, shared by the compat modules.

The reference's functions take a folder per call; opening the index and models per call would
cost more than the write, so each (folder, settings) keeps one Memory for the process. The
settings part is a digest of every value, secrets included: two API keys, two Memory objects.
"""

from __future__ import annotations

import atexit
import threading
from pathlib import Path
from typing import Any

from ..facade.memory import Memory
from ..settings import Settings

_CACHE: dict[tuple[str, str, str], Memory] = {}
_CACHE_LOCK = threading.Lock()


class _Borrowed:
    """A cached ``Memory`` used as a context manager that does not close it."""

    def __init__(self, memory: Memory):
        self.memory = memory

    def __enter__(self) -> Memory:
        return self.memory

    def __exit__(self, *exc: Any) -> None:
        return None


def settings() -> Settings:
    """The settings as the environment gives them now; unless set, the index follows each write
    in the background (``index.write_behind``: the reference's functions report nothing)."""
    current = Settings.load()
    if current.index.write_behind is None:
        current.index.write_behind = True
    return current


def memory(spec_dir: Path, project_dir: Path | None = None) -> _Borrowed:
    """The process's ``Memory`` of ``spec_dir`` under the current settings (not closed on exit
    of the ``with``; all are closed at interpreter exit)."""
    current = settings()
    key = (str(Path(spec_dir).resolve()), str(project_dir or ""), current.fingerprint())
    with _CACHE_LOCK:
        mem = _CACHE.get(key)
        if mem is None:
            mem = _CACHE[key] = Memory(spec_dir, project_dir, settings=current)
    return _Borrowed(mem)


@atexit.register
def _close_all() -> None:
    with _CACHE_LOCK:
        memories = list(_CACHE.values())
        _CACHE.clear()
    for mem in memories:
        try:
            mem.close()
        except Exception:  # interpreter shutdown: nothing left to report to
            pass
