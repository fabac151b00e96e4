"""The knowledge graph: the embedded FalkorDB process (``server``) and the Graphiti adapter
(``store``, ``schema``, ``clients``). Importing this package does not import graphiti_core."""

from .store import GraphStore, open_graph

__all__ = ["GraphStore", "open_graph"]
