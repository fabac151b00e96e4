"""``memory.graphiti_helpers``: is the graph on, a ``GraphitiMemory`` for a spec, run a coroutine."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import _sync

if TYPE_CHECKING:
    from .graphiti import GraphitiMemory

logger = logging.getLogger(__name__)

__all__ = ["get_graphiti_memory", "is_graphiti_memory_enabled", "run_async",
           "save_to_graphiti_async"]


def is_graphiti_memory_enabled() -> bool:
    """True when graphmem's knowledge graph is on (``GRAPHITI_ENABLED`` / ``GRAPHMEM_GRAPH``)."""
    from .graphiti import is_graphiti_enabled

    return is_graphiti_enabled()


async def get_graphiti_memory(spec_dir: Path, project_dir: Path | None = None
                              ) -> "GraphitiMemory | None":
    """An initialized ``GraphitiMemory`` (graphmem-backed, project-wide scope), or None when the
    graph is off or the spec's memory cannot be opened."""
    if not is_graphiti_memory_enabled():
        return None
    from .graphiti import GraphitiMemory, GroupIdMode

    spec_dir = Path(spec_dir)
    if project_dir is None:
        project_dir = spec_dir.parent.parent
    mem = GraphitiMemory(spec_dir, project_dir, group_id_mode=GroupIdMode.PROJECT)
    if not await mem.initialize():
        logger.warning("Failed to initialize Graphiti memory for %s", spec_dir)
        return None
    return mem


def run_async(coro: Any) -> Any:
    """Run a coroutine to completion from sync code and return its result.

    Unlike the original (which drops the coroutine and returns None inside a running loop),
    this runs it on graphmem's own loop thread there too, so no write is lost.
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coro)
    return _sync.run(coro)


async def save_to_graphiti_async(spec_dir: Path, session_num: int, insights: dict[str, Any],
                                 project_dir: Path | None = None) -> bool:
    """Save a session's insights through ``GraphitiMemory`` (its file, the index, the graph: its
    files, patterns and gotchas go with it); False when the graph is off or the save failed."""
    graphiti = await get_graphiti_memory(spec_dir, project_dir)
    if graphiti is None:
        return False
    try:
        return await graphiti.save_session_insights(session_num, insights)
    finally:
        await graphiti.close()
