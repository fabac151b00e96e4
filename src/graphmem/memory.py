"""The ``Memory`` façade: every user-visible operation starts here.

Write path: validate -> redact -> file store (truth, atomic, locked) -> local index -> graph
(or the outbox when the graph fails). Read path: files for lists, the index or graph for search.
``AsyncMemory`` is the core; ``Memory`` is its synchronous wrapper.
"""

from __future__ import annotations

import contextlib
import functools
import inspect
import logging
import os
from pathlib import Path
from typing import Any, Iterator

from . import _sync
from .errors import ValidationError
from .files import SpecStore
from .identity import resolve_project
from .models import (_SURROGATE, CodebaseMap, MemoryItem, Note, SaveReport, SessionInsights,
                     SessionNumber, check_json, parse)
from .redact import redact
from .settings import Settings
from .search import SearchMixin
from .sessions import SessionsMixin
from .sync import GraphSyncMixin
from .validity import ValidityMixin
from .code.about import AboutMixin

log = logging.getLogger("graphmem")


class AsyncMemory(SearchMixin, SessionsMixin, GraphSyncMixin, ValidityMixin, AboutMixin):
    """Memory for one spec folder of one project (async API).

    Search, sessions and graph sync live in mixins (``search.py``, ``sessions.py``, ``sync.py``);
    this module holds construction and the spec file-store operations.
    """

    def __init__(self, spec_dir: str | Path | None, project_dir: str | Path | None = None, *,
                 settings: Settings | None = None):
        for name, value in (("spec_dir", spec_dir), ("project_dir", project_dir)):
            if value is not None and not isinstance(value, (str, os.PathLike)):
                raise ValidationError(f"must be a folder path (str or Path), got "
                                      f"{type(value).__name__}", field=name)
            if value is not None and _SURROGATE.search(os.fspath(value)):
                raise ValidationError("must be a folder path that is valid UTF-8 (it is stored "
                                      "in the index)", field=name)
        self._backends = None
        if spec_dir is None and project_dir is not None and "\x00" not in str(project_dir):
            # Project-wide reads (search, context, reindex) need no spec; spec writes refuse.
            self.settings = settings or Settings.load()
            self.files = _NoSpec()
            self.spec_dir = None
            self.project = resolve_project(None, project_dir, project_id=self.settings.project_id,
                                           known_roots=_known_roots(self.settings))
            self.project_dir = self.project.root
            self.spec_key = None
            return
        if spec_dir is None or str(spec_dir) == "" or "\x00" in str(spec_dir):
            raise ValidationError("must be a folder path", field="spec_dir")
        if project_dir is not None and (str(project_dir) == "" or "\x00" in str(project_dir)):
            raise ValidationError("must be a folder path", field="project_dir")
        self.settings = settings or Settings.load()
        self.project = resolve_project(spec_dir, project_dir, project_id=self.settings.project_id)
        self.files = SpecStore(Path(spec_dir), self.project)
        self.spec_dir = self.files.spec_dir
        self.project_dir = self.project.root
        self.spec_key = self.project.rel(self.spec_dir)  # how items name this spec

    # ---- derived backends -----------------------------------------------------------------
    @property
    def backends(self):
        """The derived backends (local index, graph), created on first use."""
        if self._backends is None:
            from .backends import Backends
            from .code.roots import register_root

            self._backends = Backends(self.settings)
            register_root(self.project.key, self.project_dir)  # for the code graph's writes
        return self._backends

    _adopted = False

    async def _adopt(self, rebuild: bool = True) -> None:
        """Once per object: migrate this project's index rows and graph from an older release
        (keyed by absolute paths) by rebuilding it from its files (``Backends.drop_legacy``)."""
        if self._adopted:
            return
        self._adopted = True
        from .index.db import db_path

        if self._backends is None and not db_path(self.settings.home).is_file():
            return  # a new home: nothing older to migrate
        if await self.backends.drop_legacy(self) and rebuild:
            await self.reindex()

    async def _graph_guard(self) -> None:
        """Before a file is written: a graph of another embedder refuses the write, so nothing
        is written that the graph could never take (``Backends.check_graph_embedder``)."""
        if self.settings.graph.mode != "off":
            await self.backends.check_graph_embedder(self.project.key)

    async def _propagate(self, items: list[MemoryItem], report: SaveReport,
                         entry: Any = None) -> SaveReport:
        report.items = len(items)
        await self._adopt()
        if items:
            from .code import record_anchors

            # anchors first: the graph write links the items to the code they name
            record_anchors(self.project_dir, self.spec_dir, items)
            await self.backends.write(self, items, report, entry)
        elif entry is not None:
            entry.finish()
        return report

    @contextlib.contextmanager
    def _index_journal(self) -> Iterator[Any]:
        """A durable index-journal entry around one spec write: made before the files change,
        dropped once the index has the write; left for replay when it does not (see
        ``index/journal.py``)."""
        entry = self.backends.begin_index_write(str(self.project_dir), str(self.spec_dir))
        try:
            yield entry
        except Exception:
            if entry is not None:  # the file store refused the write: nothing to replay
                entry.finish()
            raise
        finally:
            if entry is not None:
                entry.release()

    def _clean(self, value: Any) -> Any:
        return redact(value) if self.settings.redact else value

    def _check_size(self, value: Any, field: str) -> None:
        size = len(str(value).encode("utf-8", "surrogatepass"))
        if size > self.settings.max_item_bytes:
            raise ValidationError(f"is {size} bytes, over the limit of {self.settings.max_item_bytes} "
                                  "(GRAPHMEM_MAX_ITEM_BYTES)", field=field)

    # ---- session insights -----------------------------------------------------------------
    async def save_session_insights(self, session_num: int, insights: dict) -> SaveReport:
        """Save one session's learnings to ``session_insights/session_NNN.json``."""
        parse(SessionNumber, {"session_num": session_num}, "session_num", wrapped=True)
        if isinstance(insights, dict):  # extra keys are kept as given: they must be JSON
            check_json(insights, "insights")
        model = parse(SessionInsights, insights, "insights")
        self._check_size(insights, "insights")
        await self._graph_guard()
        data = self._clean(model.model_dump(exclude_none=True))  # unset optional keys stay out
        with self._index_journal() as entry:
            old = self.files.read_session_insights(session_num)
            path, saved = self.files.save_session_insights(session_num, data)
            items = self.files.insight_items(only_session=session_num)  # counted over all sessions
            old_items = self.files.session_items(old, path) if old is not None else []
            shared = {i.id for i in old_items} - {i.id for i in items}
            if shared:  # what the old version shared with other sessions: counted again without it
                items += [i for i in self.files.insight_items() if i.id in shared]
            report = await self._propagate(items, SaveReport(path=str(path)), entry)
        if old is not None:  # saved again: what only the old version held is no longer memory
            await self._forget_replaced(old_items, items)
        return report

    async def _forget_replaced(self, old: list[MemoryItem], new: list[MemoryItem]) -> None:
        """Drop the items of a replaced file that neither the new version nor any other file of
        the spec holds (a gotcha may also sit in gotchas.md, a file in the map)."""
        from .errors import GraphmemError

        gone = {i.id for i in old} - {i.id for i in new}
        if gone:
            gone -= {i.id for i in self.files.items()}
        if not gone:
            return
        try:
            await self.backends.forget_items(self, sorted(gone))
        except GraphmemError as exc:  # the file is saved; a journal entry drops them later
            log.warning("replaced insights may stay searchable until replayed: %s", exc)
            entry = self.backends.begin_index_write(str(self.project_dir), str(self.spec_dir))
            if entry is not None:
                entry.release()

    async def load_all_insights(self) -> list[dict]:
        """Every session's insights, oldest first."""
        return self.files.load_all_insights()

    # ---- codebase map -----------------------------------------------------------------------
    async def update_codebase_map(self, discoveries: dict[str, str]) -> SaveReport:
        """Merge file purposes into ``codebase_map.json``."""
        if isinstance(discoveries, dict):
            check_json(discoveries, "discoveries")
        files = parse(CodebaseMap, {"files": discoveries}, "discoveries", wrapped=True).files
        self._check_size(files, "discoveries")
        await self._graph_guard()
        files = self._clean(files)
        with self._index_journal() as entry:
            path = self.files.update_codebase_map(files)
            return await self._propagate(self.files.map_items(files), SaveReport(path=str(path)),
                                         entry)

    async def load_codebase_map(self) -> dict[str, str]:
        """File path -> purpose."""
        return self.files.load_codebase_map()

    # ---- gotchas and patterns -------------------------------------------------------------
    async def _append(self, kind: str, text: str, flag_updates: bool = True) -> SaveReport:
        note = parse(Note, {"text": text}, kind, wrapped=True)
        self._check_size(note.text, kind)
        await self._graph_guard()
        clean = self._clean(note.text)
        with self._index_journal() as entry:
            added = self.files.append_bullet(kind, clean)
            report = SaveReport(path=str(self.files.bullet_file(kind)),
                                files="written" if added else "unchanged")
            items = self.files.bullet_items(kind, [clean]) if added else []
            report = await self._propagate(items, report, entry)
        if items and flag_updates:  # validity.py: an older note this one seems to update
            await self._flag_updates(kind, clean, items[0].id)
        return report

    async def append_gotcha(self, gotcha: str) -> SaveReport:
        """Add a pitfall to ``gotchas.md`` (deduplicated)."""
        return await self._append("gotcha", gotcha)

    async def append_pattern(self, pattern: str) -> SaveReport:
        """Add a pattern to ``patterns.md`` (deduplicated)."""
        return await self._append("pattern", pattern)

    async def load_gotchas(self) -> list[str]:
        """Every gotcha, in file order."""
        return self.files.all_bullets("gotcha")

    async def load_patterns(self) -> list[str]:
        """Every pattern, in file order."""
        return self.files.all_bullets("pattern")

    # ---- whole spec -------------------------------------------------------------------------
    async def summary(self) -> dict[str, Any]:
        """Counts and the last three sessions, in the reference's shape."""
        sessions = self.files.sessions()  # read once for every count
        recent = [self.files.insight_copy(s) for _, s in sessions[-3:]]
        return {
            "total_sessions": len(sessions),
            "total_files_mapped": len(self.files.load_codebase_map(sessions)),
            "total_patterns": len(self.files.all_bullets("pattern", sessions)),
            "total_gotchas": len(self.files.all_bullets("gotcha", sessions)),
            "recent_insights": recent,
        }

    async def clear(self) -> None:
        """Delete this spec's memory files and its derived index entries."""
        await self._ep_settle()  # queued session rows land before the spec's rows are dropped
        await self._adopt()
        self.files.clear()
        if self._backends is not None or self.settings.home.exists():
            await self.backends.forget_spec(self)

    async def items(self) -> list[MemoryItem]:
        """Every searchable item held in this spec's files: insights, map, bullets and sessions."""
        return [*self.files.items(), *self.episode_items()]

    async def aclose(self) -> None:
        """Release connections held by derived backends (after queued session rows are written)."""
        if self._backends is not None:
            await self._ep_settle()
            await self._backends.aclose()

    async def __aenter__(self) -> "AsyncMemory":
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()


def _known_roots(settings: Settings) -> list[str]:
    """Project roots this home has registered (a sub-folder of one is that project)."""
    from .index.db import db_path

    path = db_path(settings.home)
    if not path.is_file():
        return []
    import sqlite3

    try:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5.0)
        try:
            return [r[0] for r in conn.execute("SELECT root FROM projects WHERE root IS NOT NULL")]
        finally:
            conn.close()
    except sqlite3.Error:  # an older schema or a locked file: no registered roots
        return []


class _NoSpec:
    """Stands in for the spec store of a project-only ``Memory``: every use names ``spec_dir``."""

    def __getattr__(self, name: str) -> Any:
        raise ValidationError("this operation needs a spec folder; this Memory was opened with "
                              "only a project folder", field="spec_dir")


class Memory:
    """Synchronous ``Memory``: the same methods as ``AsyncMemory``, returning plain values."""

    def __init__(self, spec_dir: str | Path | None, project_dir: str | Path | None = None, *,
                 settings: Settings | None = None):
        self._async = AsyncMemory(spec_dir, project_dir, settings=settings)

    @property
    def aio(self) -> AsyncMemory:
        """The async core behind this object."""
        return self._async

    def __getattr__(self, name: str) -> Any:
        fast = getattr(self._async, f"_sync_{name}", None)
        if fast is not None:  # a sync twin that needs no event loop (e.g. record_turn)
            return fast
        attr = getattr(self._async, name)
        if not inspect.iscoroutinefunction(attr):
            return attr

        @functools.wraps(attr)
        def call(*args: Any, **kwargs: Any) -> Any:
            return _sync.run(attr(*args, **kwargs))

        return call

    def close(self) -> None:
        """Release connections held by derived backends."""
        _sync.run(self._async.aclose())

    def __enter__(self) -> "Memory":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
