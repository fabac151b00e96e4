"""``LocalIndex``: the derived search index of every project one ``GRAPHMEM_HOME`` has seen.

Rows live in the home's SQLite database, written and read through ``IndexStore``
(``storage.py``, all the SQL): a project registry, one row per ``MemoryItem`` (keyed by its id,
with its stemmed terms), and one vector per distinct content hash, so unchanged text is never
embedded twice. This class adds the models (embedder, ColBERT encoder) and the ranking view
(``snapshot.py``): a base persisted as numpy files plus the rows changed since it, so a write
never forces a full rebuild and a new process loads the base instead of re-reading every row.
"""

from __future__ import annotations

import logging
import sqlite3
from array import array
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Sequence

from ..errors import CorruptIndexError, IndexMismatchError, ProviderError, StorageError
from ..lru import LRU, nbytes
from ..models import MemoryItem
from ..redact import redact_items
from graphmem.index import db, late
from .storage import IndexStore
from .text import date_terms, tokenize
from .tuning import DEFAULT, Tuning

log = logging.getLogger("graphmem.index")


# Set by ``embed_later``: writes store their rows without vectors or token matrices.
_LATER: ContextVar[bool] = ContextVar("graphmem_embed_later", default=False)


@contextmanager
def embed_later():
    """Index writes inside this block store their rows (words, names, dates: found by a search
    at once) without vectors or token matrices; the next ``upsert`` of the same items (``graphmem
    reindex``) embeds exactly those, in one model pass each."""
    token = _LATER.set(True)
    try:
        yield
    finally:
        _LATER.reset(token)


# Metadata fields that name who or what an item is about; a query naming them boosts the item.
NAME_FIELDS = ("speaker", "path", "title")


def name_text(item: MemoryItem) -> str:
    """An item's own naming fields (who said it, which file, its title)."""
    return " ".join(str(item.metadata[k]) for k in NAME_FIELDS
                    if isinstance(item.metadata.get(k), str))


def name_terms(item: MemoryItem) -> list[str]:
    """Terms that name the item: a speaker's or title's words, a path whole or its file name."""
    out: list[str] = []
    for k in NAME_FIELDS:
        value = item.metadata.get(k)
        if isinstance(value, str):
            toks = tokenize(value)
            out += [t for t in toks if "/" in t or "." in t] if k == "path" else toks
    return out


def item_terms(item: MemoryItem) -> list[str]:
    """Terms of the text, of the naming fields not already in it, and of the item's date."""
    terms = tokenize(item.text)
    have = set(terms)
    terms += [t for t in tokenize(name_text(item)) if t not in have]
    return terms + date_terms(item.time)


class LocalIndex(IndexStore):
    """The local index of one home: its rows (``IndexStore``), models and ranking view.

    A subclass, not a wrapper, so the registry and row reads keep one name for every caller;
    the SQL itself stays in ``storage.py``.
    """

    redact = True  # settings.redact (``open_index``): no recognised secret is stored

    def __init__(self, home: Path, embedder: Any = None, late_encoder: Any = None,
                 late_always: bool = True, busy_timeout: float = 30.0,
                 tuning: Tuning = DEFAULT):
        super().__init__(home, busy_timeout)
        self.embedder = embedder
        self.late = late_encoder  # ColBERT token vectors for the second stage (``late.py``)
        self.late_always = late_always  # False: only searches that ask for it (rerank=True)
        self.tuning = tuning
        # Unpacked token matrices by content hash: a search re-reads the rows its pool shares
        # with the last searches; SQLite then serves only the new ones.
        self.token_cache = LRU(tuning.late_cache_bytes, size=nbytes)
        self._snapshot = None
        self.last_embed_error: str | None = None  # the last write's embedding failure, if any
        self.embedded_count = 0  # texts embedded by the last upsert
        self.deferred_count = 0  # texts the last upsert left without a vector (``embed_later``)

    def check_embedder(self, *, claim: bool = False) -> None:
        """Refuse to mix vectors of two embedders; ``claim`` records ours on an empty index."""
        self.check_vectors_of(self.embedder, claim=claim)

    # ---- writes ------------------------------------------------------------------------------
    async def upsert(self, items: Sequence[MemoryItem],
                     also: Callable[[sqlite3.Connection], None] | None = None) -> int:
        """Insert or update items; embeds only texts whose hash has no vector yet.

        ``also(conn)`` runs inside the same transaction (the episodes rows of the same records).
        Items are redacted here (unless ``redact`` is off), whichever path brings them.
        """
        if not items and also is None:
            return 0
        if self.redact:
            items = redact_items(items)
        self.check_embedder()
        self.last_embed_error, self.embedded_count = None, 0
        vectors: dict[str, bytes] = {}
        token_vecs: dict[str, bytes] = {}
        hashes = {it.content_hash(): it.text for it in items}
        self.deferred_count = 0
        if _LATER.get():  # ``embed_later``: the rows now, the model's work later
            if self.embedder is not None:
                self.deferred_count = len(set(hashes) - self.existing_vectors(list(hashes)))
        elif late.shares_pass(self):  # the embedder is the late encoder's mean: one pass for both
            vectors, token_vecs = await late.encode_shared(
                self, hashes, self.existing_vectors(list(hashes)))
        else:
            if self.embedder is not None:
                have = self.existing_vectors(list(hashes))
                try:
                    vectors = await self._embed([(h, t) for h, t in hashes.items() if h not in have])
                except ProviderError as exc:
                    # The rows still go in (lexical search works); reindex fills vectors later.
                    log.warning("embedding failed, items indexed without vectors: %s", exc)
                    self.last_embed_error = str(exc)
            token_vecs = await late.encode_missing(self, list(hashes.items()))
        tokens = [item_terms(it) for it in items]
        names = [name_terms(it) for it in items]
        try:
            with self.transaction() as conn:
                self.check_embedder(claim=True)
                replaced = self.item_hashes([it.id for it in items])
                n = self.put_items(items, tokens, names, vectors)
                late.store(self, token_vecs)
                self.prune_texts(replaced)  # a rewritten item's old text
                if also is not None:
                    also(conn)
        except sqlite3.Error as exc:
            if db.is_corrupt(exc):
                raise CorruptIndexError(f"cannot write the local index: {exc}") from None
            raise StorageError(f"cannot write the local index: {exc}") from None
        return n

    async def _embed(self, todo: list[tuple[str, str]]) -> dict[str, bytes]:
        """Vectors (as float32 bytes) for (hash, text) pairs, in batches."""
        out: dict[str, bytes] = {}
        for i in range(0, len(todo), self.tuning.embed_batch):
            chunk = todo[i:i + self.tuning.embed_batch]
            vecs = await self.embedder.embed([t for _, t in chunk])
            if len(vecs) != len(chunk):
                raise IndexMismatchError(f"embedder {self.embedder.name} returned {len(vecs)} "
                                         f"vectors for {len(chunk)} texts")
            for (h, _), v in zip(chunk, vecs):
                if len(v) != self.embedder.dimension:
                    raise IndexMismatchError(
                        f"embedder {self.embedder.name} returned a {len(v)}-d vector, "
                        f"declared {self.embedder.dimension}")
                out[h] = array("f", v).tobytes()
        self.embedded_count += len(out)
        return out

    async def refill_vectors(self) -> int:
        """Embed every indexed text that has no vector (after a failure or an embedder change)."""
        await late.refill(self)
        if self.embedder is None:
            return 0
        todo = self.texts_without_vectors()
        if not todo:
            return 0
        self.embedded_count = 0
        vectors = await self._embed(todo)
        with self.transaction():
            self.check_embedder(claim=True)
            self.put_vectors(vectors, touch=True)  # rows that gained a vector join the delta
        return len(vectors)

    # ---- reads -------------------------------------------------------------------------------
    def snapshot(self):
        """The ranking view for the current generation (refreshed from the delta when stale)."""
        from .snapshot import refresh

        with self.lock:
            gen = self.generation()
            if self._snapshot is None or gen != self._snapshot.gen:
                self._snapshot = refresh(self, self._snapshot)
            return self._snapshot


def row_time(value: float | None) -> datetime | None:
    return datetime.fromtimestamp(value, timezone.utc) if value is not None else None
