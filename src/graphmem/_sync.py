"""Run the async core from sync code: one private event loop on a daemon thread."""

from __future__ import annotations

import asyncio
import threading
from typing import Any, Coroutine, TypeVar

T = TypeVar("T")
_loop: asyncio.AbstractEventLoop | None = None
_lock = threading.Lock()


def _get_loop() -> asyncio.AbstractEventLoop:
    global _loop
    with _lock:
        if _loop is None or _loop.is_closed():
            loop = asyncio.new_event_loop()
            threading.Thread(target=loop.run_forever, name="graphmem-loop", daemon=True).start()
            _loop = loop
        return _loop


def run(coro: Coroutine[Any, Any, T]) -> T:
    """Run ``coro`` to completion and return its result, whether or not a loop runs here.

    Works inside a running event loop too (the coroutine runs on graphmem's own loop thread),
    and never leaves a task behind: the caller waits for the result.
    """
    return asyncio.run_coroutine_threadsafe(coro, _get_loop()).result()
