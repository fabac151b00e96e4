"""The local search index: SQLite rows (``store``), tokenising (``text``), ranking (``ranker``)."""

from __future__ import annotations

import os

# One BLAS thread: a query's matrix-vector products are memory-bound, and on a busy 2-core box a
# second OpenBLAS thread made them 2-3x slower (it only takes effect if numpy is not loaded yet).
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402


def open_index(settings: Any, embedder: Any = None):
    """The ``LocalIndex`` of ``settings.home`` (numpy loads only when a search needs it)."""
    from .store import LocalIndex

    return LocalIndex(Path(settings.home), embedder, late_encoder(settings))


def late_encoder(settings: Any):
    """The ColBERT encoder of the second stage (``late.py``), or None when it is off or absent."""
    try:
        from ..providers.local_colbert import make_late_encoder
    except ImportError:
        return None
    return make_late_encoder(settings)
