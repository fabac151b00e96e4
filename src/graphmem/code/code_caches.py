"""Every process-wide cache of code memory, owned by one object with one ``forget()``.

Code memory's caches are keyed by what they describe (a project root, a git folder, a blob id, an
anchors file), never by a ``Memory``: two ``Memory`` objects on one project share the snapshot of
its tree and its git history, and a background thread warms that history after a commit
(``tree._warm_history``). So there is one ``CodeCaches`` per process, ``CACHES``; each module of
``code/`` reads and fills its own attributes, bounded by ``code_tuning``'s sizes as before.
``forget()`` drops what a read computes, so that the next read computes from scratch (tests
compare the two answers: ``graphmem.code.forget_caches``). It imports nothing of the modules
whose caches it holds (they import it): their types are named in comments.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

from ..lru import LRU
from .code_tuning import DEFAULT, CodeTuning


class CodeCaches:
    """The caches of ``tree.py``, ``history.py``, ``anchors.py``, ``anchor_file.py``,
    ``tree_watch.py`` and ``reorder.py``, as attributes."""

    def __init__(self, tuning: CodeTuning = DEFAULT) -> None:
        # ``tree.py``: root -> (repository state, snapshot); blob id -> parsed symbols (up to
        # ``max_cached_blobs``); (path, size, mtime) -> blob id of a file hashed from its bytes
        self.snapshots_lock = threading.Lock()
        self.snapshots: dict[str, tuple[tuple, Any]] = {}  # ``tree.Snapshot``s
        self.symbols_by_blob: dict[str, list[Any]] = {}  # ``symbols.Symbol``s
        self.blob_by_stat: dict[tuple, str] = {}
        # ``history.py``: root -> its commits; (old blob, new blob) -> share of lines kept (up
        # to ``max_pairs``); blob id -> its line counts (``line_blobs`` used last); root -> its
        # loose object folder
        self.histories_lock = threading.Lock()
        self.histories: dict[str, Any] = {}  # ``history.History``s
        self.kept: dict[tuple[str, str], float | None] = {}
        self.lines = LRU(tuning.line_blobs)
        self.objects: dict[str, Path | None] = {}
        # ``anchors.py``: query text -> its code names (``query_memo`` used last); (spec, base,
        # HEAD) whose commits changed no code (up to ``no_work_memo``)
        self.query_symbols = LRU(tuning.query_memo)
        self.no_work: set[tuple[str, str, str]] = set()
        # ``tree_watch.py``: (root, git config files' stats) -> core.excludesFile
        self.excludes_named: dict[tuple, str] = {}
        # ``reorder.py``: anchors file -> its records' write times, sorted; id of a record ->
        # (the record, the files it anchors), up to ``files_memo``
        self.write_times: dict[str, Any] = {}  # ``reorder._History``s
        self.record_files: dict[int, tuple[dict, list[str]]] = {}
        # ``anchor_file.py``: anchors file -> its size after this process compacted it. Not a
        # cache of a read: it says when the file may be compacted again, so ``forget`` keeps it.
        self.compacted: dict[str, int] = {}

    def forget(self) -> None:
        """Drop every cache of a read (snapshots, parsed symbols, blob ids, git histories, line
        counts, kept shares, code names, write times): the next read computes from scratch."""
        with self.snapshots_lock:
            self.snapshots.clear()
        self.symbols_by_blob.clear()
        self.blob_by_stat.clear()
        with self.histories_lock:
            self.histories.clear()
        self.kept.clear()
        self.lines.clear()
        self.objects.clear()
        self.query_symbols.clear()
        self.no_work.clear()
        self.excludes_named.clear()
        self.write_times.clear()
        self.record_files.clear()


CACHES = CodeCaches()
