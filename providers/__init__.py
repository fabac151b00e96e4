"""LLM and embedding providers (shipped as ``graphmem.providers``)."""
