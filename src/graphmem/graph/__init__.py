"""The knowledge graph: the embedded FalkorDB process and the Graphiti adapter."""
