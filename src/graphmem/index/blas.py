"""Search's numpy products run on one BLAS thread.

numpy's OpenBLAS splits even small products over every core, and its idle workers then spin on
the core the query encoder needs for the next search (measured: ``docs/tuning.md``). Only
search's own sections are limited (``one_thread``); the limit is lifted when the last one ends,
so the host application's numpy keeps its threads.
"""

from __future__ import annotations

import threading
from contextlib import contextmanager
from typing import Any, Iterator

_lock = threading.Lock()
_controller: list[Any] = []  # the one ThreadpoolController (False: none usable)
_local = threading.local()  # per thread: open blocks and the limit to lift at the last one


def _get_controller() -> Any:
    with _lock:
        if not _controller:
            try:
                from threadpoolctl import ThreadpoolController

                _controller.append(ThreadpoolController())
            except Exception:
                _controller.append(False)
        return _controller[0]


@contextmanager
def one_thread() -> Iterator[None]:
    """BLAS limited to one thread inside the block; nested blocks are fine. The setting is
    restored by the thread that changed it (OpenBLAS did not take a restore from another
    thread), so two threads' overlapping blocks each restore their own."""
    depth = getattr(_local, "depth", 0)
    if depth == 0:
        ctl = _get_controller()
        try:
            _local.saved = ctl.limit(limits=1, user_api="blas") if ctl else None
        except Exception:
            _local.saved = None
    _local.depth = depth + 1
    try:
        yield
    finally:
        _local.depth -= 1
        if _local.depth == 0 and _local.saved is not None:
            _local.saved.restore_original_limits()
            _local.saved = None
