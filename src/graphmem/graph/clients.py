"""Graphiti's four client seats filled with graphmem's own providers (adapters, no vendor SDKs).

Graphiti builds OpenAI clients for any seat left empty; graphmem always fills all of them:
the embedder and LLM wrap graphmem's provider objects, the cross-encoder is either graphmem's
reranker or, without one, reciprocal-rank fusion that needs no model at all. Without an LLM the
LLM seat holds ``NoLLM``, which refuses every call instead of reaching for a cloud vendor.
"""

from __future__ import annotations

import json
import re
from typing import Any

from graphiti_core.cross_encoder.client import CrossEncoderClient
from graphiti_core.embedder.client import EmbedderClient
from graphiti_core.llm_client.client import LLMClient
from graphiti_core.llm_client.config import LLMConfig

from ..errors import GraphError, ProviderError
from .schema import rrf

_WORD = re.compile(r"\w+", re.UNICODE)


class GraphitiEmbedder(EmbedderClient):
    """Graphiti's embedder seat, backed by a graphmem ``Embedder``."""

    def __init__(self, embedder: Any):
        self.embedder = embedder

    async def create(self, input_data: Any) -> list[float]:
        if isinstance(input_data, str):
            text = input_data
        elif isinstance(input_data, list) and input_data and isinstance(input_data[0], str):
            text = input_data[0]
        else:
            raise GraphError("graphmem's embedder only takes text, not token ids")
        return (await self.embedder.embed([text]))[0]

    async def create_batch(self, input_data_list: list[str]) -> list[list[float]]:
        return await self.embedder.embed(list(input_data_list))


class GraphitiLLM(LLMClient):
    """Graphiti's LLM seat, backed by a graphmem ``LLM`` (retries happen inside the provider)."""

    def __init__(self, llm: Any):
        super().__init__(LLMConfig(model=getattr(llm, "name", "graphmem"), temperature=0.0))
        self.llm = llm

    async def _generate_response(self, messages, response_model=None, max_tokens=1024,
                                 model_size=None, *, model=None) -> dict[str, Any]:
        msgs = [{"role": m.role, "content": m.content} for m in messages]
        if response_model is not None:
            out = await self.llm.generate_json(msgs, response_model, max_tokens=max_tokens)
            return out.model_dump()
        text = await self.llm.generate(msgs, max_tokens=max_tokens)
        try:
            data = json.loads(text)
            return data if isinstance(data, dict) else {"content": text}
        except ValueError:
            return {"content": text}


class NoLLM(LLMClient):
    """The LLM seat when no LLM is configured: every call fails loudly, none goes to a vendor."""

    def __init__(self):
        super().__init__(LLMConfig(model="none", temperature=0.0))

    async def _generate_response(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        raise ProviderError("no LLM is configured (GRAPHMEM_LLM_PROVIDER); graphmem writes "
                            "structured memories without one", provider="none")


def _tokens(text: str) -> set[str]:
    return {w.casefold() for w in _WORD.findall(text) if len(w) > 1}


def _trigrams(text: str) -> set[str]:
    t = " ".join(text.casefold().split())
    return {t[i:i + 3] for i in range(max(len(t) - 2, 0))}


class RRFCrossEncoder(CrossEncoderClient):
    """A model-free reranker: RRF of two rankings, query-word coverage and character-trigram
    overlap (the second catches inflections and partial words); ties keep the incoming order."""

    async def rank(self, query: str, passages: list[str]) -> list[tuple[str, float]]:
        q, q3 = _tokens(query), _trigrams(query)
        words = [len(q & _tokens(p)) / (len(q) or 1) for p in passages]
        grams = [len(q3 & _trigrams(p)) / (len(q3) or 1) for p in passages]
        rankings = [sorted(range(len(passages)), key=lambda i: -sig[i]) for sig in (words, grams)]
        scores = rrf(rankings, len(passages))
        order = sorted(range(len(passages)), key=lambda i: -scores[i])
        return [(passages[i], scores[i]) for i in order]


class RerankerCrossEncoder(CrossEncoderClient):
    """Graphiti's cross-encoder seat, backed by a graphmem ``Reranker``."""

    def __init__(self, reranker: Any):
        self.reranker = reranker

    async def rank(self, query: str, passages: list[str]) -> list[tuple[str, float]]:
        scores = await self.reranker.score(query, passages)
        return sorted(zip(passages, scores), key=lambda ps: -ps[1])


def make_graphiti(driver: Any, embedder: Any, llm: Any | None, reranker: Any | None):
    """A ``Graphiti`` with every seat filled by graphmem: it can never build a vendor client."""
    from graphiti_core import Graphiti

    return Graphiti(graph_driver=driver,
                    llm_client=GraphitiLLM(llm) if llm is not None else NoLLM(),
                    embedder=GraphitiEmbedder(embedder),
                    cross_encoder=RerankerCrossEncoder(reranker) if reranker is not None
                    else RRFCrossEncoder())
