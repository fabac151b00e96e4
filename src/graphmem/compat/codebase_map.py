"""``memory.codebase_map``: file path -> purpose."""

from __future__ import annotations

import logging
from pathlib import Path

from ._store import memory
from .graphiti_helpers import get_graphiti_memory, is_graphiti_memory_enabled, run_async
from .paths import get_memory_dir

logger = logging.getLogger(__name__)

__all__ = ["get_graphiti_memory", "get_memory_dir", "is_graphiti_memory_enabled",
           "load_codebase_map", "run_async", "update_codebase_map"]


def update_codebase_map(spec_dir: Path, discoveries: dict[str, str]) -> None:
    """Merge file purposes into ``codebase_map.json`` (and the index, and the graph when on)."""
    with memory(spec_dir) as m:
        m.update_codebase_map(discoveries)


def load_codebase_map(spec_dir: Path) -> dict[str, str]:
    """File path -> purpose, from either writer's map shape, without its metadata."""
    with memory(spec_dir) as m:
        return m.load_codebase_map()
