"""The late stage's one token product per search, run by onnxruntime (``late.token_best``).

An onnxruntime session of int8 tokens x scales x query tokens: its threads sleep when idle, where
numpy's OpenBLAS threads spin on the core the next query's encoder needs (``blas.py``). The
three-node graph is written to the model cache once (making it imports ``onnx``); when that or a
run fails, numpy computes the same products, a little slower.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Any

log = logging.getLogger("graphmem.index")
_lock = threading.Lock()
_maxsim: list[Any] = []  # the session, once made (None: numpy does the products)
# One thread: the product is one MatMul of a few milliseconds, and a second worker that must be
# woken (idle workers sleep) and scheduled beside other processes made it slower on the shared
# 2-core box. Interleaved in one process on 40 captured entire-cli pools, three runs at load 3-5:
# p50 3.54 / 3.43 / 3.90 ms with one thread against 3.77 / 4.03 / 4.66 with two, mean 4.54 /
# 4.80 / 6.54 against 5.19 / 5.27 / 7.71 (docs/tuning.md, "Threads and query encoding").
PRODUCT_THREADS = 1


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
            except Exception as exc:  # noqa: BLE001 - numpy does the same, a little slower
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
