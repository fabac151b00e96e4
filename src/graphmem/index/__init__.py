"""The local search index: SQLite rows (``store``), tokenising (``text``), ranking (``ranker``)."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def open_index(settings: Any, embedder: Any = None):
    """The ``LocalIndex`` of ``settings.home`` (numpy loads only when a search needs it)."""
    from .store import LocalIndex

    from .late import shares_pass

    index = LocalIndex(Path(settings.home), embedder, late_encoder(settings),
                       busy_timeout=settings.index.busy_timeout)
    index.late_always = late_in_every_search(settings, shares_pass(index))
    index.redact = bool(getattr(settings, "redact", True))
    return index


LATE_SEARCH = ("auto", "rerank", "all")


def late_in_every_search(settings: Any, shared: bool = False) -> bool:
    """Whether the ColBERT stage re-scores every search or only ``rerank=True`` ones.

    "auto" (default): every search when the embedder is that stage's own model (``shared``: the
    query's one pass gives both its vector and its tokens, so the stage costs only the MaxSim,
    a few ms), else only ``rerank=True``. Measured on LoCoMo (unseen conversations) with bge as
    the embedder, the stage in every search lifted R@5 from .688 to .731 and p95 from 13 to 30 ms.
    """
    from ..errors import ConfigError

    choice = settings.providers.local.late_search
    if not isinstance(choice, str) or choice.strip().lower() not in LATE_SEARCH:
        raise ConfigError(f"providers.local.late_search must be one of {', '.join(LATE_SEARCH)}, "
                          f"got {choice!r}")
    choice = choice.strip().lower()
    return shared if choice == "auto" else choice == "all"


def late_encoder(settings: Any):
    """The ColBERT encoder of the second stage (``late.py``), or None when it is off or absent."""
    try:
        from ..providers.local_colbert import make_late_encoder
    except ImportError:
        return None
    return make_late_encoder(settings)
