"""The local search index: SQLite rows (``store``), tokenising (``text``), ranking (``ranker``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def open_index(settings: Any, embedder: Any = None):
    """The ``LocalIndex`` of ``settings.home`` (numpy loads only when a search needs it)."""
    from .store import LocalIndex

    return LocalIndex(Path(settings.home), embedder)
