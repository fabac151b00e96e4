"""Where each project's code is checked out on this machine, for writers that only see items
(the code graph, ``graph/code_graph.py``): a leaf, so the graph needs nothing else of ``code``
to find a root."""

from __future__ import annotations

from pathlib import Path

ROOTS: dict[str, Path] = {}  # project key -> its root on this machine


def register_root(key: str, root: str | Path) -> None:
    """Remember where a project's code is (``Memory`` registers its project when it opens)."""
    ROOTS[key] = Path(root)
