"""The knowledge graph: the FalkorDB process (``server``), one async connection to it
(``connection``), and ``GraphStore`` (``store``) over Graphiti's schema (``schema``): writes,
Graphiti's own extraction, hybrid search and the team change feed, one module each. Importing
this package imports nothing else: ``presence`` (whether the graph is used now) is checked on
every write and search, and must not pay for the store's modules."""

from __future__ import annotations

from typing import Any

__all__ = ["GraphStore", "open_graph"]


def __getattr__(name: str) -> Any:
    """``GraphStore`` and ``open_graph``, imported from ``store`` on first use."""
    if name in __all__:
        from . import store

        return getattr(store, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
