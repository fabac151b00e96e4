"""Voyage AI embeddings: ``POST {base}/embeddings`` with ``Authorization: Bearer <key>``.

Stored texts are sent with ``input_type: document`` and search queries (``embed_query``) with
``input_type: query``, as Voyage recommends for retrieval.
"""

from __future__ import annotations

import asyncio
from typing import Any, Sequence

from .base import Embedder
from .http import (HTTPProvider, VendorHTTP, batches, check_texts, check_vectors, endpoint_problems,
                   malformed,
                   vendor_http)

EMBEDDING_DIMS = {"voyage-3": 1024, "voyage-3-lite": 512, "voyage-3-large": 1024,
                  "voyage-3.5": 1024, "voyage-3.5-lite": 1024, "voyage-code-3": 1024,
                  "voyage-finance-2": 1024, "voyage-law-2": 1024, "voyage-multilingual-2": 1024,
                  "voyage-2": 1024, "voyage-large-2": 1536, "voyage-code-2": 1536}
# Documented: at most 1000 texts per request and 120k-1M tokens depending on the model.
MAX_INPUTS, MAX_CHARS = 1000, 200_000


class VoyageEmbedder(HTTPProvider, Embedder):
    """A Voyage embedding model."""

    def __init__(self, model: str, dimension: int, http: VendorHTTP, send_dimension: bool):
        self.name = f"voyage/{model}"
        self.model = model
        self.dimension = dimension
        self.http = http
        self.send_dimension = send_dimension

    async def _batch(self, chunk: list[str], input_type: str) -> list[list[float]]:
        body: dict[str, Any] = {"input": chunk, "model": self.model, "input_type": input_type}
        if self.send_dimension:
            body["output_dimension"] = self.dimension
        data = await self.http.post("/embeddings", body, what="embedding")
        try:
            vectors = [r["embedding"] for r in sorted(data["data"], key=lambda r: r["index"])]
        except (KeyError, TypeError, AttributeError):
            raise malformed("voyage", "embedding", data) from None
        return check_vectors("voyage", vectors, len(chunk), self.dimension)

    async def _embed(self, texts: Sequence[str], input_type: str) -> list[list[float]]:
        texts = check_texts(texts)
        parts = list(batches(texts, MAX_INPUTS, MAX_CHARS))
        results = await asyncio.gather(*(self._batch(chunk, input_type) for _, chunk in parts))
        return [vec for part in results for vec in part]

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """Vectors for texts to be stored (``input_type: document``)."""
        return await self._embed(texts, "document")

    async def embed_query(self, text: str) -> list[float]:
        """The vector for one search query (``input_type: query``)."""
        return (await self._embed([text], "query"))[0]


def make_embedder(settings: Any) -> VoyageEmbedder:
    """The configured Voyage model."""
    cfg = settings.providers.voyage
    key = cfg.api_key.get_secret_value() if cfg.api_key else ""
    http = vendor_http("voyage", cfg.base_url, {"Authorization": f"Bearer {key}"}, settings,
                      key_env="VOYAGE_API_KEY", secret=key)
    dim = cfg.embedding_dim or EMBEDDING_DIMS[cfg.embedding_model]
    return VoyageEmbedder(cfg.embedding_model, dim, http, send_dimension=cfg.embedding_dim is not None)


def validate(settings: Any, role: str) -> list[str]:
    """Problems that stop this provider from working, in plain words."""
    cfg = settings.providers.voyage
    problems = endpoint_problems("voyage", cfg.base_url, "VOYAGE_BASE_URL", cfg.api_key,
                                 "VOYAGE_API_KEY")
    if cfg.embedding_dim is None and cfg.embedding_model not in EMBEDDING_DIMS:
        problems.append(f"voyage embedder: the dimension of {cfg.embedding_model!r} is unknown; "
                        "set VOYAGE_EMBEDDING_DIM")
    return problems
