"""``memory.sessions``: session insights, saved as the agent wrote them."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from ._store import memory
from .graphiti_helpers import is_graphiti_memory_enabled, run_async, save_to_graphiti_async
from .paths import get_session_insights_dir

logger = logging.getLogger(__name__)

__all__ = ["get_session_insights_dir", "is_graphiti_memory_enabled", "load_all_insights",
           "run_async", "save_session_insights", "save_to_graphiti_async"]


def save_session_insights(spec_dir: Path, session_num: int, insights: dict[str, Any]) -> None:
    """Save insights from a completed session: the file first, then the index and, when on, the
    graph (one write through graphmem; nothing is sent to the graph twice). A shape graphmem
    cannot interpret is stored as written and reported once, never refused."""
    with memory(spec_dir) as m:
        m.save_session_insights(session_num, insights, as_written=True)


def load_all_insights(spec_dir: Path) -> list[dict[str, Any]]:
    """All session insights, ordered by session number (corrupt files are moved aside)."""
    with memory(spec_dir) as m:
        return m.load_all_insights()
