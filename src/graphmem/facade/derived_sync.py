"""Keeping one ``Memory``'s derived stores in step with its files.

The last steps of every write (index journal entry, local index, graph or its outbox), the
migration of an older release's rows (``adopt``), ``reindex`` (rebuild from the files), ``sync``
(replay the outbox now) and ``drift`` (what the graph lacks or holds extra).
"""

from __future__ import annotations

import contextlib
import logging
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Iterator

from ..models import MemoryItem, SaveReport

from graphmem.facade.derived import UsesDerived

if TYPE_CHECKING:
    from graphmem.facade.derived import DerivedRef
    from ..files.outbox import Outbox
    from ..identity import Project
    from graphmem.facade.scope import Scope
    from ..settings import Settings

log = logging.getLogger("graphmem")


@dataclass(eq=False)
class DerivedSync(UsesDerived):
    """The derived-store side of one ``Memory`` (its ``Scope``); ``settle`` waits for queued
    session rows (``episode_log.EpisodeLog.settle``)."""

    settings: Settings
    scope: Scope
    derived_ref: DerivedRef
    settle: Callable[[], Awaitable[None]]
    _adopted: bool = field(default=False, init=False)


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
        if self.settings.graph.mode != "off":
            await self.derived.check_graph_embedder(self.scope.project.key)

    @contextlib.contextmanager
    def journal(self) -> Iterator[Any]:
        """A durable index-journal entry around one spec write: made before the files change,
        dropped once the index has the write; left for replay when it does not (see
        ``index/journal.py``)."""
        entry = self.derived.begin_index_write(str(self.scope.root), str(self.scope.spec_dir))
        try:
            yield entry
        except Exception:
            if entry is not None:  # the file store refused the write: nothing to replay
                entry.finish()
            raise
        finally:
            if entry is not None:
                entry.release()

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
        if self.settings.graph.mode != "off":
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

        outbox = self.outbox()
        if self.settings.graph.mode == "off":
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

        items = {i.id for i in spec_items(self.scope.project, self.scope.files.spec_dir)}
        queued = self.outbox().size()
        if self.settings.graph.mode == "off":
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
