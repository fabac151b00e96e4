"""The derived stores behind the file store: the local index and the knowledge graph.

Both are written after the files and can be rebuilt from them. A failure here never fails a
save: the local index reports ``failed`` and the write stays in the index journal, replayed from
the files by the next open, search or write (``graphmem.facade.repair``); the graph queues the items in
the outbox.

Wiring (each side implemented in its own package):
- ``graphmem.index.local_backend.LocalBackend(settings)`` with ``write(items)``,
  ``forget_spec(project, spec)``, ``search(...) -> list[Hit]``, ``reindex(...)``, ``close()``.
- ``graphmem.graph.open_graph(settings, embedder, llm) -> GraphStore`` (async) with
  ``save(items) -> None`` (raises GraphError on failure), ``search(...)``, ``aclose()``; the
  outbox lives in the spec's memory folder (``graphmem.files.outbox``).
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from graphmem.graph.presence import in_use as graph_in_use
from graphmem.models import GraphOutcome, IndexOutcome, MemoryItem, SaveReport
from graphmem.redact import redact_items
from graphmem.settings import Settings

if TYPE_CHECKING:
    from graphmem.identity import Project
    from graphmem.facade.scope import Scope

log = logging.getLogger("graphmem.derived")


class DerivedStores:
    """Owns the derived stores for one ``GRAPHMEM_HOME``; each write or drop names the
    ``Scope`` (project, spec folder) or the project it is for."""

    def __init__(self, settings: Settings):
        self.settings = settings
        self._local = None
        self._caught_up: set[str] = set()  # projects checked against the index this process

    @property
    def local(self):
        """The local index side (``graphmem.index.local_backend.LocalBackend``), opened on first use."""
        if self._local is None:
            from graphmem.index.local_backend import LocalBackend

            self._local = LocalBackend(self.settings)
        return self._local

    def clean(self, items: list[MemoryItem]) -> list[MemoryItem]:
        """Items as the derived stores may hold them: redacted, whoever wrote the files (the
        index and the graph redact what they store too; this is for the outbox)."""
        return redact_items(items) if self.settings.redact else list(items)

    _registered: set = set()  # (key, root) pairs this object has put in the project registry

    def register(self, project: "Project") -> None:
        """Record where ``project`` is checked out on this machine (once per object)."""
        mark = (project.key, str(project.root))
        if mark not in self._registered:
            self.local.index.register_project(project.key, project.name, str(project.root))
            self._registered = self._registered | {mark}

    def localise(self, hits: list, project: "Project") -> list:
        """Hits with ``local_path``: where each hit's source file is on this machine (its
        project's registered root, ``None`` when that project is not checked out here)."""
        if not hits:
            return hits
        roots = {project.key: str(project.root)}
        if any(h.project not in roots for h in hits):
            roots = {**self.local.index.roots(), **roots}
        out = []
        for h in hits:  # os.path, not pathlib: this runs for every hit of every search
            root = roots.get(h.project)
            local = None
            if h.source and os.path.isabs(h.source):
                local = h.source
            elif root is not None:
                local = os.path.join(root, h.source) if h.source else root
                if ".." in h.source and not os.path.normpath(local).startswith(
                        os.path.join(root, "")):  # never a file out of the checkout
                    local = None
            out.append(h.replaced(local_path=local))
        return out

    _legacy_checked = False

    async def legacy_of(self, project: "Project") -> list[dict]:
        """Registry rows written before project keys (index schema < 3) that belong to
        ``project``: their old key (an absolute path) is its root or a folder inside it."""
        if self._legacy_checked:
            return []

        async def legacy(index):  # through ``healing``: a damaged database is rebuilt first
            return [r for r in index.projects() if r["legacy"]]

        rows = await self.local.healing(legacy)
        if not rows:
            self._legacy_checked = True  # nothing left to migrate in this home
            return []
        root = project.root
        return [r for r in rows if Path(r["path"]) == root or root in Path(r["path"]).parents]

    async def drop_legacy(self, project: "Project") -> bool:
        """Drop this project's rows (and graphs) written by an older release, keyed by path;
        True when there were any: the caller rebuilds the project from its files."""
        old = await self.legacy_of(project)
        if not old:
            return False
        for r in old:
            async def forget(index, key=r["path"]):
                index.forget_project(key, keep=key == project.key)

            await self.local.healing(forget)
            if r["path"] != project.key and graph_in_use(self.settings):
                from graphmem.errors import GraphmemError

                try:
                    graph = await self.graph_store()
                    if graph is not None:
                        await graph.drop_project(r["path"])
                except GraphmemError as exc:  # `graphmem doctor` lists graphs left behind
                    log.warning("could not drop the old graph of %s: %s", r["path"], exc)
        log.info("migrating %d project(s) of an older release into %s", len(old), project.key)
        return True

    async def drop_former(self, project: "Project") -> bool:
        """Drop the rows (and graph) of the key this project had before (``Project.former_key``:
        a pruned worktree keyed by a missing folder); True when there were any: the caller
        rebuilds the project from its files under its key now."""
        key = project.former_key
        if key is None:
            return False

        async def forget(index):
            if index.project_id(key) is None:
                return False
            index.forget_project(key)
            return True

        if not await self.local.healing(forget):
            return False
        if graph_in_use(self.settings):
            from graphmem.errors import GraphmemError

            try:
                graph = await self.graph_store()
                if graph is not None:
                    await graph.drop_project(key)
            except GraphmemError as exc:  # `graphmem doctor` lists graphs left behind
                log.warning("could not drop the graph of %s: %s", key, exc)
        log.info("moving the memories of %s to its repository's key %s", key, project.key)
        return True

    async def write(self, scope: "Scope", items: list[MemoryItem], report: SaveReport,
                    entry: Any = None) -> None:
        """Send items freshly written to the spec of ``scope`` to the index and the graph,
        recording the outcome."""
        try:
            self.register(scope.project)
        except Exception as exc:  # the registry is derived too: a failure never fails a save
            log.warning("project registry not updated: %s", exc)
        if graph_in_use(self.settings):  # who and where, for teammates sharing the graph
            from graphmem.facade.team import stamp

            items = stamp(items, self.settings, scope.root)
        report.index = await self.write_index(items, entry, scope.project)
        memory_dir = scope.memory_dir
        assert memory_dir is not None  # the items were just written to the spec's files
        report.graph, note = await self.write_graph(memory_dir, scope.root, items)
        if note:
            report.detail = note

    def begin_index_write(self, project: str, spec: str | None):
        """A durable index-journal entry for a spec write about to happen (``index/journal.py``);
        None when the journal cannot be written (the write goes on; doctor shows any drift)."""
        from graphmem.errors import StorageError
        from graphmem.index.journal import Journal

        try:
            return Journal(self.settings.home).begin(project, spec, sync=self.settings.files.fsync)
        except StorageError as exc:
            log.warning("%s", exc)
            return None

    async def write_index(self, items: list[MemoryItem], entry: Any = None,
                          project: "Project | None" = None) -> IndexOutcome:
        """Upsert into the local index -> "indexed" | "failed"; then replay what the journal
        holds. ``entry`` (the write's journal entry) is dropped once the rows are in."""
        await self.catch_up(project)
        status, stored = await self.local.write_rows(items)
        if stored and entry is not None:
            entry.finish()
        if stored:
            await self.replay_index()
        return status

    async def catch_up(self, project: "Project | None") -> None:
        """Once per process and project: journal a project the index has never seen."""
        from graphmem.facade import repair
        from graphmem.errors import GraphmemError

        if project is None or project.key in self._caught_up:
            return
        self._caught_up.add(project.key)
        try:
            repair.catch_up(self.local, project)
        except GraphmemError as exc:
            log.warning("index catch-up of %s skipped: %s", project.key, exc)

    async def replay_index(self) -> int:
        """Replay index journal entries left by failed or interrupted writes (``repair.replay``)."""
        from graphmem.facade import repair
        from graphmem.errors import GraphmemError

        try:
            return await repair.replay(self.local)
        except GraphmemError as exc:
            log.warning("index journal not replayed: %s", exc)
            return 0

    async def search_local(self, query: str, projects: list[str] | None = None, *,
                           catch_up: "Project | None" = None, **kw) -> list:
        """Search the local index (see ``LocalBackend.search``), after replaying its journal
        (and journaling ``catch_up``, the searching project, if this index never saw it)."""
        await self.catch_up(catch_up)
        await self.replay_index()
        return await self.local.search(query, projects=projects, **kw)

    def known_locally(self, ids: list[str]) -> set[str]:
        """The given item ids that the local index holds (and therefore ranks itself)."""
        return self.local.index.known(ids)

    async def reindex_local(self, project: "Project", items: list[MemoryItem]) -> dict:
        """Make the local index hold exactly ``items`` for ``project``."""
        self.register(project)
        counts = await self.local.reindex(project.key, items)
        return {**counts, "project": str(project.root), "key": project.key}

    # ---- graph (graphmem.graph; outbox in graphmem.files.outbox) ------------------------------
    _graph = None  # the GraphStore, once opened; None while the graph is off
    _graph_opened = False

    async def graph_store(self):
        """The graph store, opened on first use; None while the graph is not in use (``off``,
        or ``auto`` with no server: ``graph.presence``, checked again at each call until the
        store is opened). Nothing graph-related is imported while the graph is not in use."""
        if not self._graph_opened and graph_in_use(self.settings):
            from graphmem.graph.store import open_graph
            from graphmem.providers import get_embedder, get_llm, get_reranker

            self._graph = await open_graph(self.settings, get_embedder(self.settings),
                                           get_llm(self.settings), get_reranker(self.settings))
            self._graph_opened = True
        return self._graph

    async def check_graph_embedder(self, project_key: str) -> None:
        """Before a write: refuse (IndexMismatchError) when the project's graph holds another
        embedder's vectors. A graph that is off or unreachable is no reason to refuse: the write
        is queued and its replay checks again."""
        from graphmem.errors import GraphmemError, IndexMismatchError

        if not graph_in_use(self.settings):
            return
        try:
            graph = await self.graph_store()
            if graph is not None and graph.available:
                await graph.check_embedder(project_key)
        except IndexMismatchError:
            raise
        except GraphmemError as exc:
            log.info("graph embedder not checked before the write: %s", exc)

    async def graph_embedder(self, project_key: str) -> tuple[str, int] | None:
        """(model, dimension) recorded in the project's graph, for ``graphmem doctor``."""
        graph = await self.graph_store()
        return await graph.recorded_embedder(project_key) if graph is not None else None

    async def write_graph(self, memory_dir: Path, project_dir: Path,
                          items: list[MemoryItem]) -> tuple[GraphOutcome, str | None]:
        """Write to the graph, or queue in the outbox -> ("written" | "queued" | "off", note).

        The note says why a write was queued, or what LLM extraction reported; it is returned
        rather than kept on the object, because concurrent writes share one ``DerivedStores``.
        """
        from graphmem.errors import GraphmemError

        if not graph_in_use(self.settings):
            return "off", None
        from graphmem.files.outbox import Outbox
        from graphmem.facade.team import stamp

        items = self.clean(stamp(items, self.settings, project_dir))  # stamp: no-op after ``write``
        outbox = Outbox(memory_dir)
        try:
            graph = await self.graph_store()
            if graph is None:
                return "off", None
            if not graph.available:
                raise GraphmemError(f"graph unavailable: {graph.last_error}")
            if outbox.path.exists():  # the server is back: older queued writes go first
                await self.replay_outbox(outbox)
            return "written", await graph.save(items)
        except GraphmemError as exc:  # server down, timeout, provider error, embedder mismatch
            outbox.add(items, str(exc))
            return "queued", f"graph: queued ({exc})"

    async def replay_outbox(self, outbox, force: bool = False) -> dict:
        """Write an outbox's entries to the graph, dropping each one that went through."""
        from graphmem.files.outbox import latest_items

        graph = await self.graph_store()
        if graph is None:
            return {"replayed": 0, "remaining": outbox.size(), "graph": "off"}
        if force:
            await graph.connect(force=True)
        done = replayed = 0
        batch: list = []

        async def flush() -> None:
            nonlocal done, replayed
            items = latest_items(batch)  # each id once, its latest version
            await graph.save(items)
            outbox.remove(e["entry"] for e in batch)  # only after the graph has them
            done, replayed = done + len(batch), replayed + len(items)
            batch.clear()

        for entry in outbox.entries():  # batched: one graph write per ~1000 queued items
            batch.append(entry)
            if sum(len(e["items"]) for e in batch) >= 1000:
                await flush()
        if batch:
            await flush()
        return {"replayed": replayed, "entries": done, "remaining": outbox.size(), "graph": "written"}

    async def search_graph(self, query: str, projects: list[str] | None, kinds: list[str] | None = None,
                           limit: int = 10, spec: str | None = None,
                           exclude: Any = None) -> list | None:
        """Graph hits (``backend="graph"``, ids = MemoryItem ids; ``refused``: the winners that
        failed their checks, see ``hybrid_search.GraphHits``); None when the graph is off.
        ``projects`` None = every project graph. Raises GraphError when the graph is on but
        cannot answer (the caller falls back to the local index)."""
        from graphmem.errors import GraphError, GraphmemError, IndexMismatchError

        if not graph_in_use(self.settings):
            return None
        try:
            graph = await self.graph_store()
            if graph is None:
                return None
            return await graph.search(query, projects, kinds, limit, spec=spec, exclude=exclude)
        except (GraphError, IndexMismatchError):  # another embedder's graph: the user must act
            raise
        except GraphmemError as exc:  # embedder failure: still "the graph failed"
            raise GraphError(str(exc)) from exc

    async def rebuild_graph(self, project: str, items: list[MemoryItem],
                            specs: list | None = None) -> str:
        """Make a project's graph hold exactly ``items`` (``graphmem reindex``) -> status; on a
        shared server (``GRAPHMEM_FALKORDB_URL``), only the items written from this machine are
        replaced, never a teammate's. The outboxes of ``specs`` are emptied: the rebuild covers
        what they held."""
        from graphmem.errors import GraphmemError

        if not graph_in_use(self.settings):
            return "off"
        try:
            graph = await self.graph_store()
            if graph is None:
                return "off"
            await graph.connect(force=True)
            from graphmem.facade.team import shared_owner

            mine = shared_owner(self.settings)
            if mine is None:  # on a shared server teammates' items stay (``reindex`` stamped ours)
                await graph.drop_project(project)
            for start in range(0, len(items), 1000):  # each chunk gets the write timeout
                await graph.save(items[start:start + 1000], extract=False)
            if mine is not None:
                stale = await graph.item_ids(project, owner=mine) - {i.id for i in items}
                if stale:  # gone from this home's files: tombstoned for the others too
                    await graph.delete_items(project, sorted(stale), owner=mine)
        except GraphmemError as exc:
            log.warning("graph rebuild of %s failed: %s", project, exc)
            return f"failed: {exc}"
        from graphmem.files.outbox import Outbox

        for spec in specs or []:
            box = Outbox(Path(spec) / "memory")
            box.remove(e["entry"] for e in box.entries())
        return "written"

    async def forget_spec(self, scope: "Scope") -> None:
        """Drop a cleared spec's items from the derived stores."""
        from graphmem.errors import StorageError

        try:
            await self.local.forget_spec(scope.project.key, scope.spec_key)
        except StorageError as exc:  # the files are gone already; a write never fails after them
            log.warning("the cleared spec's items stay in the local index until `graphmem doctor "
                        "--fix --spec-dir %s`: %s", scope.spec_dir, exc)
        if graph_in_use(self.settings):
            from graphmem.errors import GraphmemError

            try:
                graph = await self.graph_store()
                if graph is not None:  # on a shared server, this home's items only
                    from graphmem.facade.team import shared_owner

                    await graph.delete_spec(scope.project.key, scope.spec_key,
                                            shared_owner(self.settings))
            except GraphmemError as exc:  # the files are gone; `graphmem doctor` shows drift
                log.warning("could not remove the cleared spec from the graph: %s", exc)

    async def forget_items(self, project: str, ids: list[str]) -> None:
        """Drop items of ``project`` (its key) whose files are gone (a deleted session, replaced
        insights) from the index and the graph."""

        async def drop(index):
            return index.delete(project=project, ids=ids)

        await self.local.healing(drop)
        if graph_in_use(self.settings):
            from graphmem.errors import GraphmemError

            try:
                graph = await self.graph_store()
                if graph is not None:  # on a shared server, this home's items only
                    from graphmem.facade.team import shared_owner

                    await graph.delete_items(project, ids, owner=shared_owner(self.settings))
            except GraphmemError as exc:  # the files are gone; `graphmem doctor` shows drift
                log.warning("could not remove deleted items from the graph: %s", exc)

    async def aclose(self) -> None:
        """Close connections."""
        if self._local is not None:
            self._local.close()
        if self._graph is not None:
            await self._graph.aclose()
            self._graph, self._graph_opened = None, False


class DerivedRef:
    """A façade's derived stores: one given to share (the warm search server's), or its own
    opened on first use (``on_open`` runs then)."""

    def __init__(self, settings: Settings, shared: DerivedStores | None = None,
                 on_open: Callable[[], None] | None = None):
        self._settings = settings
        self._stores = shared
        self._on_open = on_open

    @property
    def opened(self) -> bool:
        """Whether the stores exist yet (given, or used once)."""
        return self._stores is not None

    def get(self) -> DerivedStores:
        """The stores, created on first use."""
        if self._stores is None:
            self._stores = DerivedStores(self._settings)
            if self._on_open is not None:
                self._on_open()
        return self._stores


@dataclass(eq=False)
class Collaborator:
    """What every façade collaborator is given, in this order (``AsyncMemory`` passes them):
    the settings, the scope, and the reference to the derived stores; ``derived`` is the stores
    themselves (opened on first use), the same name the façade gives them."""

    settings: Settings
    scope: Scope
    derived_ref: DerivedRef

    @property
    def derived(self) -> DerivedStores:
        """The derived stores (local index, graph), opened on first use."""
        return self.derived_ref.get()
