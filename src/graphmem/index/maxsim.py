"""The late stage's token product per search, run by onnxruntime (``late.token_best``).

An onnxruntime session of int8 tokens x scales x query tokens: its threads sleep when idle, where
numpy's OpenBLAS threads spin on the core the next query's encoder needs (``blas.py``). The
three-node graph is written to the model cache once (making it imports ``onnx``); when that or a
run fails, numpy computes the same products, a little slower.

``best_matches`` runs the product over a pool's matrices in chunks of about ``CHUNK_ROWS`` token
rows, each into a buffer its thread keeps, and takes each matrix's best rows before the next
chunk: one product of the whole pool made a float32 copy of every token (a pool of 8k tokens:
12 MB) and a product as large, both new memory on every search. A product row depends only on its
own token row, so the chunked result is the same, bit for bit (``tests/test_search_exact_paths``).
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Any, Sequence

log = logging.getLogger("graphmem.index")
_lock = threading.Lock()
_maxsim: list[Any] = []  # the session, once made (None: numpy does the products)
# One thread: the product is one MatMul of a few milliseconds, and a second worker that must be
# woken (idle workers sleep) and scheduled beside other processes made it slower on the shared
# 2-core box. Interleaved in one process on 40 captured entire-cli pools, three runs at load 3-5:
# p50 3.54 / 3.43 / 3.90 ms with one thread against 3.77 / 4.03 / 4.66 with two, mean 4.54 /
# 4.80 / 6.54 against 5.19 / 5.27 / 7.71 (docs/tuning.md, "Threads and query encoding").
PRODUCT_THREADS = 1
# Token rows per product: a chunk's float32 tokens (1.5 MB) instead of the pool's (entire-cli's
# pools average 5,900 rows: 9 MB). Measured in docs/tuning.md, "Issue 17 (h32)".
CHUNK_ROWS = 1024
_buffers = threading.local()  # per thread: int8 tokens, scales and products of one chunk


def best_matches(mats: Sequence[tuple[Any, Any]], qm: Any, chunk_rows: int = CHUNK_ROWS) -> Any:
    """(matrices, query tokens (q, d)) -> (len(mats), q) float32: each query token's best dot
    product with each matrix's scaled tokens. ``mats`` holds (int8 tokens (n, d), float32 scales
    (n,)) pairs with n >= 1; the product runs on chunks of whole matrices of about ``chunk_rows``
    rows (``chunks``)."""
    import numpy as np

    best = np.empty((len(mats), len(qm)), np.float32)
    query = np.ascontiguousarray(qm.T, np.float32)
    sizes = [len(m[0]) for m in mats]
    for lo, hi in chunks(sizes, chunk_rows if len(qm) > 1 else sum(sizes)):
        sims = _chunk_products(mats[lo:hi], sum(sizes[lo:hi]), query)
        starts = np.cumsum([0, *sizes[lo:hi - 1]])
        np.maximum.reduceat(sims, starts, axis=0, out=best[lo:hi])
    return best


def chunks(sizes: Sequence[int], chunk_rows: int) -> list[tuple[int, int]]:
    """[lo, hi) ranges of matrices (of ``sizes`` rows) holding about ``chunk_rows`` rows each;
    a larger matrix is a chunk of its own. No chunk has one row unless the whole pool has: with
    one row, onnxruntime's MatMul takes a vector path that sums in another order (one query
    token also does, so ``best_matches`` gives a one-token query one chunk)."""
    out: list[tuple[int, int]] = []
    lo = rows = 0
    for i, n in enumerate(sizes):
        if i > lo and rows + n > chunk_rows and rows > 1:
            out.append((lo, i))
            lo, rows = i, 0
        rows += n
    if lo < len(sizes):
        if rows == 1 and out:  # a last chunk of one row joins the one before it
            lo = out.pop()[0]
        out.append((lo, len(sizes)))
    return out


def _chunk_products(mats: Sequence[tuple[Any, Any]], rows: int, query: Any) -> Any:
    """(rows, q) products of one chunk's tokens, in this thread's buffer (valid until its next
    chunk)."""
    import numpy as np

    if len(mats) == 1:
        tokens, scales = mats[0]
    else:
        tokens = np.concatenate([m[0] for m in mats], out=_buffer("tokens", (rows, query.shape[0]),
                                                                  np.int8))
        scales = np.concatenate([m[1] for m in mats], out=_buffer("scales", (rows,), np.float32))
    out = _buffer("sims", (rows, query.shape[1]), np.float32)
    session = maxsim_session()
    if session is not None and tokens.shape[1] == query.shape[0]:
        try:
            binding = _binding(session)
            binding.bind_cpu_input("tokens", np.ascontiguousarray(tokens))
            binding.bind_cpu_input("scales", np.ascontiguousarray(scales[:, None]))
            binding.bind_cpu_input("query", query)
            binding.bind_output("sims", "cpu", 0, np.float32, list(out.shape), out.ctypes.data)
            session.run_with_iobinding(binding)
            return out
        except Exception as exc:
            log.warning("late interaction product fell back to numpy: %s", exc)
            maxsim_failed()
    floats = _buffer("floats", tokens.shape, np.float32)
    np.copyto(floats, tokens, casting="unsafe")
    np.matmul(floats, query, out=out)
    out *= scales[:, None]
    return out


def _buffer(name: str, shape: tuple[int, ...], dtype: Any) -> Any:
    """This thread's array ``name`` viewed as ``shape``; it grows when a chunk needs more."""
    import numpy as np

    size = int(np.prod(shape))
    got = getattr(_buffers, name, None)
    if got is None or got.size < size:
        got = np.empty(size if got is None else max(size, 2 * got.size), dtype)
        setattr(_buffers, name, got)
    return got[:size].reshape(shape)


def _binding(session: Any) -> Any:
    """This thread's input/output binding of ``session`` (a binding is not shared by threads)."""
    got = getattr(_buffers, "binding", None)
    if got is None or got[0] is not session:
        got = _buffers.binding = (session, session.io_binding())
    return got[1]


def maxsim_session() -> Any:
    """The product's onnxruntime session, made on first use; None when it cannot be made."""
    with _lock:
        if not _maxsim:
            _maxsim.append(None)
            try:
                import onnxruntime as ort

                from ..providers.onnx_runtime import model_cache, session_options

                path = model_cache().folder / "maxsim-v1-onnx-ir8.onnx"
                if not path.is_file():
                    _write_maxsim(path)
                opts = session_options(ort, optimise=True)
                opts.intra_op_num_threads = PRODUCT_THREADS
                _maxsim[0] = ort.InferenceSession(str(path), opts,
                                                  providers=["CPUExecutionProvider"])
            except Exception as exc:
                log.info("late interaction products run in numpy: %s", exc)
        return _maxsim[0]


def maxsim_failed() -> None:
    """A session that failed while running: numpy does the products from now on."""
    with _lock:
        _maxsim[:] = [None]


def _write_maxsim(path: Path) -> None:
    from onnx import TensorProto, helper

    from ..files.atomic import atomic_write_bytes

    f, i8 = TensorProto.FLOAT, TensorProto.INT8
    graph = helper.make_graph(
        [helper.make_node("Cast", ["tokens"], ["tokens_f"], to=f),
         helper.make_node("MatMul", ["tokens_f", "query"], ["raw"]),
         helper.make_node("Mul", ["raw", "scales"], ["sims"])], "maxsim",
        [helper.make_tensor_value_info("tokens", i8, ["n", "d"]),
         helper.make_tensor_value_info("scales", f, ["n", 1]),
         helper.make_tensor_value_info("query", f, ["d", "q"])],
        [helper.make_tensor_value_info("sims", f, ["n", "q"])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(path, model.SerializeToString())
