"""The write side of episodic sessions: per-session group commit and the per-spec state.

``_EpisodeState`` holds one spec's session files, the episodes index and the way to the
background writer (``index/episode_writer.py``); ``_Batcher`` group-commits concurrent async
records of one session; ``EpisodeLog`` is what one ``Memory`` holds: its spec's state, opened on
first use, and ``settle`` before a read (see ``episodic.py`` for the whole write path).
"""

from __future__ import annotations

import asyncio
import logging
import os
import random
import weakref
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from graphmem.graph.presence import in_use as graph_in_use
from ..errors import StorageError, ValidationError
from ..files.episode_items import step_item, turn_item
from ..files.episodes import STEPS, TURNS, Appended, EpisodeStore
from ..models import MemoryItem

from graphmem.facade.derived import Collaborator

if TYPE_CHECKING:
    from graphmem.facade.derived import DerivedRef
    from ..identity import Project
    from ..settings import Settings

log = logging.getLogger("graphmem.sessions")


# ---- group commit ---------------------------------------------------------------------------
class _Batcher:
    """Per-session group commit inside one process (see the module docstring)."""

    def __init__(self, state: "_EpisodeState"):
        self.state = state
        self.pending: dict[str, list[tuple[str, dict, asyncio.Future]]] = {}
        self.busy: set[str] = set()

    async def submit(self, sid: str, kind: str, record: dict) -> dict:
        fut = asyncio.get_running_loop().create_future()
        self.pending.setdefault(sid, []).append((kind, record, fut))
        if sid in self.busy:
            return await fut
        self.busy.add(sid)
        cancelled = False
        try:
            try:
                await asyncio.sleep(0)  # let calls started together join this write
            except asyncio.CancelledError:
                cancelled = True
            while self.pending.get(sid):
                cancelled |= await self._drain(sid, self.pending.pop(sid))
        finally:
            self.busy.discard(sid)
            for _, _, f in self.pending.pop(sid, []):  # only after an abnormal exit
                if not f.done():
                    f.set_exception(StorageError(f"session {sid}: the write was interrupted"))
        if cancelled:
            raise asyncio.CancelledError
        return await fut

    async def _drain(self, sid: str, batch: list[tuple[str, dict, asyncio.Future]]) -> bool:
        """Write one batch; resolve its callers. Returns True when the leader was cancelled."""
        try:
            done = self.state.commit(sid, [r for k, r, _ in batch if k == "turn"],
                                       [r for k, r, _ in batch if k == "step"])
        except BaseException as exc:  # every caller of the batch learns why; none waits forever
            for _, _, f in batch:
                if not f.done():
                    f.set_exception(exc)
            if not isinstance(exc, Exception):
                raise
            return False
        turns, steps = iter(done.turns), iter(done.steps)
        results = [next(turns) if k == "turn" else next(steps) for k, _, _ in batch]
        cancelled = False
        if graph_in_use(self.state.settings):
            try:
                await self.state.to_graph(sid, done)
            except asyncio.CancelledError:
                cancelled = True  # the records are durable; `graphmem reindex` rebuilds the graph
            except Exception as exc:  # derived stores never fail a durable write
                log.warning("session %s: graph not updated: %s", sid, exc)
        for (_, _, f), rec in zip(batch, results):
            if not f.done():
                f.set_result(rec)
        return cancelled


class _EpisodeState:
    """Per ``AsyncMemory`` and spec: the files, the index, the writer and one batcher per loop."""

    def __init__(self, settings: "Settings", project: "Project", spec_dir: Path,
                 derived: "DerivedRef", clean: Callable[[Any], Any]):
        from ..index.episode_index.tables import open_episode_index

        self.settings = settings
        self._project = project
        self._derived = derived
        self._redact = clean
        self.store = EpisodeStore(spec_dir, fsync=settings.episodes.fsync)
        self.index = open_episode_index(settings.home, settings.index.busy_timeout)
        self.spec = str(self.store.spec_dir)
        self.project = str(project.root)
        self._batchers: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Batcher]" = \
            weakref.WeakKeyDictionary()
        self.reconcile()

    @property
    def writer(self):
        """This process's background writer (looked up each time: a forked child has its own)."""
        from ..index.episode_index.writer import writer

        return writer()

    @property
    def batcher(self) -> _Batcher:
        """The running loop's batcher (futures must never cross event loops)."""
        loop = asyncio.get_running_loop()
        b = self._batchers.get(loop)
        if b is None:
            b = self._batchers[loop] = _Batcher(self)
        return b

    def commit(self, sid: str, turns: list[dict], steps: list[dict]) -> Appended:
        """Append durably and queue the derived rows (the whole ack path of a record)."""
        done = self.store.append(sid, turns, steps, then=lambda done: self.queue(sid, done),
                                 check=_refuse_ended)
        from graphmem.code import record_anchors

        record_anchors(self._project.root, self.store.spec_dir,
                       self.items(sid, done.turns, done.steps))
        return done

    async def to_graph(self, sid: str, done: Appended) -> None:
        """Write freshly appended records to the graph (or its outbox) before the callers return."""
        items = self.items(sid, done.turns, done.steps)
        _, note = await self._derived.get().write_graph(self.store.spec_dir / "memory",
                                                        self._project.root, items)
        if note:
            log.info("session %s: %s", sid, note)

    def queue(self, sid: str, done: Appended) -> None:
        """Hand freshly appended records to the background writer (called under the lock)."""
        from ..index.episode_index.writer import Job

        self.writer.put(Job(self.spec, sid, done.turns, done.steps,
                            (done.turns_size, done.steps_size), self._derived.get().local,
                            lambda: self.items(sid, done.turns, done.steps), fallback=self.index))

    def items(self, sid: str, turns: list[dict], steps: list[dict]) -> list[MemoryItem]:
        """Turns and steps as searchable items."""
        proj = self._project  # items carry the project key and root-relative paths
        key, spec, folder = proj.key, proj.rel(self.store.spec_dir), self.store.session_dir(sid)
        turns_src, steps_src = proj.rel(folder / TURNS), proj.rel(folder / STEPS)
        return ([turn_item(key, spec, sid, t, turns_src) for t in turns]
                + [step_item(key, spec, sid, s, steps_src) for s in steps])

    def _clean(self, records: Any) -> Any:
        """Records re-read from the files, redacted for the index: the files may predate
        redaction or come from elsewhere (records graphmem wrote are unchanged by this)."""
        return self._redact(records) if records is not None else None

    def reconcile(self, force: bool = False) -> int:
        """Bring the indexes in line with the files; returns how many sessions were re-read.

        A session whose files grew behind the index (a process died with queued rows, another
        process wrote, a copied folder) is re-read into the episodes rows and the search index in
        one transaction; ``force`` rebuilds every session's episodes rows.
        """
        from ..index.episode_index.writer import Job

        self.writer.settle()
        known = self.index.states(self.spec)
        redone = 0
        ids = self.store.session_ids()
        for sid in ids:
            if force:
                self.resync(sid)
            elif known.get(sid) != self.store.sizes(sid):
                with self.store.lock(sid):
                    meta = self._clean(self.store.read_session(sid))
                    if meta is None:
                        continue
                    turns = self._clean(self.store.read_lines(sid, TURNS, locked=True))
                    steps = self._clean(self.store.read_lines(sid, STEPS, locked=True))
                    self.writer.put(Job(self.spec, sid, turns, steps, self.store.sizes(sid),
                                        self._derived.get().local,
                                        partial(self.items, sid, turns, steps),
                                        meta=meta, fallback=self.index))
            else:
                continue
            redone += 1
        for sid in set(known) - set(ids):
            self.index.delete_session(self.spec, sid)
        self.writer.settle()
        return redone

    def resync(self, sid: str) -> None:
        """Rebuild one session's episodes rows; under its lock, so the sizes match the lines read."""
        self.writer.settle()  # queued rows of this process first
        with self.store.lock(sid):
            meta = self._clean(self.store.read_session(sid))
            try:
                if meta is None:
                    self.index.delete_session(self.spec, sid)
                    return
                turns = self._clean(self.store.read_lines(sid, TURNS, locked=True))
                steps = self._clean(self.store.read_lines(sid, STEPS, locked=True))
                self.index.replace_session(self.spec, meta, turns, steps, self.store.sizes(sid))
            except StorageError as exc:  # the files have it; the next reconcile re-reads them
                log.warning("session %s: episodes index not updated: %s", sid, exc)


@dataclass(eq=False)
class EpisodeLog(Collaborator):
    """One ``Memory``'s sessions plumbing: its spec's ``_EpisodeState`` (opened on first use;
    a project-only scope has none) and ``settle`` before every read of the indexes."""

    clean: Callable[[Any], Any]
    _state: _EpisodeState | None = field(default=None, init=False)
    _caught_up: bool = field(default=False, init=False)

    def _open(self, spec_dir: Path) -> _EpisodeState:
        return _EpisodeState(self.settings, self.scope.project, spec_dir, self.derived_ref,
                             self.clean)

    @property
    def state(self) -> _EpisodeState:
        """This spec's session files, episodes index and writer."""
        if self._state is None:
            self._state = self._open(self.scope.require_spec("sessions"))
        return self._state

    async def settle(self) -> None:
        """Before a read of the indexes: catch up on the files once, then wait for queued rows
        (and for the derived steps of this process's deferred spec writes, ``write_behind``)."""
        from graphmem.facade import write_behind
        from graphmem.index.episode_index import writer as episode_writer

        await write_behind.settle()

        if not self._caught_up:
            self._caught_up = True
            self._catch_up()
        w = episode_writer.writer()
        if w.pending:
            await asyncio.to_thread(w.settle)

    def _catch_up(self) -> None:
        """Reconcile this spec's sessions (or, project-wide, every spec the index knows)."""
        if self._state is not None:
            return
        if not self.scope.project_wide:
            if (self.scope.spec_dir / "memory" / "episodes").is_dir():
                self.state  # noqa: B018 - opening the state reconciles it with the files
            return
        from ..index.episode_index.tables import open_episode_index

        try:
            specs = open_episode_index(self.settings.home).specs(str(self.scope.root))
        except StorageError as exc:
            log.warning("sessions not caught up before searching: %s", exc)
            return
        for spec in specs:
            if Path(spec).is_dir():
                self._open(Path(spec))


MAX_TURNS_PER_CALL = 10_000
_TURN_KEYS = {"role", "content", "model", "tokens", "metadata", "at"}
_rng = random.Random(os.urandom(16))  # ids without a getrandom(2) call per record
os.register_at_fork(after_in_child=lambda: _rng.seed(os.urandom(16)))


def _new_id() -> str:
    """16 random hex digits, like ``uuid4().hex[:16]``."""
    return f"{_rng.getrandbits(64):016x}"


def _refuse_ended(meta: dict) -> None:
    if meta.get("ended_at"):
        raise ValidationError(f"session {meta.get('session_id')} has ended; start a new one",
                              field="session_id")
