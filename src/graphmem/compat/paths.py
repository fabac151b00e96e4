"""``memory.paths``: the memory folder and its session folder (created when asked for)."""

from __future__ import annotations

from pathlib import Path

from ..files.safe import real_dir
from ._store import memory

__all__ = ["clear_memory", "get_memory_dir", "get_session_insights_dir"]


def get_memory_dir(spec_dir: Path) -> Path:
    """``<spec>/memory``, created if needed (a link in its place is refused, never used)."""
    path = Path(spec_dir) / "memory"
    path.mkdir(exist_ok=True)
    real_dir(path)
    return path


def get_session_insights_dir(spec_dir: Path) -> Path:
    """``<spec>/memory/session_insights``, created if needed."""
    path = get_memory_dir(spec_dir) / "session_insights"
    real_dir(path, create=True)
    return path


def clear_memory(spec_dir: Path) -> None:
    """Delete all memory for a spec (its files and its index entries)."""
    with memory(spec_dir) as m:
        m.clear()
