"""Code awareness: anchors from memories to the files and symbols they talk about, and the
freshness of those anchors at read time (``anchors.py``, ``anchor_file.py``, ``freshness.py``,
``tree.py``, ``symbols.py``). The façade calls in at three thin points: after a write (``record``), after a
search (``annotate``) and in ``reindex`` (``backfill``).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Callable, Iterable

from ..models import Hit, MemoryItem

log = logging.getLogger("graphmem.code")


def record_anchors(project_dir: str | Path | None, spec_dir: str | Path | None,
                   items: Iterable[MemoryItem]) -> None:
    """Anchor freshly written items; a failure is logged, never fails the write (anchors are
    derived: ``reindex`` writes the missing ones)."""
    from .anchors import record

    try:
        record(project_dir, spec_dir, items)
    except Exception as exc:
        log.warning("anchors not recorded: %s", exc)


def forget_caches() -> None:
    """Drop every process-wide cache of code memory (snapshots, git histories, blob line counts,
    parsed symbols): the next read computes from scratch (tests compare the two answers)."""
    from graphmem.code import history, tree

    tree.forget()
    history.forget()


def named_files(query: str, project_dir: str | Path | None) -> tuple[set[str], Any]:
    """The project files a query names, directly or through a symbol they define, and the
    snapshot of the tree they were read from (empty and None on any failure: a search goes on
    without them)."""
    from .freshness import named_code
    from .tree import snapshot

    if project_dir is None:
        return set(), None
    try:
        snap = snapshot(project_dir, max_age=0)
        return named_code(query, snap), snap
    except Exception as exc:
        log.warning("code named by the query not found: %s", exc)
        return set(), None


def with_freshness(hits: list[Hit], project_dir: str | Path | None,
                   spec_dir_of: Callable[[Hit], Path | None] | None = None,
                   snap: Any = None, query: str | None = None) -> list[Hit]:
    """``hits`` with ``metadata["freshness"]`` set, gone ones moved down (ranking by the code a
    query names is ``code/recall.py``'s). ``spec_dir_of`` tells where a hit's spec folder is
    (hits of other projects have none); ``query`` adds its own mark (``freshness.asked_gone``)."""
    from .freshness import annotate
    from .tree import snapshot

    if not hits or project_dir is None:
        return hits
    try:
        snap = snap or snapshot(project_dir, max_age=0)  # git: cached against HEAD + index
        return annotate(hits, project_dir, snap=snap, spec_dir_of=spec_dir_of, query=query)
    except Exception as exc:
        log.warning("freshness not computed: %s", exc)
        return hits


def defined_now(query: str, project_dir: str | Path | None, limit: int = 5) -> list[dict]:
    """The symbols ``query`` names that the project defines, with where they are defined now
    (``{"symbol", "path", "lines"}``; empty on any failure: a context goes on without them)."""
    from .anchors import find_symbols
    from .tree import snapshot

    if project_dir is None or not query:
        return []
    try:
        snap = snapshot(project_dir, max_age=0)
        found = find_symbols(query, snap, []) if snap.files else []
    except Exception as exc:
        log.warning("symbols named by the query not found: %s", exc)
        return []
    return [{"symbol": a["symbol"], "path": a["path"], "lines": a["lines"]} for a in found[:limit]]
