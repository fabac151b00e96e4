"""OpenAI: chat completions (structured output via ``response_format`` json_schema) and embeddings.

REST: ``POST {base}/chat/completions`` and ``POST {base}/embeddings`` with
``Authorization: Bearer <key>``. The chat and embedding classes here also serve Azure OpenAI,
which speaks the same bodies on different paths.
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
from .structured import generate_validated, normalise_messages, schema_name, strict_schema

T = TypeVar("T", bound=BaseModel)

EMBEDDING_DIMS = {"text-embedding-3-small": 1536, "text-embedding-3-large": 3072,
                  "text-embedding-ada-002": 1536}
# Documented limits: 2048 inputs and 300k tokens per request; chars are a cautious stand-in.
MAX_INPUTS, MAX_CHARS = 2048, 250_000


def _reasoning(model: str | None) -> bool:
    # o-series and gpt-5 models take max_completion_tokens and refuse a temperature.
    return bool(model and model.startswith(("o1", "o3", "o4", "gpt-5")))


class OpenAIChat(HTTPProvider, LLM):
    """An LLM on the chat-completions API (OpenAI or Azure OpenAI)."""

    def __init__(self, name: str, http: VendorHTTP, path: str, model: str | None,
                 params: dict[str, str] | None = None):
        self.name = name
        self.http = http
        self.path = path
        self.model = model  # None for Azure: the deployment in the path picks the model
        self.params = params
        self._strict = True

    def _body(self, messages: list[dict[str, str]], max_tokens: int, temperature: float) -> dict:
        body: dict[str, Any] = {"messages": messages}
        if self.model:
            body["model"] = self.model
        if _reasoning(self.model):
            body["max_completion_tokens"] = max_tokens
        else:
            body["max_tokens"] = max_tokens
            body["temperature"] = temperature
        return body

    async def _complete(self, body: dict[str, Any]) -> str:
        data = await self.http.post(self.path, body, self.params, what="chat completion")
        try:
            choice = data["choices"][0]
            message = choice["message"]
            content = message.get("content")
        except (KeyError, IndexError, TypeError, AttributeError):
            raise malformed(self.http.provider, "chat completion", data) from None
        if message.get("refusal"):
            raise ProviderError(f"{self.name}: the model refused: {message['refusal']}",
                                provider=self.http.provider)
        if choice.get("finish_reason") == "length":
            raise ProviderError(f"{self.name}: the reply was cut off at max_tokens; raise max_tokens",
                                provider=self.http.provider)
        if not isinstance(content, str):
            raise malformed(self.http.provider, "chat completion", data)
        return content

    async def generate(self, messages: list[dict[str, str]], *, max_tokens: int = 1024,
                       temperature: float = 0.0) -> str:
        """Chat messages -> the assistant's text."""
        return await self._complete(self._body(normalise_messages(messages), max_tokens, temperature))

    async def generate_json(self, messages: list[dict[str, str]], schema: type[T], *,
                            max_tokens: int = 2048) -> T:
        """Structured output through ``response_format`` json_schema, validated into ``schema``."""
        messages = normalise_messages(messages)

        async def call(msgs: list[dict[str, str]]) -> str:
            body = self._body(msgs, max_tokens, 0.0)
            if self._strict:
                body["response_format"] = {"type": "json_schema", "json_schema": {
                    "name": schema_name(schema), "schema": strict_schema(schema), "strict": True}}
                try:
                    return await self._complete(body)
                except ProviderError as exc:
                    if exc.status != 400:
                        raise
                    # Some schemas (or OpenAI-compatible servers) refuse strict mode: go non-strict.
                    self._strict = False
            body["response_format"] = {"type": "json_schema", "json_schema": {
                "name": schema_name(schema), "schema": schema.model_json_schema(), "strict": False}}
            return await self._complete(body)

        return await generate_validated(self.name, messages, schema, call)


class OpenAIEmbedder(HTTPProvider, Embedder):
    """An embedder on the embeddings API (OpenAI or Azure OpenAI)."""

    def __init__(self, name: str, dimension: int, http: VendorHTTP, path: str, model: str | None,
                 params: dict[str, str] | None = None, send_dimensions: bool = False):
        self.name = name
        self.dimension = dimension
        self.http = http
        self.path = path
        self.model = model
        self.params = params
        self.send_dimensions = send_dimensions

    async def _batch(self, chunk: list[str]) -> list[list[float]]:
        body: dict[str, Any] = {"input": chunk, "encoding_format": "float"}
        if self.model:
            body["model"] = self.model
        if self.send_dimensions:
            body["dimensions"] = self.dimension
        data = await self.http.post(self.path, body, self.params, what="embedding")
        try:
            rows = sorted(data["data"], key=lambda r: r["index"])
            vectors = [r["embedding"] for r in rows]
        except (KeyError, TypeError, AttributeError):
            raise malformed(self.http.provider, "embedding", data) from None
        return check_vectors(self.http.provider, vectors, len(chunk), self.dimension)

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One vector per text, batched within the documented limits, batches run concurrently."""
        texts = check_texts(texts)
        parts = list(batches(texts, MAX_INPUTS, MAX_CHARS))
        results = await asyncio.gather(*(self._batch(chunk) for _, chunk in parts))
        return [vec for part in results for vec in part]


def _http(settings: Any) -> VendorHTTP:
    cfg = settings.providers.openai
    key = cfg.api_key.get_secret_value() if cfg.api_key else ""
    return vendor_http("openai", cfg.base_url, {"Authorization": f"Bearer {key}"}, settings,
                      key_env="OPENAI_API_KEY", secret=key)


def make_llm(settings: Any) -> OpenAIChat:
    """The configured OpenAI chat model."""
    cfg = settings.providers.openai
    return OpenAIChat(f"openai/{cfg.model}", _http(settings), "/chat/completions", cfg.model)


def make_embedder(settings: Any) -> OpenAIEmbedder:
    """The configured OpenAI embedding model."""
    cfg = settings.providers.openai
    dim = cfg.embedding_dim or EMBEDDING_DIMS[cfg.embedding_model]
    # text-embedding-3 models can shorten vectors; only ask when the user chose a dimension.
    return OpenAIEmbedder(f"openai/{cfg.embedding_model}", dim, _http(settings), "/embeddings",
                          cfg.embedding_model, send_dimensions=cfg.embedding_dim is not None)


def validate(settings: Any, role: str) -> list[str]:
    """Problems that stop this provider from working, in plain words."""
    cfg = settings.providers.openai
    problems = endpoint_problems("openai", cfg.base_url, "OPENAI_BASE_URL", cfg.api_key,
                                 "OPENAI_API_KEY")
    if role == "llm" and not cfg.model:
        problems.append("openai LLM needs OPENAI_MODEL")
    if role == "embedder" and cfg.embedding_dim is None and cfg.embedding_model not in EMBEDDING_DIMS:
        problems.append(f"openai embedder: the dimension of {cfg.embedding_model!r} is unknown; "
                        "set OPENAI_EMBEDDING_DIM")
    return problems
