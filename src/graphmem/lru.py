"""A bounded memory of recent values: the least recently used go first past a limit.

One mechanism for every "remember what was computed lately" in graphmem: query vectors
(``index/local_search.py``, counted), fact vectors (``consolidate.py``, counted), query and
document token matrices (``providers/local_colbert.py``, in bytes) and unpacked stored tokens
(``index/local_index.py``, in bytes). Thread-safe: the encoder's memories are filled from worker
threads. Kept rather than ``cachetools.LRUCache``, which is not thread-safe and raises on a value
larger than its limit: wrapping it for both would take as many lines as this.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any, Callable, Hashable


def nbytes(value: Any) -> int:
    """The size of a numpy array, or of a tuple of them."""
    if isinstance(value, tuple):
        return sum(v.nbytes for v in value)
    return value.nbytes


class LRU:
    """Values by key; past ``limit`` (a sum of ``size(value)``: 1 each by default, so a count)
    the least recently used are dropped."""

    def __init__(self, limit: int, size: Callable[[Any], int] = lambda value: 1):
        self.limit, self.size, self.used = limit, size, 0
        self._data: OrderedDict[Hashable, Any] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, key: Hashable) -> Any:
        """The value, or None; a hit counts as a use."""
        with self._lock:
            got = self._data.get(key)
            if got is not None:
                self._data.move_to_end(key)
            return got

    def put(self, key: Hashable, value: Any) -> Any:
        """Remember ``value`` (replacing an older one for ``key``); returns it."""
        with self._lock:
            old = self._data.pop(key, None)
            if old is not None:
                self.used -= self.size(old)
            self._data[key] = value
            self.used += self.size(value)
            while self.used > self.limit and self._data:
                self.used -= self.size(self._data.popitem(last=False)[1])
        return value

    def clear(self) -> None:
        with self._lock:
            self._data.clear()
            self.used = 0

    def __len__(self) -> int:
        return len(self._data)

    def keys(self) -> list:
        """Keys from the least to the most recently used."""
        with self._lock:
            return list(self._data)
