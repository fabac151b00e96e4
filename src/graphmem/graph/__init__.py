"""The knowledge graph: the FalkorDB process (``server``), one async connection to it
(``connection``), and ``GraphStore`` (``store``) over Graphiti's schema (``schema``): writes,
Graphiti's own extraction, hybrid search and the team change feed, one module each. Importing
this package does not import graphiti_core."""

from .store import GraphStore, open_graph

__all__ = ["GraphStore", "open_graph"]
