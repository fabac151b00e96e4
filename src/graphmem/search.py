"""Search and prompt context on the façade (``Memory.search``, ``Memory.context``, ``reindex``)."""

from __future__ import annotations


class SearchMixin:
    """Search operations of ``AsyncMemory``."""
