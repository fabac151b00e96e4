"""Graph synchronisation on the façade: outbox replay (``sync``) and drift."""

from __future__ import annotations


class GraphSyncMixin:
    """Graph operations of ``AsyncMemory``."""
