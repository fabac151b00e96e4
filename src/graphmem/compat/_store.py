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
from ..config_sources import sources_stamp
from ..settings import Settings

_CACHE: dict[tuple[str, str, str], Memory] = {}
_LOADED: dict[tuple, tuple[Settings, str]] = {}  # what the sources held -> (settings, fingerprint)
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
    """The settings as the environment gives them now (shared: never changed by a caller);
    unless set, the index follows each write in the background (``index.write_behind``: the
    reference's functions report nothing). Loaded again only when the environment, the working
    folder or a config file named by it changed (a load costs about a millisecond)."""
    key = sources_stamp()
    with _CACHE_LOCK:
        got = _LOADED.get(key)
    if got is not None:
        return got[0]
    current = Settings.load()
    if current.index.write_behind is None:
        current.index.write_behind = True
    with _CACHE_LOCK:
        if len(_LOADED) >= 16:
            _LOADED.clear()
        _LOADED[key] = (current, current.fingerprint())
    return current


def _fingerprint(current: Settings) -> str:
    """``current.fingerprint()``, remembered for the settings ``settings`` shares."""
    with _CACHE_LOCK:
        for loaded, fingerprint in _LOADED.values():
            if loaded is current:
                return fingerprint
    return current.fingerprint()


def memory(spec_dir: Path, project_dir: Path | None = None) -> _Borrowed:
    """The process's ``Memory`` of ``spec_dir`` under the current settings (not closed on exit
    of the ``with``; all are closed at interpreter exit)."""
    current = settings()
    key = (str(Path(spec_dir).resolve()), str(project_dir or ""), _fingerprint(current))
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
