"""Ollama: ``POST /api/chat`` (``format`` = a JSON schema for structured output) and ``/api/embed``.

No key. The embedding dimension cannot be known before the first call, so it is a setting
(``OLLAMA_EMBEDDING_DIM``) and every answer is checked against it.
"""

from __future__ import annotations

import asyncio
from typing import Any, Sequence, TypeVar

from pydantic import BaseModel

from ..errors import ProviderError
from .base import LLM, Embedder
from .http import (HTTPProvider, VendorHTTP, batches, check_texts, check_vectors, endpoint_problems,
                   malformed,
                   vendor_http)
from .structured import generate_validated, normalise_messages

T = TypeVar("T", bound=BaseModel)
# Ollama documents no limit; modest batches keep a local server responsive.
MAX_INPUTS, MAX_CHARS = 64, 100_000


def _http(settings: Any) -> VendorHTTP:
    return vendor_http("ollama", settings.providers.ollama.base_url, {}, settings,
                      key_env="OLLAMA_BASE_URL")


class OllamaLLM(HTTPProvider, LLM):
    """A chat model served by Ollama."""

    def __init__(self, model: str, http: VendorHTTP):
        self.name = f"ollama/{model}"
        self.model = model
        self.http = http

    async def _chat(self, messages: list[dict[str, str]], max_tokens: int, temperature: float,
                    fmt: dict[str, Any] | None = None) -> str:
        body: dict[str, Any] = {"model": self.model, "messages": messages, "stream": False,
                                "options": {"temperature": temperature, "num_predict": max_tokens}}
        if fmt is not None:
            body["format"] = fmt
        data = await self.http.post("/api/chat", body, what="chat")
        try:
            content = data["message"]["content"]
        except (KeyError, TypeError):
            raise malformed("ollama", "chat", data) from None
        if not isinstance(content, str):
            raise malformed("ollama", "chat", data)
        if data.get("done_reason") == "length":
            raise ProviderError(f"{self.name}: the reply was cut off at max_tokens; raise max_tokens",
                                provider="ollama")
        return content

    async def generate(self, messages: list[dict[str, str]], *, max_tokens: int = 1024,
                       temperature: float = 0.0) -> str:
        """Chat messages -> the assistant's text."""
        return await self._chat(normalise_messages(messages), max_tokens, temperature)

    async def generate_json(self, messages: list[dict[str, str]], schema: type[T], *,
                            max_tokens: int = 2048) -> T:
        """Structured output constrained by ``format`` = the schema, validated into ``schema``."""
        fmt = schema.model_json_schema()

        async def call(msgs: list[dict[str, str]]) -> str:
            return await self._chat(msgs, max_tokens, 0.0, fmt)

        return await generate_validated(self.name, normalise_messages(messages), schema, call)


class OllamaEmbedder(HTTPProvider, Embedder):
    """An embedding model served by Ollama."""

    def __init__(self, model: str, dimension: int, http: VendorHTTP):
        self.name = f"ollama/{model}"
        self.model = model
        self.dimension = dimension
        self.http = http

    async def _batch(self, chunk: list[str]) -> list[list[float]]:
        data = await self.http.post("/api/embed", {"model": self.model, "input": chunk},
                                    what="embedding")
        vectors = data.get("embeddings") if isinstance(data, dict) else None
        if not isinstance(vectors, list):
            raise malformed("ollama", "embedding", data)
        return check_vectors("ollama", vectors, len(chunk), self.dimension)

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One vector per text, in modest batches."""
        texts = check_texts(texts)
        parts = list(batches(texts, MAX_INPUTS, MAX_CHARS))
        results = await asyncio.gather(*(self._batch(chunk) for _, chunk in parts))
        return [vec for part in results for vec in part]


def make_llm(settings: Any) -> OllamaLLM:
    """The chat model named by OLLAMA_LLM_MODEL."""
    return OllamaLLM(settings.providers.ollama.llm_model or "", _http(settings))


def make_embedder(settings: Any) -> OllamaEmbedder:
    """The embedding model named by OLLAMA_EMBEDDING_MODEL."""
    cfg = settings.providers.ollama
    return OllamaEmbedder(cfg.embedding_model or "", cfg.embedding_dim or 0, _http(settings))


def validate(settings: Any, role: str) -> list[str]:
    """Problems that stop this provider from working, in plain words."""
    cfg = settings.providers.ollama
    problems = endpoint_problems("ollama", cfg.base_url, "OLLAMA_BASE_URL")
    if role == "llm" and not cfg.llm_model:
        problems.append("ollama LLM needs OLLAMA_LLM_MODEL")
    if role == "embedder":
        if not cfg.embedding_model:
            problems.append("ollama embedder needs OLLAMA_EMBEDDING_MODEL")
        if not cfg.embedding_dim:
            problems.append("ollama embedder needs OLLAMA_EMBEDDING_DIM")
    return problems
