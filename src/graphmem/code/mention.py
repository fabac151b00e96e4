"""What ``about`` reduces both of its sources to (the files' anchors, the graph's ABOUT edges):
one ``Mention`` per memory, and whether one of its anchors names the target.

Below both ``code/about.py`` and ``graph/code_graph.py``, so the graph reads code knowledge
without importing the façade's ``about``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from .freshness import anchor_state
from .glob_anchor import matches as glob_matches
from .tree import Snapshot


@dataclass
class Mention:
    """One memory's own anchors with what the target matched, from either source."""

    id: str
    anchors: list[dict]                  # all its own anchors (path, blob, symbol, digest)
    matched: list[dict] = field(default_factory=list)
    head: str | None = None
    learned_at: str | None = None
    validity: dict | None = None         # {"state", "by", "reason", "invalid_at", "recorded_at"}


def matches(a: dict, target: str, snap: Snapshot, head: str | None = None) -> bool:
    """Does one anchor name ``target`` (its path, its path's new name, its symbol, or the file
    its symbol moved to)? ``head``: its record's HEAD (a rename git saw since is followed)."""
    if a.get("glob"):  # a pattern (``glob_anchor.py``): any file it names, now or later
        return isinstance(a.get("path"), str) and glob_matches(a["path"], target)
    sym = a.get("symbol")
    if sym:
        if sym == target or sym.endswith("." + target) or f"{a.get('path')}:{sym}" == target:
            return True
    if a.get("path") == target:
        return True
    return target in homes(a, snap, head)


def homes(a: dict, snap: Snapshot, head: str | None = None) -> set[str]:
    """The files an anchor's code now lives in when it left its own path: the file's new name
    (a rename git saw since ``head``), and the one file its symbol is defined in now (the hit
    says "moved" there, so ``about(there)`` finds it)."""
    out: set[str] = set()
    if a.get("glob"):
        return out
    to = anchor_state({"path": a.get("path"), "blob": a.get("blob")}, snap, head).get("to")
    if to:
        out.add(to)
    if a.get("symbol") and (to := anchor_state(a, snap).get("to")):
        out.add(to)
    return out
