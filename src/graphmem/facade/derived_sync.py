"""Keeping one ``Memory``'s derived stores in step with its files.

The last steps of every write (index journal entry, local index, graph or its outbox), the
migration of an older release's rows (``adopt``), ``reindex`` (rebuild from the files), ``sync``
(replay the outbox now) and ``drift`` (what the graph lacks or holds extra).
"""

from __future__ import annotations

import contextlib
import logging
from functools import partial
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Iterator

from graphmem.graph.presence import in_use as graph_in_use
from ..models import MemoryItem, SaveReport

from graphmem.facade.derived import Collaborator

if TYPE_CHECKING:
    from ..files.outbox import Outbox
    from ..identity import Project

log = logging.getLogger("graphmem")


@dataclass(eq=False)
class DerivedSync(Collaborator):
    """The derived-store side of one ``Memory`` (its ``Scope``); ``settle`` waits for queued
    session rows (``episode_log.EpisodeLog.settle``)."""

    settle: Callable[[], Awaitable[None]]
    _adopted: bool = field(default=False, init=False)

    @property
    def deferred(self) -> bool:
        """Whether a spec write returns once its file is durable, the index and the graph
        following in the background (``write_behind.py``; ``index.write_behind``)."""
        return self.settings.index.write_behind is True

    @property
    def project(self) -> "Project":
        """The project (with ``settings`` and ``derived``, what ``team.pull`` reads)."""
        return self.scope.project

    # ---- the write path -----------------------------------------------------------------------
    async def adopt(self, rebuild: bool = True) -> None:
        """Once per object: migrate this project's index rows and graph from an older release
        (keyed by absolute paths, ``DerivedStores.drop_legacy``) or an older key
        (``Project.former_key``, ``drop_former``) by rebuilding it from its files."""
        if self._adopted:
            return
        self._adopted = True
        from ..index.db import db_path

        if not self.derived_ref.opened and not db_path(self.settings.home).is_file():
            return  # a new home: nothing older to migrate
        legacy = await self.derived.drop_legacy(self.scope.project)
        former = await self.derived.drop_former(self.scope.project)  # a pruned worktree's key
        if (legacy or former) and rebuild:
            await self.reindex()

    async def guard(self) -> None:
        """Before a file is written: a graph of another embedder refuses the write, so nothing
        is written that the graph could never take (``DerivedStores.check_graph_embedder``)."""
        if graph_in_use(self.settings):
            await self.derived.check_graph_embedder(self.scope.project.key)

    @contextlib.contextmanager
    def journal(self) -> Iterator[Any]:
        """A durable index-journal entry around one spec write: made before the files change,
        dropped once the index has the write; left for replay when it does not (see
        ``index/journal.py``)."""
        begin = partial(self.derived.begin_index_write, str(self.scope.root),
                        str(self.scope.spec_dir))
        if self.deferred:  # one entry for a burst of this process's writes to the spec
            from graphmem.facade import write_behind

            entry = write_behind.shared_entry(str(self.settings.home), str(self.scope.root),
                                              str(self.scope.spec_dir), begin)
        else:
            entry = begin()
        try:
            yield entry
        except Exception:
            if entry is not None:  # the file store refused the write: nothing to replay
                entry.finish()
            raise
        finally:
            if entry is not None:
                entry.release()

    def defer(self, entry: Any, items: Callable[[], list[MemoryItem]], report: SaveReport,
              after: Callable[[list[MemoryItem]], Awaitable[Any]] | None = None) -> SaveReport:
        """Index the write's ``items()`` and run ``after(items)`` once the write has returned
        (``write_behind``); ``entry`` (the write's journal entry) is kept locked until then ->
        the report: index and graph ``queued``."""
        from graphmem.facade import write_behind

        held = entry.hand_over() if entry is not None else None
        graph = graph_in_use(self.settings)  # its connections belong to this loop
        write_behind.defer(Deferred(self, held, items, after), on_loop=graph)
        report.index = "queued"
        report.graph = "queued" if graph else "off"
        return report

    async def index_many(self, jobs: list["Deferred"]) -> None:
        """Deferred writes of this spec, in order: their items in one index write (one
        transaction, one embedding pass; an id written twice keeps its latest version), then
        each one's ``after``."""
        done: list[tuple[Deferred, list[MemoryItem]]] = []
        for job in jobs:
            try:
                done.append((job, job.items()))
            except Exception as exc:  # its file is durable: its entry replays it from the files
                log.warning("a write's items not indexed yet (%s); replayed from the files", exc)
        latest = {i.id: i for _, items in done for i in items}
        await self.propagate(list(latest.values()), SaveReport(), _Entries([j.entry for j, _ in done]))
        for job, items in done:
            if job.after is not None:
                try:
                    await job.after(items)
                except Exception as exc:  # flags and drops after a durable write never fail it
                    log.warning("after a write: %s", exc)

    async def propagate(self, items: list[MemoryItem], report: SaveReport,
                        entry: Any = None) -> SaveReport:
        """After the files: anchors, then the index and the graph (or the outbox)."""
        report.items = len(items)
        await self.adopt()
        if items:
            from graphmem.code import record_anchors

            # anchors first: the graph write links the items to the code they name
            record_anchors(self.scope.root, self.scope.spec_dir, items)
            await self.derived.write(self.scope, items, report, entry)
        elif entry is not None:
            entry.finish()
        return report

    async def forget_replaced(self, old: list[MemoryItem], new: list[MemoryItem]) -> None:
        """Drop the items of a replaced file that neither the new version nor any other file of
        the spec holds (a gotcha may also sit in gotchas.md, a file in the map)."""
        from ..errors import GraphmemError

        gone = {i.id for i in old} - {i.id for i in new}
        if gone:
            gone -= {i.id for i in self.scope.files.items()}
        if not gone:
            return
        try:
            await self.derived.forget_items(self.scope.project.key, sorted(gone))
        except GraphmemError as exc:  # the file is saved; a journal entry drops them later
            log.warning("replaced insights may stay searchable until replayed: %s", exc)
            entry = self.derived.begin_index_write(str(self.scope.root), str(self.scope.spec_dir))
            if entry is not None:
                entry.release()

    # ---- rebuild, replay, drift ---------------------------------------------------------------
    async def reindex(self) -> dict[str, Any]:
        """Rebuild this project's part of the local index (and its graph) from its files."""
        from ..files.walk import project_items

        project = self.scope.project
        await self.adopt(rebuild=False)  # rows of an older release go; this rebuild replaces them
        await self.settle()  # no queued session row may land after the rebuild
        items, specs = project_items(project)
        if graph_in_use(self.settings):
            from graphmem.facade.team import stamp

            items = stamp(items, self.settings, project.root)  # this machine's files: its items
        counts = await self.derived.reindex_local(project, items)
        from ..code.anchors import backfill
        from ..files.walk import held_ids

        counts["anchors"] = backfill(project.root, items, held_ids(project))
        counts["specs"] = len(specs)
        counts["graph"] = await self.derived.rebuild_graph(project.key, items, specs)
        return counts

    def outbox(self) -> "Outbox":
        """This spec's graph outbox."""
        from ..files.outbox import Outbox

        return Outbox(self.scope.files.memory_dir)

    async def sync(self) -> dict[str, Any]:
        """Replay this spec's graph outbox now (see ``AsyncMemory.sync``)."""
        from ..errors import GraphmemError

        await self.settle()  # this process's queued writes reach the graph or the outbox first
        outbox = self.outbox()
        if not graph_in_use(self.settings):
            return {"replayed": 0, "entries": 0, "remaining": outbox.size(), "graph": "off"}
        try:
            done = await self.derived.replay_outbox(outbox, force=True)
        except GraphmemError as exc:
            return {"replayed": 0, "entries": 0, "remaining": outbox.size(),
                    "graph": f"unavailable: {exc}"}
        from graphmem.facade.team import pull_all

        try:
            pulled = await pull_all(self)
        except GraphmemError as exc:  # what was taken in stays, the cursor where it got to
            return {**done, "graph": f"failed taking in teammates' writes: {exc}"}
        return {**done, "pulled": pulled} if pulled is not None else done

    async def drift(self) -> dict[str, Any]:
        """Items in this spec's files but not in the graph, and graph items no file holds."""
        from ..files.walk import spec_items

        await self.settle()  # this process's queued writes first
        items = {i.id for i in spec_items(self.scope.project, self.scope.files.spec_dir)}
        queued = self.outbox().size()
        if not graph_in_use(self.settings):
            return {"graph": "off", "files": len(items), "queued": queued}
        graph = await self.derived.graph_store()
        if graph is None:
            return {"graph": "off", "files": len(items), "queued": queued}
        key, spec = self.scope.project.key, self.scope.spec_key
        in_graph = await graph.item_ids(key, spec)
        own = in_graph
        from graphmem.facade.team import shared_owner

        mine = shared_owner(self.settings)
        if mine is not None:  # a shared server: teammates' items of this spec are theirs to
            own = await graph.item_ids(key, spec, owner=mine)  # keep, not extra
        return {"graph": "on", "files": len(items), "in_graph": len(in_graph), "queued": queued,
                "missing": sorted(items - in_graph), "extra": sorted(own - items)}


@dataclass(eq=False)
class Deferred:
    """One deferred write's derived steps (``write_behind.Job``): its items, computed behind
    the write, and what follows their indexing (flags, replaced items dropped)."""

    key: DerivedSync  # consecutive writes of one Memory run as one batch
    entry: Any
    items: Callable[[], list[MemoryItem]]
    after: Callable[[list[MemoryItem]], Awaitable[Any]] | None = None

    async def run_many(self, jobs: list["Deferred"]) -> None:
        """Run ``jobs`` (this one first, all of one key) as one batch."""
        await self.key.index_many(jobs)


class _Entries:
    """The journal entries of a batch of writes, finished or kept together."""

    def __init__(self, entries: list[Any]):
        self.entries = [e for e in entries if e is not None]

    def finish(self) -> None:
        for e in self.entries:
            e.finish()

    def release(self) -> None:
        for e in self.entries:
            e.release()
