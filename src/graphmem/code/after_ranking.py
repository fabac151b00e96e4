"""What code memory does to a search's hits after the first ranking: the façade's one call into
``code/`` between the index (and graph) answering and validity.

In order: code recall re-ranks the candidates by the files the best of them are about
(``reorder.code_recall``, only in a project with code), every anchored hit gets its freshness
and gone ones move down (``with_freshness``), and a query asking where a name lives now marks
the map entries that list it for a file it left and puts its current files' entries among the
first hits (``whereabouts``). Each stage is looked up when the search runs, so a bench that wraps
one to time it (``bench/codemem.py``) times it here too.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Sequence

from ..models import Hit

Fetch = Callable[[list[str], set[str]], list[Hit]]


def rerank_and_mark(hits: list[Hit], query: str, *, code: bool, focus: set[str], snap: Any,
                    root: str | Path | None, project: str, spec: str | None,
                    own_spec: str | None, specs: Sequence[str],
                    spec_dir_of: Callable[[Hit], Path | None], fetch: Fetch, keep: int
                    ) -> list[Hit]:
    """``hits`` re-ranked by code (when ``code``: the project has code), the best ``keep`` of
    them, with freshness marks, then the asked names' current homes promoted.

    ``focus``: the files the query names (``named_files``), ``snap`` the tree they were read
    from; ``project``: this project's key; ``spec``: the spec searched alone (None: every spec
    of the project, ``own_spec`` the façade's); ``specs``: the spec folders whose anchors count;
    ``spec_dir_of``: a hit's spec folder on this machine; ``fetch(ids, known)``: index rows of
    ``ids`` that ``known`` lacks, as hits."""
    import graphmem.code as code_memory
    from . import reorder, whereabouts

    asked: list = []
    if code:  # re-ranked by the files the best candidates are about (code/reorder.py)
        hits = reorder.code_recall(hits, spec_dir_of, specs, focus, fetch=fetch, keep=keep,
                                   query=query, snap=snap)
        asked = whereabouts.asked_homes(query, snap)  # "where is X now" (code/whereabouts.py)
    hits = code_memory.with_freshness(hits, root, spec_dir_of=spec_dir_of, snap=snap, query=query)
    if asked:  # a map entry listing X for a file that no longer defines it: moved; the
        hits = whereabouts.mark_moved(hits, asked, project)  # entries of X's files now rise
        hits = _promote_homes(hits, asked, query, snap, root, project, spec, own_spec, specs,
                              spec_dir_of, fetch)
    return hits


def _promote_homes(hits: list[Hit], asked: list, query: str, snap: Any, root: str | Path | None,
                   project: str, spec: str | None, own_spec: str | None, specs: Sequence[str],
                   spec_dir_of: Callable[[Hit], Path | None], fetch: Fetch) -> list[Hit]:
    """``hits`` with the map entries of the files defining the asked names now among the
    first (``code/whereabouts.py``), from this project's specs (``spec`` alone if given)."""
    import graphmem.code as code_memory
    from . import whereabouts
    from .anchors import book

    keys = [spec] if spec is not None else [own_spec, *(h.spec for h in hits if h.project == project)]
    return whereabouts.promote(
        hits, asked, [(project, s) for s in keys if s],
        fetch=lambda ids, known: code_memory.with_freshness(
            fetch(ids, known), root, spec_dir_of=spec_dir_of, snap=snap, query=query),
        former=whereabouts.former_homes(asked, [book(s).works for s in specs]))
