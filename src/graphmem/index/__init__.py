"""The local search index: derived from the files, rebuildable with ``graphmem reindex``."""
