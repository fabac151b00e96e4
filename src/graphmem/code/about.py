"""``about(path_or_symbol)``: everything known about one file or symbol, current first, then history.

A memory is *about* a target when one of its own anchors (``anchors.jsonl``, not the ``via``
session ones) names the target's path, a path whose content now sits at the target (a rename),
or a symbol of that name (``Client.charge`` or just ``charge``). Each entry carries its
freshness (``freshness.item_state`` over the item's own anchors) and its validity
(``validity.jsonl``). Current memories come first, newest first; retired and superseded ones
follow as history, oldest to newest.

The same answer comes from two places: the files (anchors + validity logs, this module) and,
with the graph on, the project's graph (``ABOUT`` edges with Graphiti's ``valid_at`` /
``invalid_at`` / ``expired_at``, ``graph/code_graph.py``). Both are reduced to the same
``Mention`` rows and finished here by ``assemble``.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

from ..errors import ValidationError
from .freshness import anchor_state, item_state
from .tree import Snapshot, snapshot

log = logging.getLogger("graphmem.code")
HISTORY = ("retired", "superseded")
MAX_TARGET = 1_000
STATES_FILE = "anchor_states.json"


@dataclass
class Mention:
    """One memory's own anchors with what the target matched, from either source."""

    id: str
    anchors: list[dict]                  # all its own anchors (path, blob, symbol, digest)
    matched: list[dict] = field(default_factory=list)
    head: str | None = None
    learned_at: str | None = None
    validity: dict | None = None         # {"state", "by", "reason", "invalid_at", "recorded_at"}


def check_target(target: Any, project_dir: Path | None) -> str:
    """A relative path or symbol name; an absolute path inside the project is made relative."""
    if not isinstance(target, str) or not target.strip() or len(target) > MAX_TARGET \
            or "\x00" in target or any(0xD800 <= ord(c) <= 0xDFFF for c in target):
        raise ValidationError(f"must be a file path (relative to the project) or a symbol name, "
                              f"1-{MAX_TARGET} characters", field="path_or_symbol")
    t = target.strip().removeprefix("./")
    if project_dir is not None and Path(t).is_absolute():
        try:
            t = Path(t).resolve().relative_to(project_dir).as_posix()
        except ValueError:
            raise ValidationError(f"{target} is outside the project {project_dir}",
                                  field="path_or_symbol") from None
    return t


def matches(a: dict, target: str, snap: Snapshot) -> bool:
    """Does one anchor name ``target`` (its path, its path's new name, or its symbol)?"""
    sym = a.get("symbol")
    if sym:
        if sym == target or sym.endswith("." + target) or f"{a.get('path')}:{sym}" == target:
            return True
    if a.get("path") == target:
        return True
    now = anchor_state({"path": a.get("path"), "blob": a.get("blob")}, snap)
    return now.get("to") == target


def local_mentions(spec_dirs: Iterable[str | Path], target: str, snap: Snapshot) -> list[Mention]:
    """Mentions of ``target`` read from the spec folders' anchors and validity logs."""
    from ..validity import validity_log
    from .anchors import book

    out: dict[str, Mention] = {}
    for spec in spec_dirs:
        events = validity_log(spec).events
        for item_id, rec in book(spec).records.items():
            own = [a for a in rec.get("anchors") or [] if isinstance(a, dict) and not a.get("via")]
            hit = [a for a in own if matches(a, target, snap)]
            if hit:
                out[item_id] = Mention(item_id, own, hit, rec.get("head"), rec.get("at"),
                                       _validity(events.get(item_id)))
    return list(out.values())


def _validity(ev: dict | None) -> dict | None:
    if not ev:
        return None
    return {k: ev.get(k) for k in ("state", "by", "reason", "invalid_at", "recorded_at")}


def assemble(mentions: list[Mention], rows: dict[str, Any], snap: Snapshot, target: str,
             source: str) -> dict:
    """The answer: ``{"target", "source", "current": [...], "history": [...]}``; ``rows`` are
    the memories as the local index holds them (id -> ``Hit``)."""
    current, history = [], []
    for m in mentions:
        row = rows.get(m.id)
        if row is None:  # anchored but no longer held by the files (a replaced insight)
            continue
        fresh = item_state({"anchors": m.anchors, "head": m.head, "at": m.learned_at,
                            "items": [f"{source}:{m.id}"]}, snap)  # memo key per source
        entry = {"id": m.id, "kind": row.kind, "text": row.text, "spec": row.spec,
                 "session": row.session, "valid_at": _iso(row.time),
                 "learned_at": m.learned_at,
                 "anchors": [_short(a) for a in m.matched],
                 "freshness": {k: fresh[k] for k in ("state", "moved", "changed", "gone",
                                                     "symbols_changed", "commits")},
                 "validity": m.validity}
        (history if (m.validity or {}).get("state") in HISTORY else current).append(entry)
    current.sort(key=lambda e: (e["valid_at"] or "", e["id"]), reverse=True)
    history.sort(key=lambda e: (e["valid_at"] or "", (e["validity"] or {}).get("invalid_at") or "",
                                e["id"]))
    return {"target": target, "source": source, "current": current, "history": history}


def _short(a: dict) -> dict:
    return {k: a[k] for k in ("path", "symbol") if a.get(k)}


def _iso(value: Any) -> str | None:
    if value is None:
        return None
    return value.isoformat() if hasattr(value, "isoformat") else str(value)


class AboutMixin:
    """``about`` on ``AsyncMemory``."""

    async def about(self, path_or_symbol: str) -> dict:
        """Everything known about a file or symbol of this project: current memories first
        (newest first), then retired and superseded ones (oldest to newest), each with its
        freshness. Answered from the project's graph when it is on and reachable, else from
        the files (anchors and validity logs): both give the same answer."""
        target = check_target(path_or_symbol, self.project_dir)
        await self._ep_settle()
        snap = snapshot(self.project_dir, max_age=0)
        mentions, source = None, "files"
        if self.settings.graph.mode != "off":
            mentions = await self._graph_mentions(target, snap)
            source = "graph" if mentions is not None else "files"
        if mentions is None:
            mentions = local_mentions(self._about_specs(), target, snap)
        if self.spec_dir is not None:
            mentions = [m for m in mentions if m.id in self._spec_ids()]
        rows = {h.id: h for h in self._hits_by_id([m.id for m in mentions])} if mentions else {}
        return assemble(mentions, rows, snap, target, source)

    def _about_specs(self) -> list[Path]:
        from ..search import spec_folders

        return [self.spec_dir] if self.spec_dir is not None else spec_folders(Path(self.project_dir))

    def _spec_ids(self) -> set[str]:
        from .anchors import book

        return set(book(self.spec_dir).records)

    async def _graph_mentions(self, target: str, snap: Snapshot) -> list[Mention] | None:
        """Mentions from the graph; None when the graph is off or cannot answer."""
        from ..errors import GraphmemError
        from ..graph.code_graph import about_mentions

        try:
            graph = await self.backends.graph_store()
            if graph is None or not graph.available:
                return None
            return await about_mentions(graph, self.project.key, target, snap)
        except GraphmemError as exc:
            log.info("about %s from the files: the graph cannot answer (%s)", target, exc)
            return None

    async def refresh_anchors(self) -> dict:
        """What the git hooks run: anchor the items that have no anchors yet, write each spec's
        ``memory/anchor_states.json`` (every anchored item's freshness now), and send the moved
        ones to the graph again (their files' ``RENAMED_TO`` edges). Reads never wait for it."""
        from ..files import SpecStore
        from ..files.lock import folder_lock
        from ..search import ITEM_SOURCES, spec_folders
        from .anchors import backfill

        project = Path(self.project_dir)
        await self._ep_settle()
        specs = spec_folders(project)
        items = [i for spec in specs for i in SpecStore(spec, self.project).items()]
        for source in ITEM_SOURCES:
            items.extend(source(self.project))
        written = backfill(project, items)
        counts: dict[str, int] = {}
        moved: set[str] = set()
        snap = snapshot(project, max_age=0)
        renamed, renames_head = await self._send_renames(project, specs, snap)
        for spec in specs:
            if not (Path(spec) / "memory").is_dir():
                continue
            with folder_lock(Path(spec) / "memory", name=".anchor_states.lock"):
                # the snapshot is taken under the lock: of two hooks' refreshes racing, the one
                # writing last saw the latest HEAD
                snap = snapshot(project, max_age=0)
                self._write_states(spec, snap, counts, moved, renames_head.get(str(spec)))
        graph = "off"
        if moved and self.settings.graph.mode != "off":
            for spec in specs:  # per spec: a failed write is queued in that spec's outbox
                part = [i for i in items if i.id in moved and i.spec == self.project.rel(spec)]
                if part:
                    graph, _ = await self.backends.write_graph(
                        SpecStore(spec, self.project).memory_dir, self.project_dir, part)
        return {"anchored": written, "specs": len(specs), "head": snap.head if snap else None,
                "states": counts, "moved": len(moved), "graph": graph, "renamed": renamed}

    async def _send_renames(self, project: Path, specs: list, snap: Snapshot) -> tuple[int, dict]:
        """RENAMED_TO edges for the renames of anchored files git saw since the last refresh
        that sent them -> (edges written, spec -> the HEAD to remember as sent)."""
        from ..errors import GraphmemError

        previous = {str(s): last_renames_head(s) for s in specs}
        if self.settings.graph.mode == "off" or not snap.git or not snap.head:
            return 0, previous
        todo = pending_renames(project, specs, snap.head, previous)
        try:
            if todo:
                from ..graph.code_graph import write_renames
                from ..graph.schema import group_id

                graph = await self.backends.graph_store()
                if graph is None or not graph.available:
                    raise GraphmemError(f"graph unavailable: {getattr(graph, 'last_error', '')}")
                sent = await write_renames(graph, group_id(self.project.key), todo)
            else:
                sent = 0
        except GraphmemError as exc:  # tried again by the next refresh: the head stays
            log.warning("renames not sent to the graph: %s", exc)
            return 0, previous
        return sent, {k: snap.head for k in previous}

    @staticmethod
    def _write_states(spec: Path, snap: Snapshot, counts: dict, moved: set,
                      renames_head: str | None = None) -> None:
        import json

        from ..files.atomic import atomic_write_text
        from .anchors import book

        states = {}
        for item_id, rec in book(spec).records.items():
            st = item_state(rec, snap)
            states[item_id] = {k: st[k] for k in ("state", "moved", "changed", "gone", "commits")}
            counts[st["state"]] = counts.get(st["state"], 0) + 1
            if st["moved"]:
                moved.add(item_id)
        atomic_write_text(Path(spec) / "memory" / STATES_FILE, json.dumps(
            {"head": snap.head, "renames_head": renames_head, "states": states}, indent=1,
            sort_keys=True) + "\n")

    async def _validity_to_graph(self, item_ids: list[str]) -> None:
        """After a retire or supersede: the items go to the graph again (their ABOUT edges take
        the new ``invalid_at``), queued in the outbox when the graph cannot take them."""
        if self.settings.graph.mode == "off" or self.spec_dir is None:
            return
        from .anchors import book

        records = book(self.spec_dir).records  # validity lives on ABOUT edges: anchored only
        wanted = {i for i in item_ids if any(not a.get("via") for a in
                                             (records.get(i) or {}).get("anchors") or ())}
        if not wanted:
            return
        items = [i for i in self.files.items() if i.id in wanted]
        if items:
            await self.backends.write_graph(self.files.memory_dir, self.project_dir, items)


def last_renames_head(spec: str | Path) -> str | None:
    """The HEAD up to which a spec's refresh sent renames to the graph (None: never)."""
    import json

    try:
        got = json.loads((Path(spec) / "memory" / STATES_FILE).read_text())
    except (OSError, ValueError):
        return None
    head = got.get("renames_head") if isinstance(got, dict) else None
    return head if isinstance(head, str) else None


def pending_renames(project: Path, specs: list, head: str,
                    previous: dict[str, str | None]) -> list[tuple[str, str, str]]:
    """Renames since the oldest refresh that sent some (the whole window when one never did),
    of files the specs' anchors name, and the later renames of those files' new names."""
    from .anchors import book
    from .history import renames

    heads = set(previous.values())
    since = heads.pop() if len(heads) == 1 else None
    if since == head:
        return []
    relevant = {p for s in specs for p in book(s).by_path}
    out = []
    for old, new, when in renames(project, since, head):
        if old in relevant:
            out.append((old, new, when))
            relevant.add(new)
    return out


def format_about(ans: dict, emit: Callable[[str], None] = print) -> None:
    """The human form of an ``about`` answer (the CLI's)."""
    def line(e: dict) -> str:
        f = e["freshness"]
        extra = ""
        if f["state"] == "moved" and f["moved"]:
            extra = " -> " + ", ".join(f"{a} now {b}" for a, b in f["moved"].items())
        elif f["state"] == "changed" and f["changed"]:
            extra = " (" + ", ".join(f["changed"]) + " changed since)"
        v = e["validity"] or {}
        mark = f" [{v['state']} {v.get('invalid_at') or ''}]".rstrip() if v else ""
        return f"  [{f['state']}{extra}]{mark} {e['kind']}: {e['text']}  ({e['id']})"

    emit(f"About {ans['target']} (from the {ans['source']}):")
    if not ans["current"] and not ans["history"]:
        emit("  nothing known")
        return
    emit(f"Current ({len(ans['current'])}):")
    for e in ans["current"]:
        emit(line(e))
    if ans["history"]:
        emit(f"History, oldest first ({len(ans['history'])}):")
        for e in ans["history"]:
            emit(line(e))
