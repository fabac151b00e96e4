"""The derived backends behind the file store: the local index and the knowledge graph.

Both are written after the files and can be rebuilt from them. A failure here never fails a
save: the local index reports ``failed`` (``graphmem reindex`` repairs it) and the graph queues
the items in the outbox.

Wiring (each side implemented in its own package):
- ``graphmem.index.open_index(settings, embedder) -> LocalIndex`` with ``upsert(items)``,
  ``delete_spec(project, spec)``, ``search(...) -> list[Hit]``, ``close()``.
- ``graphmem.graph.open_graph(settings, embedder, llm) -> GraphStore`` (async) with
  ``save(items) -> None`` (raises GraphError on failure), ``search(...)``, ``aclose()``; the
  outbox lives in the spec's memory folder (``graphmem.files.outbox``).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from .models import MemoryItem, SaveReport
from .settings import Settings

if TYPE_CHECKING:
    from .memory import AsyncMemory

log = logging.getLogger("graphmem.backends")


class Backends:
    """Owns the derived stores for one ``GRAPHMEM_HOME``."""

    def __init__(self, settings: Settings):
        self.settings = settings
        self._local = None

    @property
    def local(self):
        """The local index side (``graphmem.index.backend.LocalBackend``), opened on first use."""
        if self._local is None:
            from .index.backend import LocalBackend

            self._local = LocalBackend(self.settings)
        return self._local

    async def write(self, mem: "AsyncMemory", items: list[MemoryItem], report: SaveReport) -> None:
        """Send freshly written items to the index and the graph, recording the outcome."""
        report.index = await self.write_index(items)
        report.graph = await self.write_graph(mem, items)

    async def write_index(self, items: list[MemoryItem]) -> str:
        """Upsert into the local index -> "indexed" | "failed" | "off"."""
        return await self.local.write(items)

    async def search_local(self, query: str, **kw) -> list:
        """Search the local index (see ``LocalBackend.search``)."""
        return await self.local.search(query, **kw)

    async def reindex_local(self, project: str, items: list[MemoryItem]) -> dict:
        """Make the local index hold exactly ``items`` for ``project``."""
        return await self.local.reindex(project, items)

    async def write_graph(self, mem: "AsyncMemory", items: list[MemoryItem]) -> str:
        """Write to the graph, or queue in the outbox -> "written" | "queued" | "off"."""
        return "off"

    async def forget_spec(self, mem: "AsyncMemory") -> None:
        """Drop a cleared spec's items from the derived stores."""
        await self.local.forget_spec(str(mem.project_dir), str(mem.spec_dir))

    async def aclose(self) -> None:
        """Close connections."""
        if self._local is not None:
            self._local.close()
