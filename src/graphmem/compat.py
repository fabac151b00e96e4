"""Drop-in replacements for the reference memory module's functions.

Switch an agent with one import: ``from graphmem.compat import save_session_insights, ...``.
Same names, signatures and return shapes; behind them, graphmem's atomic, locked file store.
"""

from __future__ import annotations

import atexit
import threading
from pathlib import Path
from typing import Any

from .files.safe import real_dir
from graphmem.facade.memory import Memory
from .settings import Settings

__all__ = [
    "append_gotcha", "append_pattern", "clear_memory", "get_memory_dir", "get_memory_summary",
    "get_session_insights_dir", "is_graphiti_memory_enabled", "load_all_insights",
    "load_codebase_map", "load_gotchas", "load_patterns", "save_session_insights",
    "update_codebase_map",
]


# The reference's functions take a folder per call; opening the index and models per call would
# cost more than the write, so each (folder, settings) keeps one Memory for the process. The
# settings part is a digest of every value, secrets included: two API keys, two Memory objects.
_CACHE: dict[tuple[str, str], Memory] = {}
_CACHE_LOCK = threading.Lock()


class _Borrowed:
    """A cached ``Memory`` used as a context manager that does not close it."""

    def __init__(self, memory: Memory):
        self.memory = memory

    def __enter__(self) -> Memory:
        return self.memory

    def __exit__(self, *exc: Any) -> None:
        return None


def _mem(spec_dir: Path) -> _Borrowed:
    settings = Settings.load()
    key = (str(Path(spec_dir).resolve()), settings.fingerprint())
    with _CACHE_LOCK:
        memory = _CACHE.get(key)
        if memory is None:
            memory = _CACHE[key] = Memory(spec_dir, settings=settings)
    return _Borrowed(memory)


@atexit.register
def _close_all() -> None:
    with _CACHE_LOCK:
        memories = list(_CACHE.values())
        _CACHE.clear()
    for memory in memories:
        try:
            memory.close()
        except Exception:  # interpreter shutdown: nothing left to report to
            pass


def is_graphiti_memory_enabled() -> bool:
    """True when the knowledge graph is switched on (``GRAPHITI_ENABLED`` / ``GRAPHMEM_GRAPH``)."""
    return Settings.load().graph.mode != "off"


def get_memory_dir(spec_dir: Path) -> Path:
    """``<spec>/memory``, created if needed."""
    path = Path(spec_dir) / "memory"
    path.mkdir(exist_ok=True)
    real_dir(path)  # a link in its place is refused (StorageError), never used
    return path


def get_session_insights_dir(spec_dir: Path) -> Path:
    """``<spec>/memory/session_insights``, created if needed."""
    path = get_memory_dir(spec_dir) / "session_insights"
    real_dir(path, create=True)
    return path


def save_session_insights(spec_dir: Path, session_num: int, insights: dict) -> None:
    """Save insights from a completed session."""
    with _mem(spec_dir) as m:
        m.save_session_insights(session_num, insights)


def load_all_insights(spec_dir: Path) -> list[dict]:
    """All session insights, ordered by session number."""
    with _mem(spec_dir) as m:
        return m.load_all_insights()


def update_codebase_map(spec_dir: Path, discoveries: dict[str, str]) -> None:
    """Merge file purposes into the codebase map."""
    with _mem(spec_dir) as m:
        m.update_codebase_map(discoveries)


def load_codebase_map(spec_dir: Path) -> dict[str, str]:
    """The codebase map without its metadata."""
    with _mem(spec_dir) as m:
        return m.load_codebase_map()


def append_gotcha(spec_dir: Path, gotcha: str) -> None:
    """Append a gotcha unless it is already there (empty text is ignored, as in the reference)."""
    if isinstance(gotcha, str) and not gotcha.strip():
        return
    with _mem(spec_dir) as m:
        m.append_gotcha(gotcha)


def load_gotchas(spec_dir: Path) -> list[str]:
    """All gotchas."""
    with _mem(spec_dir) as m:
        return m.load_gotchas()


def append_pattern(spec_dir: Path, pattern: str) -> None:
    """Append a pattern unless it is already there (empty text is ignored, as in the reference)."""
    if isinstance(pattern, str) and not pattern.strip():
        return
    with _mem(spec_dir) as m:
        m.append_pattern(pattern)


def load_patterns(spec_dir: Path) -> list[str]:
    """All patterns."""
    with _mem(spec_dir) as m:
        return m.load_patterns()


def get_memory_summary(spec_dir: Path) -> dict[str, Any]:
    """Counts and the most recent three sessions."""
    with _mem(spec_dir) as m:
        return m.summary()


def clear_memory(spec_dir: Path) -> None:
    """Delete all memory for a spec."""
    with _mem(spec_dir) as m:
        m.clear()
