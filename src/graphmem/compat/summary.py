"""``memory.summary``: counts and the most recent sessions."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ._store import memory
from .codebase_map import load_codebase_map
from .patterns import load_gotchas, load_patterns
from .sessions import load_all_insights

__all__ = ["get_memory_summary", "load_all_insights", "load_codebase_map", "load_gotchas",
           "load_patterns"]


def get_memory_summary(spec_dir: Path) -> dict[str, Any]:
    """``total_sessions``, ``total_files_mapped``, ``total_patterns``, ``total_gotchas`` and
    ``recent_insights`` (the last three sessions), from one read of the folder."""
    with memory(spec_dir) as m:
        return m.summary()
