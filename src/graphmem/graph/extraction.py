"""Graphiti's own LLM extraction over a project graph (the optional second step of a write).

With an LLM configured, the free-text parts of a write also go through ``Graphiti.add_episode``:
one Graphiti (and one driver) per graph, one extraction at a time per graph, each within the
graph timeout. A failure there never fails the write: it comes back as a note.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from ..errors import ServerError
from ..models import MemoryItem
from graphmem.graph import schema

log = logging.getLogger("graphmem.graph")
EXTRACT_FIELDS = {"what_worked", "what_failed", "recommendations_for_next_session"}


class Extraction:
    """The Graphiti instances of one ``GraphStore``, by graph."""

    def __init__(self, store: Any):
        self.store = store
        self._graphitis: dict[str, Any] = {}
        self._locks: dict[str, asyncio.Lock] = {}

    def graphiti(self, project: str):
        """Graphiti on this project's graph, with every client seat filled by graphmem."""
        gid = schema.group_id(project)
        if gid not in self._graphitis:
            client = self.store.conn.client
            if client is None:
                raise ServerError("not connected to FalkorDB")
            from graphiti_core.driver.falkordb_driver import FalkorDriver

            from .clients import make_graphiti

            # One driver per graph: every clone() would fire index creation again.
            driver = FalkorDriver(falkor_db=client, database=gid)
            s = self.store
            self._graphitis[gid] = make_graphiti(driver, s.embedder, s.llm, s.reranker)
        return self._graphitis[gid]

    async def settle(self, g: Any) -> None:
        """Wait for the index creation a Graphiti driver fired itself."""
        task = getattr(g.driver, "_init_task", None)
        if task is not None and not task.done():
            try:
                await task
            except Exception as exc:
                log.info("graphiti index creation: %s", exc)

    async def run(self, items: list[MemoryItem]) -> str | None:
        """Free text through Graphiti's own extraction; failures are reported, never raised."""
        free = [i for i in items if i.kind == "turn"
                or (i.kind == "insight" and i.metadata.get("field") in EXTRACT_FIELDS)]
        if not free:
            return None
        from graphiti_core.nodes import EpisodeType

        timeout = self.store.settings.graph.timeout
        notes = []
        for project in dict.fromkeys(i.project for i in free):
            part = [i for i in free if i.project == project]
            gid = schema.group_id(project)
            try:
                g = self.graphiti(project)
                async with self._locks.setdefault(gid, asyncio.Lock()):
                    await self.settle(g)
                    body = "\n".join(f"{i.metadata.get('field', i.kind)}: {i.text}" for i in part)
                    await asyncio.wait_for(g.add_episode(
                        name=f"graphmem session {part[0].session or ''}".strip(), episode_body=body,
                        source_description="graphmem session insights",
                        reference_time=max(i.time for i in part), source=EpisodeType.text,
                        group_id=gid), timeout=timeout)
            except (Exception, asyncio.TimeoutError) as exc:
                log.warning("graph extraction for %s failed: %s", project, exc)
                notes.append(f"extraction failed: {type(exc).__name__}: {exc}"[:300])
        return "; ".join(notes) or None

    def forget(self, gid: str | None = None) -> None:
        """Drop the Graphiti of one graph (or all: the connection they used is gone)."""
        if gid is None:
            self._graphitis.clear()
        else:
            self._graphitis.pop(gid, None)

    async def aclose(self) -> None:
        """Let each Graphiti's index creation finish, then forget them."""
        for g in self._graphitis.values():
            await self.settle(g)
        self._graphitis.clear()
