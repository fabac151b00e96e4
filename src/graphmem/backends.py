"""The derived backends behind the file store: the local index and the knowledge graph.

Both are written after the files and can be rebuilt from them. A failure here never fails a
save: the local index reports ``failed`` (``graphmem reindex`` repairs it) and the graph queues
the items in the outbox.
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

    async def write(self, mem: "AsyncMemory", items: list[MemoryItem], report: SaveReport) -> None:
        """Send freshly written items to the index and the graph, recording the outcome."""
        report.index = "off"
        report.graph = "off"

    async def forget_spec(self, mem: "AsyncMemory") -> None:
        """Drop a cleared spec's items from the derived stores."""

    async def aclose(self) -> None:
        """Close connections."""
