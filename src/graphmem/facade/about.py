"""``about`` and ``anchors refresh`` on the façade, over ``graphmem.code.about_answer`` (the answer
from the files or the graph) and ``graphmem.code.anchors`` (anchors and their states)."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from graphmem.graph.presence import in_use as graph_in_use
from graphmem.code.about_answer import (STATES_FILE, Mention, assemble, check_target, last_renames_head,
                          local_mentions, pending_renames, removals, unknown_note)
from ..code.freshness import item_state
from ..code.tree import Snapshot, snapshot

from graphmem.facade.derived import Collaborator

if TYPE_CHECKING:
    from .episode_log import EpisodeLog

log = logging.getLogger("graphmem.code")


@dataclass(eq=False)
class About(Collaborator):
    """``about`` and ``refresh_anchors`` of ``AsyncMemory`` over one ``Scope``; ``hits_by_id``
    reads memories from the local index (``Recall.hits_by_id``)."""

    episodes: EpisodeLog
    hits_by_id: Callable[[list[str]], list[Any]]

    async def about(self, path_or_symbol: str) -> dict:
        """Everything known about a file or symbol of this project: ``current`` memories (newest
        first), ``gone`` ones (not retired, but their code is gone; newest first), then
        ``history``, the retired and superseded ones (oldest to newest), each with its
        freshness. Answered from the project's graph when it is on and reachable, else from
        the files (anchors and validity logs): both give the same answer."""
        target = check_target(path_or_symbol, self.scope.root)
        await self.episodes.settle()
        snap = snapshot(self.scope.root, max_age=0)
        mentions, source = None, "files"
        if graph_in_use(self.settings):
            mentions = await self._graph_mentions(target, snap)
            source = "graph" if mentions is not None else "files"
        if mentions is None:
            mentions = local_mentions(self._about_specs(), target, snap)
        if not self.scope.project_wide:
            mentions = [m for m in mentions if m.id in self._spec_ids()]
        rows = {h.id: h for h in self.hits_by_id([m.id for m in mentions])} if mentions else {}
        ans = assemble(mentions, rows, snap, target, source, works_of=self._works_of)
        ans["removed"] = removals(self._about_specs(), target, self.hits_by_id)
        lost = None if mentions or ans["removed"] else unknown_note(target, snap, self.scope.root)
        ans["notes"] = [lost] if lost else []  # a typo must show
        return ans

    def _about_specs(self) -> list[Path]:
        from ..files.walk import spec_folders

        return spec_folders(Path(self.scope.root)) if self.scope.project_wide else [self.scope.spec_dir]

    def _works_of(self, row: Any):
        """The work lines (``changes.Works``) of the spec folder here that holds ``row``."""
        from ..code.anchors import book

        if not row.spec or row.project != self.scope.project.key:
            return None
        return book(Path(self.scope.root) / row.spec).works

    def _spec_ids(self) -> set[str]:
        from ..code.anchors import book

        return set(book(self.scope.require_spec()).records)  # asked only with a spec

    async def _graph_mentions(self, target: str, snap: Snapshot) -> list[Mention] | None:
        """Mentions from the graph; None when the graph is off or cannot answer."""
        from ..errors import GraphmemError
        from ..graph.code_graph import about_mentions

        try:
            graph = await self.derived.graph_store()
            if graph is None or not graph.available:
                return None
            return await about_mentions(graph, self.scope.project.key, target, snap)
        except GraphmemError as exc:
            log.info("about %s from the files: the graph cannot answer (%s)", target, exc)
            return None

    async def diff(self, commits: str | None = None) -> dict:
        """What the commits ``BASE..HEAD`` did to memory (``code/memory_diff.py``)."""
        from ..code.memory_diff import StaleFinder, committed_changes, resolve_range
        from ..files.walk import project_items

        project = self.scope.project
        base, head, text = resolve_range(Path(project.root), commits)
        report: dict[str, Any] = {"range": text, "base": base, "head": head,
                                  **committed_changes(project, base, head),
                                  "stale": [], "moved": [], "gone": []}
        items, specs = project_items(project)
        texts = {it.id: it.text for it in items}
        for row in StaleFinder(Path(project.root), specs).find(base, head):
            row["text"] = texts.get(row["id"])
            report[row["state"]].append(row)
        return report

    async def refresh_anchors(self) -> dict:
        """What the git hooks run: anchor the items that have no anchors yet, write each spec's
        ``memory/anchor_states.json`` (every anchored item's freshness now), and send the moved
        ones to the graph again (their files' ``RENAMED_TO`` edges). Reads never wait for it."""
        from ..files import SpecStore
        from ..files.lock import folder_lock
        from ..files.walk import held_ids, project_items
        from ..code.anchors import backfill

        project = Path(self.scope.root)
        await self.episodes.settle()
        items, specs = project_items(self.scope.project)
        # items written while this runs keep their anchor records (``held_ids``: asked late)
        written = backfill(project, items, held_ids(self.scope.project))
        counts: dict[str, int] = {}
        moved: set[str] = set()
        late = False
        snap = snapshot(project, max_age=0)
        renamed, renames_head = await self._send_renames(project, specs, snap)
        for spec in specs:
            if not (Path(spec) / "memory").is_dir():
                continue
            with folder_lock(Path(spec) / "memory", name=".anchor_states.lock"):
                # the snapshot is taken under the lock: of two hooks' refreshes racing, the one
                # writing last saw the latest HEAD
                snap = snapshot(project, max_age=0)
                late = self._write_states(spec, snap, counts, moved,
                                          renames_head.get(str(spec))) or late
        graph = "off"
        if moved and graph_in_use(self.settings):
            for spec in specs:  # per spec: a failed write is queued in that spec's outbox
                part = [i for i in items if i.id in moved and i.spec == self.scope.project.rel(spec)]
                if part:
                    graph, _ = await self.derived.write_graph(
                        SpecStore(spec, self.scope.project).memory_dir, self.scope.root, part)
        return {"anchored": written, "specs": len(specs), "head": snap.head if snap else None,
                "git": bool(snap and snap.git), "states": counts, "moved": len(moved),
                "graph": graph, "renamed": renamed, "late": late}

    async def _send_renames(self, project: Path, specs: list, snap: Snapshot) -> tuple[int, dict]:
        """RENAMED_TO edges for the renames of anchored files git saw since the last refresh
        that sent them -> (edges written, spec -> the HEAD to remember as sent)."""
        from ..errors import GraphmemError

        previous = {str(s): last_renames_head(s) for s in specs}
        if not graph_in_use(self.settings) or not snap.git or not snap.head:
            return 0, previous
        todo = pending_renames(project, specs, snap.head, previous)
        try:
            if todo:
                from ..graph.code_graph import write_renames
                from ..graph.schema import group_id

                graph = await self.derived.graph_store()
                if graph is None or not graph.available:
                    raise GraphmemError(f"graph unavailable: {getattr(graph, 'last_error', '')}")
                sent = await write_renames(graph, group_id(self.scope.project.key), todo)
            else:
                sent = 0
        except GraphmemError as exc:  # tried again by the next refresh: the head stays
            log.warning("renames not sent to the graph: %s", exc)
            return 0, previous
        return sent, {k: snap.head for k in previous}

    @staticmethod
    def _write_states(spec: Path, snap: Snapshot, counts: dict, moved: set,
                      renames_head: str | None = None) -> bool:
        """Write ``anchor_states.json`` from ``snap`` -> whether it is late: the repository's
        HEAD or index moved while the states were computed, so the file says ``"late": true``
        (the refresh the newer commit's hook starts writes it again)."""
        import json

        from ..files.atomic import atomic_write_text
        from ..code.anchors import book

        states = {}
        for item_id, rec in book(spec).records.items():
            st = item_state(rec, snap)
            states[item_id] = {k: st[k] for k in ("state", "moved", "changed", "gone", "commits")}
            counts[st["state"]] = counts.get(st["state"], 0) + 1
            if st["moved"]:
                moved.add(item_id)
        late = snap.outdated()
        atomic_write_text(Path(spec) / "memory" / STATES_FILE, json.dumps(
            {"head": snap.head, "renames_head": renames_head, "states": states,
             **({"late": True} if late else {})}, indent=1, sort_keys=True) + "\n")
        return late
