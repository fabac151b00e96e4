"""Keeping the derived stores in line with the files: index journal replay, drift, ``doctor --fix``.

- ``replay`` runs the index journal (``index/journal.py``): each entry left by a write whose index
  update failed or whose process died reconciles its spec (or project) against the files.
- ``catch_up`` journals a project the index has never seen (a new or rebuilt database) so that
  its files are indexed whole, not only the next write.
- ``index_drift`` / ``fix_index`` compare and repair one spec or project (files vs index rows);
  ``fix_graph`` replays the outbox, then writes what the graph lacks and drops what no file holds.

Reconciling is idempotent and compares (id, content hash), so unchanged rows are not rewritten;
rows written after the files were read (a concurrent writer) are never dropped.
"""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable

from graphmem.errors import GraphmemError
from graphmem.files import walk
from graphmem.files.walk import project_items
from graphmem.models import MemoryItem
from graphmem.redact import redact_items

if TYPE_CHECKING:
    from graphmem.identity import Project

log = logging.getLogger("graphmem.facade.repair")

SPEC_KINDS = ("insight", "file", "pattern", "gotcha", "fact")  # spec files + session summaries
STRAY_TMP_AGE = 3600.0  # seconds: an older ``.*.tmp`` file is left by an interrupted write


def project_of(settings: Any, root: str | Path) -> "Project":
    """The project (``identity``) checked out at ``root``: journal entries and the registry
    hold local roots, the index holds keys."""
    from graphmem.identity import resolve_project

    return resolve_project(None, root, project_id=getattr(settings, "project_id", None))


def spec_key(project: "Project", spec: str | None) -> str | None:
    """How the index names a spec folder: relative to its project's root."""
    return project.rel(Path(spec).resolve()) if spec is not None else None


def spec_items(project: "Project", spec: str) -> list[MemoryItem]:
    """The items of a spec's memory files (insights, map, bullets) and its sessions' summaries
    (turns and steps have their own catch-up); none when the spec is gone."""
    from graphmem.files import SpecStore
    from graphmem.files.episode_items import summary_item
    from graphmem.files.episodes import EpisodeStore

    if not Path(spec).is_dir():
        return []
    items = list(SpecStore(Path(spec), project).items())
    if (Path(spec) / "memory" / "episodes").is_dir():
        store = EpisodeStore(Path(spec))
        for sid in store.session_ids():
            meta = store.read_session(sid)
            if meta and meta.get("summary"):
                items.append(summary_item(project.key, project.rel(store.spec_dir), meta,
                                          project.rel(store.session_file(sid))))
    return items


async def reconcile(index: Any, project: str, items: Iterable[MemoryItem], *, spec: str | None = None,
                    kinds: tuple[str, ...] | None = None, upto: int | None = None) -> dict[str, int]:
    """Make the index rows of ``project`` (one ``spec``, some ``kinds``) match ``items``.

    ``upto``: the index generation read before the files were, so that rows a concurrent writer
    added afterwards are kept.
    """
    want: dict[str, MemoryItem] = {}
    for item in redact_items(items) if getattr(index, "redact", True) else items:
        want[item.id] = item  # redacted as the index stores them, so the hashes compare
    have = index.hashes(project, spec=spec, kinds=kinds)
    # A collapsed retry item's count and times change while its text does not: always rewritten
    # (a few rows per spec, their vectors kept by content hash).
    todo = [i for i in want.values() if have.get(i.id) != i.content_hash() or "count" in i.metadata]
    older = have if upto is None else index.hashes(project, spec=spec, kinds=kinds, upto=upto)
    gone = [i for i in older if i not in want]
    if gone:
        index.delete(project=project, ids=gone)
    if todo:
        await index.upsert(todo)
    return {"added": len(todo), "removed": len(gone)}


async def _replay_entry(local: Any, entry: Any) -> dict[str, int] | None:
    """Reconcile an entry's spec (or project) with its files; None when the files cannot be
    read (e.g. a link in place of the memory folder): nothing there to index."""
    async def generation(index):
        return index.generation()

    upto = await local.healing(generation)  # before the files are read: later rows are kept
    try:
        project = project_of(local.settings, entry.project)  # the entry holds the local root
        if entry.spec:
            items = spec_items(project, entry.spec)
        else:
            items = project_items(project)[0]
    except GraphmemError as exc:
        log.warning("index journal: %s not replayed, its files cannot be read: %s",
                    entry.spec or entry.project, exc)
        return None

    async def run(index):
        index.register_project(project.key, project.name, str(project.root))
        counts = await reconcile(index, project.key, items, spec=spec_key(project, entry.spec),
                                 kinds=SPEC_KINDS if entry.spec else None, upto=upto)
        if not entry.spec:
            index.mark_caught_up(project.key)
        return counts

    return await local.healing(run)


async def replay(local: Any) -> int:
    """Replay every journal entry no live process holds; returns how many went through."""
    from graphmem.index.journal import Journal

    journal = Journal(Path(local.settings.home))
    if not journal.names():
        return 0
    done = 0
    for entry in journal.claim():
        try:
            counts = await _replay_entry(local, entry)
        except GraphmemError as exc:  # the index is still failing: the entry waits
            entry.release()
            log.warning("index journal not replayed yet (%s)", exc)
            break
        except BaseException:
            entry.release()
            raise
        entry.finish()
        done += 1
        if counts and (counts["added"] or counts["removed"]):
            log.info("index journal: %s%s: %d row(s) written, %d dropped", entry.project,
                     f" ({entry.spec})" if entry.spec else "", counts["added"], counts["removed"])
    return done


def catch_up(local: Any, project: "Project") -> None:
    """Journal a project this database has not indexed whole yet (a new home, a database
    rebuilt after damage, a home older than the journal), so that the next replay indexes
    everything its files hold."""
    from graphmem.index.journal import Journal

    if project.root.is_dir() and not local.index.caught_up(project.key):
        Journal(Path(local.settings.home)).add_project(str(project.root))


# ---- drift and fixes (``graphmem doctor``) ----------------------------------------------------
def file_items(project: "Project", spec: str | None) -> list[MemoryItem]:
    """Every searchable item the files of a spec (or, with None, of the project) hold."""
    if spec is None:
        return project_items(project)[0]
    return walk.spec_items(project, Path(spec)) if Path(spec).is_dir() else []


def index_drift(index: Any, project: "Project", spec: str | None) -> dict[str, Any]:
    """Files vs index for a spec (or project): counts and the ids missing or extra."""
    files = {i.id for i in file_items(project, spec)}
    rows = set(index.hashes(project.key, spec=spec_key(project, spec)))
    return {"files": len(files), "index": len(rows), "missing": sorted(files - rows),
            "extra": sorted(rows - files)}


async def fix_index(local: Any, project: "Project", spec: str | None) -> dict[str, int]:
    """Replay the journal, then make the index rows of a spec (or project) match its files."""
    replayed = await replay(local)

    async def run(index):
        upto = index.generation()
        items = file_items(project, spec)
        index.register_project(project.key, project.name, str(project.root))
        return await reconcile(index, project.key, items, spec=spec_key(project, spec), upto=upto)

    async def mark(index):
        counts = await run(index)
        if spec is None:
            index.mark_caught_up(project.key)
        return counts

    counts = await local.healing(mark)
    return dict(counts, replayed=replayed)


async def fix_graph(mem: Any) -> dict[str, Any]:
    """Replay the spec's outbox, then write what the graph lacks and drop what no file holds."""
    if mem.settings.graph.mode == "off":
        return {"graph": "off"}
    try:
        synced = await mem.sync()
        drift = await mem.drift()
        if drift["graph"] != "on":
            return {"graph": drift["graph"]}
        graph = await mem.derived.graph_store()
        missing = set(drift["missing"])
        if missing:
            from graphmem.facade.team import stamp  # written from this machine: its author and host

            await graph.save(stamp([i for i in await mem.items() if i.id in missing], mem.settings,
                                   mem.project_dir), extract=False)
        if drift["extra"]:  # this home's own (drift counts no teammate's item as extra)
            from graphmem.facade.team import shared_owner

            await graph.delete_items(mem.project.key, drift["extra"],
                                     owner=shared_owner(mem.settings))
    except GraphmemError as exc:
        return {"graph": f"failed: {exc}"}
    return {"graph": "written", "replayed": synced.get("replayed", 0), "added": len(missing),
            "removed": len(drift["extra"])}


def remove_stray_temps(memory_dir: Path, age: float = STRAY_TMP_AGE) -> list[Path]:
    """Delete ``.*.tmp`` files older than ``age`` seconds (left by interrupted atomic writes)."""
    removed = []
    now = time.time()
    for path in sorted(Path(memory_dir).rglob(".*.tmp")) if Path(memory_dir).is_dir() else []:
        try:
            st = os.lstat(path)
            if now - st.st_mtime >= age:
                path.unlink()
                removed.append(path)
        except OSError:
            pass
    return removed
