"""Search's numpy products run on one BLAS thread.

numpy's OpenBLAS splits even small products over every core, and its idle workers then spin for
a while before sleeping. On a 2-core machine they spin on the core the query encoder (onnxruntime,
2 threads) needs for the next search: measured on LoCoMo, the encoder took 10.0 ms p50 with 2 BLAS
threads and 8.4 ms with 1, while the late stage's product lost 0.3 ms (search p95 24.1 -> 21.9
ms). Only search's own sections are limited (``one_thread``); the limit is lifted when the last
one ends, so the host application's numpy keeps its threads.
"""

from __future__ import annotations

import threading
from contextlib import contextmanager
from typing import Any, Iterator

_lock = threading.Lock()
_state: dict[str, Any] = {"controller": None, "depth": 0, "saved": None}


def _controller() -> Any:
    if _state["controller"] is None:
        try:
            from threadpoolctl import ThreadpoolController

            _state["controller"] = ThreadpoolController()
        except Exception:  # noqa: BLE001 - no threadpoolctl or an unknown BLAS: leave it alone
            _state["controller"] = False
    return _state["controller"]


@contextmanager
def one_thread() -> Iterator[None]:
    """BLAS limited to one thread inside the block (nested and concurrent blocks are fine)."""
    with _lock:
        ctl = _controller()
        if ctl and _state["depth"] == 0:
            try:
                _state["saved"] = ctl.limit(limits=1, user_api="blas")
            except Exception:  # noqa: BLE001 - a BLAS threadpoolctl cannot drive
                _state["saved"] = None
        _state["depth"] += 1
    try:
        yield
    finally:
        with _lock:
            _state["depth"] -= 1
            if _state["depth"] == 0 and _state["saved"] is not None:
                _state["saved"].restore_original_limits()
                _state["saved"] = None
