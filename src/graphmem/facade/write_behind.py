"""Write-behind: the derived steps of an acknowledged spec write, run after the write returns.

A deferred write (``DerivedSync.deferred``: ``graphmem.compat``, or ``index.write_behind``)
returns once its file is durable and its index-journal entry is made (``index/journal.py``).
What follows (the items counted over every session, anchors, the local index, the graph or its
outbox, the validity flags) runs here, in batches in the order the writes came: on a background
thread with its own event loop while the graph is off, else on the event loop that wrote (the
graph's connections belong to it). Every read that depends on them settles first
(``EpisodeLog.settle``), so a process always reads its own writes. A process that dies with
jobs queued loses no write: each job's journal entry stays on disk (its lock goes with the
process), and the next open, search or write of any process replays it from the files
(``repair.replay``). What a replay does not redo is a validity flag the lost job would have
logged ("possibly superseded"); the notes are all there. The process's exit waits for the queue
(``EXIT_WAIT``), as it waited for the index inside each write before.
"""

from __future__ import annotations

import asyncio
import atexit
import contextvars
import itertools
import logging
import os
import threading
import weakref
from collections import deque
from typing import Any, Callable, Protocol

log = logging.getLogger("graphmem.facade.write_behind")

class Job(Protocol):
    """One deferred write's derived steps; consecutive jobs of one ``key`` run as one batch
    (``run_many``: one index transaction and one embedding pass for all their items)."""

    key: Any
    entry: Any

    async def run_many(self, jobs: list[Any]) -> None: ...


BATCH = 64  # jobs per batch at most
_inside = contextvars.ContextVar("graphmem_write_behind_job", default=False)


async def _run_batch(jobs: list[Job]) -> None:
    """Run ``jobs`` in order, consecutive jobs of one key together."""
    start = 0
    while start < len(jobs):
        end = start + 1
        while end < len(jobs) and jobs[end].key is jobs[start].key:
            end += 1
        try:
            await jobs[start].run_many(jobs[start:end])
        except Exception as exc:  # the files are durable; the entries replay the rest
            log.warning("derived stores not updated after %d write(s) (%s); they are replayed "
                        "from the files by the next graphmem process or search", end - start, exc)
        start = end


class _ThreadWorker:
    """The jobs of this process while the graph is off: one daemon thread, its own loop."""

    def __init__(self) -> None:
        self.pid = os.getpid()
        self._cv = threading.Condition()
        self.jobs: deque[Job] = deque()
        self._thread: threading.Thread | None = None

    def put(self, job: Job) -> None:
        with self._cv:
            self.jobs.append(job)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="graphmem-write-behind",
                                                daemon=True)
                self._thread.start()
            self._cv.notify_all()

    def _run(self) -> None:
        from graphmem.index.episode_index.writer import _Inline

        # Not niced (unlike the episode writer): a busy machine would starve it, and the
        # process's exit waits for it (``_flush_at_exit``).
        _inside.set(True)  # the tasks below copy this thread's context
        loop = asyncio.new_event_loop()
        loop.set_default_executor(_Inline())  # runs at interpreter exit too, after the pools stop
        while True:
            with self._cv:
                while not self.jobs:
                    self._cv.wait()
                batch = list(itertools.islice(self.jobs, BATCH))
            try:
                loop.run_until_complete(_run_batch(batch))
            finally:
                with self._cv:
                    for _ in batch:
                        self.jobs.popleft()
                for job in batch:
                    _ended(job.entry)


class _LoopWorker:
    """The jobs of one event loop, run in batches by one task (the graph is on)."""

    def __init__(self) -> None:
        self.jobs: deque[Job] = deque()
        self.task: asyncio.Task | None = None
        self.idle = asyncio.Event()
        self.idle.set()

    def put(self, job: Job) -> None:
        self.jobs.append(job)
        self.idle.clear()
        if self.task is None or self.task.done():
            self.task = asyncio.get_running_loop().create_task(self._run(),
                                                               name="graphmem-write-behind")

    async def _run(self) -> None:
        _inside.set(True)  # this task's context: a settle from inside a job never waits for it
        try:
            await asyncio.sleep(START_DELAY)  # the write's caller has its answer before any job runs
            while self.jobs:
                batch = list(itertools.islice(self.jobs, BATCH))
                try:
                    await _run_batch(batch)
                finally:
                    for job in batch:
                        self.jobs.popleft()
                        _ended(job.entry)
        finally:  # cancelled (the loop is closing): what is left stays in the journal
            while self.jobs:
                _ended(self.jobs.popleft().entry)
            self.idle.set()


def _ended(entry: Any) -> None:
    if entry is not None:
        entry.release()  # finished by the job when the index took the write; else kept
    _PENDING.done()


class _Pending:
    """Jobs queued in this process and not run yet, on every loop (a settle from another loop
    waits for these on a thread)."""

    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        """Nothing pending (a new process)."""
        self._cv = threading.Condition()
        self.count = 0

    def add(self) -> None:
        with self._cv:
            self.count += 1

    def done(self) -> None:
        with self._cv:
            self.count -= 1
            self._cv.notify_all()

    def wait(self, timeout: float | None) -> bool:
        with self._cv:
            return self._cv.wait_for(lambda: self.count <= 0, timeout)


_PENDING = _Pending()
_workers: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _LoopWorker]" = \
    weakref.WeakKeyDictionary()
_threads: dict[int, _ThreadWorker] = {}
_guard = threading.Lock()
START_DELAY = 0.002  # seconds: past the callbacks that hand a caller on another thread its answer
EXIT_WAIT = 60.0  # seconds the interpreter's exit (and a settle) waits for queued jobs


def defer(job: Job, *, on_loop: bool = False) -> None:
    """Queue ``job`` (the rest of a write, after its file): on the background thread, or with
    ``on_loop`` on the running loop; its ``entry`` (the write's journal entry) is released once
    it ends: finished when the index has the write, else kept for the replay."""
    _PENDING.add()
    if on_loop:
        loop = asyncio.get_running_loop()
        worker = _workers.get(loop)
        if worker is None:
            worker = _workers[loop] = _LoopWorker()
        worker.put(job)
        return
    pid = os.getpid()
    with _guard:  # a forked child gets its own thread
        thread = _threads.get(pid)
        if thread is None:
            thread = _threads[pid] = _ThreadWorker()
    thread.put(job)


def pending() -> int:
    """Jobs queued in this process and not run yet."""
    return _PENDING.count


async def settle() -> None:
    """Wait until every job queued so far in this process has run (none from inside a job)."""
    if _PENDING.count <= 0 or _inside.get():
        return
    worker = _workers.get(asyncio.get_running_loop())
    if worker is not None and not worker.idle.is_set():
        await worker.idle.wait()
    if _PENDING.count > 0:  # the background thread's jobs (or another loop's)
        try:
            done = await asyncio.to_thread(_PENDING.wait, EXIT_WAIT)
        except RuntimeError:  # interpreter exit: no thread pool left; the jobs run on their own
            done = _PENDING.wait(EXIT_WAIT)
        if not done:
            log.warning("reading before every queued index write of this process landed")


# ---- one journal entry for a burst of writes to one spec ---------------------------------------
LINGER = 2.0  # seconds an entry whose writes are all indexed waits for the next write to share it


class _Shared:
    """One durable journal entry held by this process for one spec, shared by the deferred
    writes that come while it is held (a burst of writes makes one entry, not one each):
    deleted once every write it covers is indexed and no write came for ``LINGER`` seconds;
    kept on disk for the replay when one of them was not indexed, or when the process dies."""

    def __init__(self, key: tuple[str, str, str], entry: Any):
        self.key, self.entry = key, entry
        self.jobs = 0
        self.dirty = False
        self.timer: threading.Timer | None = None

    def end(self, indexed: bool) -> None:
        with _guard:
            self.jobs -= 1
            self.dirty |= not indexed
            if self.jobs > 0:
                return
            if self.dirty:
                _drop(self)
                self.entry.release()  # a write not indexed: the next process replays the spec
                return
            self.timer = threading.Timer(LINGER, self.close_if_idle)
            self.timer.daemon = True
            self.timer.start()

    def close_if_idle(self) -> None:
        with _guard:
            if self.jobs:
                return  # a write took it meanwhile
            _drop(self)
            self.entry.finish()


class _Share:
    """One write's part of a ``_Shared`` entry, with a journal ``Entry``'s calls: ``finish``
    when the index has the write, ``release`` when the write's steps end."""

    def __init__(self, shared: _Shared, indexed: bool = False):
        self.shared = shared
        self.indexed = indexed
        self.ended = False

    @property
    def project(self) -> str:
        return self.shared.entry.project

    @property
    def spec(self) -> str | None:
        return self.shared.entry.spec

    def finish(self) -> None:
        self.indexed = True
        self.release()

    def release(self) -> None:
        if not self.ended:
            self.ended = True
            self.shared.end(self.indexed)

    def hand_over(self) -> "_Share":
        """This write's part for the background job; this object lets go without ending it."""
        if self.ended:
            raise ValueError("journal entry already released")
        self.ended = True
        return _Share(self.shared, self.indexed)


_entries: dict[tuple[str, str, str], _Shared] = {}


def _drop(shared: _Shared) -> None:
    if _entries.get(shared.key) is shared:
        del _entries[shared.key]
    if shared.timer is not None:
        shared.timer.cancel()


def shared_entry(home: str, project: str, spec: str, begin: Callable[[], Any]) -> Any:
    """The journal entry (in ``home``'s journal) a deferred write of ``spec`` holds: this
    process's entry for it when one is held, else ``begin()``'s (None when the journal cannot
    be written)."""
    key = (home, project, spec)
    with _guard:
        shared = _entries.get(key)
        if shared is not None:
            shared.jobs += 1
            if shared.timer is not None:
                shared.timer.cancel()
                shared.timer = None
            return _Share(shared)
    entry = begin()  # outside the lock: it writes and syncs a file
    if entry is None:
        return None
    with _guard:
        shared = _Shared(key, entry)
        shared.jobs = 1
        _entries.setdefault(key, shared)  # another thread's entry for the spec may be there now
        return _Share(shared)


def _finish_lingering() -> None:
    with _guard:
        idle = [s for s in _entries.values() if not s.jobs]
        for shared in idle:
            _drop(shared)
    for shared in idle:
        shared.entry.finish()


def _forget_in_child() -> None:
    """A forked child holds none of its parent's entries (their locks stay the parent's) and
    waits for none of its parent's jobs (they run in the parent)."""
    global _guard
    _guard = threading.Lock()  # another thread may have held it at the fork
    for shared in list(_entries.values()):
        shared.entry.release()
    _entries.clear()
    _PENDING.reset()


os.register_at_fork(after_in_child=_forget_in_child)


@atexit.register
def _flush_at_exit() -> None:
    if _PENDING.count > 0 and not _PENDING.wait(EXIT_WAIT):
        log.warning("exiting with index writes still queued; their journal entries replay them")
    _finish_lingering()
