"""The local side of ``Backends``: the index, its embedder and reranker, opened on first use."""

from __future__ import annotations

import logging
from typing import Any, Sequence

from ..errors import GraphmemError, IndexMismatchError
from ..models import Hit, MemoryItem

log = logging.getLogger("graphmem.index")


def make_embedder(settings: Any):
    """The configured embedder (``graphmem.providers.get_embedder``), or None for lexical only."""
    try:
        from ..providers import get_embedder
    except ImportError:  # providers without embedders: the index stays lexical
        return None
    return get_embedder(settings)


def make_reranker(settings: Any):
    """The configured cross-encoder, falling back to the bundled local one for ``rerank=True``."""
    try:
        from ..providers import get_reranker
    except ImportError:
        return None
    if getattr(settings.providers, "reranker", None) is None:
        settings = settings.model_copy(deep=True)
        settings.providers.reranker = "local"
    return get_reranker(settings)


class LocalBackend:
    """Owns the ``LocalIndex`` of one home plus the models it needs."""

    def __init__(self, settings: Any, embedder: Any = None, reranker: Any = None):
        self.settings = settings
        self._embedder = embedder
        self._reranker = reranker
        self._index = None

    @property
    def embedder(self):
        if self._embedder is None:
            self._embedder = make_embedder(self.settings)
        return self._embedder

    @property
    def index(self):
        if self._index is None:
            from . import open_index

            self._index = open_index(self.settings, self.embedder)
        return self._index

    async def write(self, items: Sequence[MemoryItem]) -> str:
        """Upsert freshly written items -> "indexed" | "failed" (``graphmem reindex`` repairs)."""
        try:
            await self.index.upsert(list(items))
        except GraphmemError as exc:
            log.warning("local index not updated (%s); run `graphmem reindex`", exc)
            return "failed"
        return "failed" if self.index.last_embed_error else "indexed"

    async def forget_spec(self, project: str, spec: str) -> int:
        return self.index.delete(project=project, spec=spec)

    async def search(self, query: str, *, projects: list[str] | None, spec: str | None,
                     kinds: Sequence[str] | None, limit: int, rerank: bool = False) -> list[Hit]:
        from .query import search_local

        if not rerank:
            return await search_local(self.index, query, projects=projects, spec=spec,
                                      kinds=kinds, limit=limit)
        from . import rerank as second

        if self._reranker is None:
            self._reranker = make_reranker(self.settings)
        hits = await search_local(self.index, query, projects=projects, spec=spec, kinds=kinds,
                                  limit=max(limit, second.POOL), late_stage=True)
        if self._reranker is not None:
            hits = await second.rerank(self.index, self._reranker, query, hits)
        return hits[:limit]

    async def reindex(self, project: str, items: list[MemoryItem]) -> dict[str, Any]:
        """Make the index hold exactly ``items`` for ``project``; re-embed only what changed.

        If the index was built by another embedder, every vector is dropped and re-made (the
        index keeps each item's text, so other projects are re-embedded too).
        """
        idx = self.index
        re_embedded = 0
        try:
            idx.check_embedder()
        except IndexMismatchError:
            idx.reset_vectors()
            re_embedded = await idx.refill_vectors()
        idx.register_project(project)
        keep = {it.id for it in items}
        stale = [i for i in idx.ids(project) if i not in keep]
        if stale:
            idx.delete(project=project, ids=stale)
        await idx.upsert(items)
        re_embedded += await idx.refill_vectors()
        return {"project": project, "items": len(items), "removed": len(stale),
                "embedded": idx.embedded_count + re_embedded}

    def close(self) -> None:
        if self._index is not None:
            self._index.close()
            self._index = None
