"""What a provider can do, declared: small abstract bases that vendors subclass.

Every embedder has ``name``, ``dimension`` and ``embed``; everything else is derived or declared by
subclassing a capability base, never probed by callers::

    Embedder                    embed (async); embed_query derived (query_prefix + text)
      InProcessEmbedder         + embed_sync: runs in this process (worker threads, no network)
    TokenEncoder                per-token vectors for late interaction (ColBERT MaxSim)
    LLM                         generate, generate_json
    Reranker                    score (async)
      PairScorer                + count_tokens, score_pairs: an in-process cross-encoder

An embedder also declares ``token_encoder`` (the encoder whose token vectors' mean its vectors
are, so one pass gives both) and ``similarity_embedder()`` (the model that best tells two texts
say the same thing). A third-party object written against the earlier duck-typed interface
(``name``, ``dimension``, ``embed``, optionally ``embed_query``) still works: ``as_embedder`` and
``as_reranker`` (and ``as_token_encoder``) wrap it once, at the call that uses it.
"""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod
from typing import Any, Sequence, TypeVar

from pydantic import BaseModel

T = TypeVar("T", bound=BaseModel)
INLINE = 8  # up to this many texts run on the event loop; more go to a worker thread


class Embedder(ABC):
    """Turns texts into vectors of a fixed dimension."""

    name: str  # provider/model, e.g. "local/bge-small-en-v1.5"; stored with every vector
    dimension: int
    query_prefix: str = ""  # put before a search query (a model's retrieval instruction)
    token_encoder: "TokenEncoder | None" = None  # set when the vectors are its token means

    @abstractmethod
    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One vector per text, in order. Implementations batch within the vendor's limits."""

    async def embed_query(self, text: str) -> list[float]:
        """The vector for a search query; vendors that embed queries their own way override it
        (Voyage's ``input_type: query``)."""
        return (await self.embed([self.query_prefix + text]))[0]

    def similarity_embedder(self) -> "Embedder":
        """The embedder that decides two texts say the same thing (consolidation): this one."""
        return self


class InProcessEmbedder(Embedder):
    """An embedder computed in this process: callers may run it on a thread of their choosing."""

    @abstractmethod
    def embed_sync(self, texts: Sequence[str]) -> list[list[float]]:
        """Vectors computed in the calling thread."""

    def embed_query_sync(self, text: str) -> list[float]:
        """A search query's vector, in the calling thread."""
        return self.embed_sync([self.query_prefix + text])[0]

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """Vectors; a long list goes to a worker thread so the event loop keeps running."""
        texts = as_texts(texts)
        if len(texts) <= INLINE:
            return self.embed_sync(texts)
        return await asyncio.to_thread(self.embed_sync, texts)

    async def embed_query(self, text: str) -> list[float]:
        """The vector for one search query."""
        return self.embed_query_sync(text)


class TokenEncoder(ABC):
    """Per-token unit vectors (a numpy matrix, tokens x ``dimension``) for late interaction."""

    name: str
    dimension: int

    @abstractmethod
    def query_sync(self, text: str) -> Any:
        """A query's token matrix, in the calling thread."""

    @abstractmethod
    def documents_sync(self, texts: Sequence[str]) -> list[Any]:
        """One token matrix per text, in the calling thread."""

    def recalled_query(self, text: str) -> Any:
        """The query's token matrix if it was encoded lately (no model run), else None."""
        return None


class LLM(ABC):
    """Generates text and validated structured output."""

    name: str  # provider/model

    @abstractmethod
    async def generate(self, messages: list[dict[str, str]], *, max_tokens: int = 1024,
                       temperature: float = 0.0) -> str:
        """Chat-style messages (``role``: system|user|assistant, ``content``) -> text."""

    @abstractmethod
    async def generate_json(self, messages: list[dict[str, str]], schema: type[T], *,
                            max_tokens: int = 2048) -> T:
        """Structured output, validated into ``schema``; raises ProviderError when it cannot."""


class Reranker(ABC):
    """Scores (query, passage) pairs; higher is more relevant."""

    name: str

    @abstractmethod
    async def score(self, query: str, passages: Sequence[str]) -> list[float]:
        """One score per passage, in order."""


class PairScorer(Reranker):
    """A reranker run in this process, pair by pair: search drives it within a token budget."""

    @abstractmethod
    def count_tokens(self, query: str, passages: Sequence[str]) -> list[int]:
        """Tokens the model reads for each (query, passage) pair: its cost grows with them."""

    @abstractmethod
    def score_pairs(self, query: str, passages: Sequence[str]) -> list[float]:
        """Raw scores (unbounded; higher is more relevant), in the calling thread."""


class _Undeclared:
    """Forwards every attribute to an object that follows the earlier duck-typed interface."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.name = getattr(inner, "name", type(inner).__name__)

    def __getattr__(self, attr: str) -> Any:
        if attr == "inner":  # not set yet (a copy being made): no recursion through it
            raise AttributeError(attr)
        return getattr(self.inner, attr)


class _UndeclaredEmbedder(_Undeclared, Embedder):
    def __init__(self, inner: Any) -> None:
        super().__init__(inner)
        self.dimension = inner.dimension

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        return await self.inner.embed(texts)

    async def embed_query(self, text: str) -> list[float]:
        own = getattr(self.inner, "embed_query", None)  # optional in the duck-typed interface
        return await own(text) if own is not None else await super().embed_query(text)


class _UndeclaredReranker(_Undeclared, Reranker):
    async def score(self, query: str, passages: Sequence[str]) -> list[float]:
        return await self.inner.score(query, passages)


class _UndeclaredTokenEncoder(_Undeclared, TokenEncoder):
    def __init__(self, inner: Any) -> None:
        super().__init__(inner)
        self.dimension = getattr(inner, "dimension", 0)

    def query_sync(self, text: str) -> Any:
        return self.inner.query_sync(text)

    def documents_sync(self, texts: Sequence[str]) -> list[Any]:
        return self.inner.documents_sync(texts)


async def embed_query(embedder: Any, text: str) -> list[float]:
    """A search query's vector from any embedder (kept for callers written before the bases)."""
    emb = as_embedder(embedder)
    if emb is None:
        from ..errors import ValidationError

        raise ValidationError("no embedder given", field="embedder")
    return await emb.embed_query(text)


def as_embedder(obj: Any) -> Embedder | None:
    """``obj`` as an ``Embedder`` (None stays None): a subclass as it is, any other object with
    ``embed`` wrapped so the derived methods exist."""
    if obj is None or isinstance(obj, Embedder):
        return obj
    return _UndeclaredEmbedder(obj)


def as_reranker(obj: Any) -> Reranker | None:
    """``obj`` as a ``Reranker`` (None stays None); see ``as_embedder``."""
    if obj is None or isinstance(obj, Reranker):
        return obj
    return _UndeclaredReranker(obj)


def as_token_encoder(obj: Any) -> TokenEncoder | None:
    """``obj`` as a ``TokenEncoder`` (None stays None); see ``as_embedder``."""
    if obj is None or isinstance(obj, TokenEncoder):
        return obj
    return _UndeclaredTokenEncoder(obj)


def as_texts(texts: Sequence[str]) -> list[str]:
    """``texts`` as a list of str; ValidationError naming the field otherwise."""
    from ..errors import ValidationError

    if isinstance(texts, str):
        raise ValidationError("expected a list of texts, got one string", field="texts")
    out = list(texts)
    for i, text in enumerate(out):
        if not isinstance(text, str):
            raise ValidationError(f"item {i} is {type(text).__name__}, not text", field="texts")
    return out
