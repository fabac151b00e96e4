"""graphmem's own small provider interfaces. Vendors implement these; Graphiti gets adapters.

An embedder needs ``name``, ``dimension`` and ``embed``; an LLM needs ``generate`` (free text)
and ``generate_json`` (structured output validated against a pydantic model).
"""

from __future__ import annotations

from typing import Any, Protocol, Sequence, TypeVar, runtime_checkable

from pydantic import BaseModel

T = TypeVar("T", bound=BaseModel)


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into vectors of a fixed dimension."""

    name: str  # provider/model, e.g. "local/bge-small-en-v1.5"; stored with every vector
    dimension: int

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One vector per text, in order. Implementations batch within the vendor's limits."""
        ...


@runtime_checkable
class LLM(Protocol):
    """Generates text and validated structured output."""

    name: str  # provider/model

    async def generate(self, messages: list[dict[str, str]], *, max_tokens: int = 1024,
                       temperature: float = 0.0) -> str:
        """Chat-style messages (``role``: system|user|assistant, ``content``) -> text."""
        ...

    async def generate_json(self, messages: list[dict[str, str]], schema: type[T], *,
                            max_tokens: int = 2048) -> T:
        """Structured output, validated into ``schema``; raises ProviderError when it cannot."""
        ...


@runtime_checkable
class Reranker(Protocol):
    """Scores (query, passage) pairs; higher is more relevant."""

    name: str

    async def score(self, query: str, passages: Sequence[str]) -> list[float]:
        ...


async def embed_query(embedder: Embedder, text: str) -> list[float]:
    """The vector for a search query: ``embedder.embed_query`` when it has one (Voyage's
    ``input_type: query``, a query prefix), else ``embed([text])[0]``."""
    own = getattr(embedder, "embed_query", None)
    if own is not None:
        return await own(text)
    return (await embedder.embed([text]))[0]


def describe(obj: Any) -> str:
    """A short name for logs and reports."""
    return getattr(obj, "name", type(obj).__name__)
