"""The local side of ``DerivedStores``: the index, its embedder and reranker, opened on first use.

Every operation runs through ``_healing``: a damaged database met mid-way (SQLite's "malformed"
or "not a database") is moved aside (``db.move_aside``), a fresh one opened, and the operation
run once more; the journal rebuilds the projects from their files (``graphmem.facade.repair``).
"""

from __future__ import annotations

import logging
import sqlite3
from pathlib import Path
from typing import Any, Awaitable, Callable, Sequence

from ..errors import ConfigError, CorruptIndexError, GraphmemError, IndexMismatchError, StorageError
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


def open_index(settings: Any, embedder: Any = None):
    """The ``LocalIndex`` of ``settings.home`` (numpy loads only when a search needs it)."""
    from .late import shares_pass
    from .local_index import LocalIndex

    index = LocalIndex(Path(settings.home), embedder, late_encoder(settings),
                       busy_timeout=settings.index.busy_timeout)
    index.late_always = late_in_every_search(settings, shares_pass(index))
    index.redact = bool(getattr(settings, "redact", True))
    return index


LATE_SEARCH = ("auto", "rerank", "all")


def late_in_every_search(settings: Any, shared: bool = False) -> bool:
    """Whether the ColBERT stage re-scores every search or only ``rerank=True`` ones.

    "auto" (default): every search when the embedder is that stage's own model (``shared``: the
    query's one pass gives both its vector and its tokens, so the stage costs only the MaxSim),
    else only ``rerank=True`` (with another embedder it costs a second model pass per search;
    ``docs/tuning.md``).
    """
    choice = settings.providers.local.late_search
    if not isinstance(choice, str) or choice.strip().lower() not in LATE_SEARCH:
        raise ConfigError(f"providers.local.late_search must be one of {', '.join(LATE_SEARCH)}, "
                          f"got {choice!r}")
    choice = choice.strip().lower()
    return shared if choice == "auto" else choice == "all"


def late_encoder(settings: Any):
    """The ColBERT encoder of the second stage (``late.py``), or None when it is off or absent."""
    try:
        from ..providers.local_colbert import make_late_encoder
    except ImportError:
        return None
    return make_late_encoder(settings)


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
            self._index = open_index(self.settings, self.embedder)
        return self._index

    async def healing(self, fn: Callable[[Any], Awaitable[Any]]) -> Any:
        """``fn(index)``; on a damaged database: move it aside, reopen, and run ``fn`` once more.
        Other SQLite errors ("database is locked", a full disk) become ``StorageError``."""
        from graphmem.index import db

        if self._index is not None and db.identity(self._index.home) != self._index.ident:
            self.close()  # the file was moved aside and rebuilt (by another process, say)
        try:
            return await fn(self.index)
        except (CorruptIndexError, sqlite3.Error) as exc:
            if not (isinstance(exc, CorruptIndexError) or db.is_corrupt(exc)):
                raise StorageError(f"local index: {exc}") from None  # locked, full disk ...
            self.close()
            db.move_aside(Path(self.settings.home), str(exc))
        try:
            return await fn(self.index)
        except sqlite3.Error as exc:
            raise StorageError(f"local index: {exc}") from None

    async def write(self, items: Sequence[MemoryItem]) -> str:
        """Upsert freshly written items -> "indexed" | "failed" (see ``write_rows``)."""
        return (await self.write_rows(items))[0]

    async def write_rows(self, items: Sequence[MemoryItem]) -> tuple[str, bool]:
        """Upsert freshly written items -> (status, whether the rows are in).

        "failed" with the rows in: their vectors are missing (``graphmem reindex`` fills them);
        "failed" without: the write stays in the index journal and is replayed.
        """
        async def upsert(index):
            await index.upsert(list(items))
            return index.last_embed_error

        try:
            embed_error = await self.healing(upsert)
        except (GraphmemError, sqlite3.Error) as exc:
            log.warning("local index not updated (%s); the write is replayed from the files by the "
                        "next graphmem process (or `graphmem doctor --fix`)", exc)
            return "failed", False
        return ("failed" if embed_error else "indexed"), True

    async def forget_spec(self, project: str, spec: str) -> int:
        async def drop(index):
            return index.delete(project=project, spec=spec)

        return await self.healing(drop)

    async def search(self, query: str, *, projects: list[str] | None, spec: str | None,
                     kinds: Sequence[str] | None, limit: int, rerank: bool = False) -> list[Hit]:
        from .local_search import search_local

        if not rerank:
            async def plain(index):
                return await search_local(index, query, projects=projects, spec=spec,
                                          kinds=kinds, limit=limit)

            return await self.healing(plain)
        from graphmem.index import rerank as second

        if self._reranker is None:
            self._reranker = make_reranker(self.settings)

        async def reranked(index):
            hits = await search_local(index, query, projects=projects, spec=spec, kinds=kinds,
                                      limit=max(limit, index.tuning.rerank_pool),
                                      late_stage=True)
            if self._reranker is not None:
                hits = await second.rerank(index, self._reranker, query, hits)
            return hits[:limit]

        return await self.healing(reranked)

    async def reindex(self, project: str, items: list[MemoryItem]) -> dict[str, Any]:
        """Make the index hold exactly ``items`` for ``project``; re-embed only what changed.

        If the index was built by another embedder, every vector is dropped and re-made (the
        index keeps each item's text, so other projects are re-embedded too).
        """
        return await self.healing(lambda idx: self._reindex(idx, project, items))

    async def _reindex(self, idx: Any, project: str, items: list[MemoryItem]) -> dict[str, Any]:
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
        idx.mark_caught_up(project)  # indexed whole: no catch-up needed on its next use
        re_embedded += await idx.refill_vectors()
        return {"project": project, "items": len(items), "removed": len(stale),
                "embedded": idx.embedded_count + re_embedded}

    def close(self) -> None:
        if self._index is not None:
            self._index.close()
            self._index = None
