"""``memory.patterns``: gotchas and patterns (``- `` bullets, deduplicated)."""

from __future__ import annotations

import logging
from pathlib import Path

from ._store import memory
from .graphiti_helpers import get_graphiti_memory, is_graphiti_memory_enabled, run_async
from .paths import get_memory_dir

logger = logging.getLogger(__name__)

__all__ = ["append_gotcha", "append_pattern", "get_graphiti_memory", "get_memory_dir",
           "is_graphiti_memory_enabled", "load_gotchas", "load_patterns", "run_async"]


def append_gotcha(spec_dir: Path, gotcha: str) -> None:
    """Append a gotcha unless it is already there (empty text is ignored, as in the original)."""
    if isinstance(gotcha, str) and not gotcha.strip():
        return
    with memory(spec_dir) as m:
        m.append_gotcha(gotcha)


def load_gotchas(spec_dir: Path) -> list[str]:
    """All gotchas: the bullets, then the agent tools' ``## [time]`` entries."""
    with memory(spec_dir) as m:
        return m.load_gotchas()


def append_pattern(spec_dir: Path, pattern: str) -> None:
    """Append a pattern unless it is already there (empty text is ignored, as in the original)."""
    if isinstance(pattern, str) and not pattern.strip():
        return
    with memory(spec_dir) as m:
        m.append_pattern(pattern)


def load_patterns(spec_dir: Path) -> list[str]:
    """All patterns."""
    with memory(spec_dir) as m:
        return m.load_patterns()
