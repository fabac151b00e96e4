"""The background writer of derived episode rows: the episodes index and the search index.

``record_turn`` only appends to the session's file (the truth) and queues the new records here; a
daemon thread applies the queue in batches, each batch in ONE SQLite transaction holding the
episodes rows, the search rows and their vectors. Every read that depends on these rows calls
``settle()`` first, which waits until everything queued before it is applied, so a process always
reads its own writes. A process that dies with a queue loses only derived rows: each session row
remembers the file sizes it was built from, and the next open re-reads the sessions whose files
grew (``facade.episode_log._EpisodeState.reconcile``), in the same kind of transaction.
"""

from __future__ import annotations

import asyncio
import atexit
import logging
import os
import sys
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Callable

from .tables import EpisodeIndex

log = logging.getLogger("graphmem.index.episodes")

BATCH = 256  # records per transaction at most
LINGER = 0.02  # seconds a small batch waits for more records (fewer transactions, fewer wakeups)
NICE = 10  # the writer thread's niceness: derived work yields the CPU to the write path
EXIT_WAIT = 60.0  # seconds the interpreter's exit waits for the queue (the rest is caught up later)


@dataclass
class Job:
    """Rows to apply for one session: appended records, or (with ``meta``) all its files hold."""

    spec: str
    sid: str
    turns: list[dict]
    steps: list[dict]
    sizes: tuple  # (turns size, steps size) for an append; (+ metadata mtime) for a catch-up
    local: Any  # the LocalBackend of the Memory that wrote (its embedder, its home)
    items: Callable[[], list]  # the records as searchable MemoryItems, built in the worker
    meta: dict | None = None  # the session's metadata, for a catch-up
    fallback: EpisodeIndex | None = None  # writes the episodes rows alone if the search side fails
    size: int = field(init=False)

    def __post_init__(self) -> None:
        self.size = max(1, len(self.turns) + len(self.steps))

    def rows(self, conn: Any, sizes: bool = True) -> None:
        """The episodes rows of this job, inside the caller's transaction (``sizes`` False: leave
        the session's recorded file sizes as they were, so a later reconcile redoes it)."""
        if self.meta is not None and sizes:
            EpisodeIndex.catch_up_rows(conn, self.spec, self.meta, self.turns, self.steps, self.sizes)
        else:
            EpisodeIndex.add_rows(conn, self.spec, self.sid, self.turns, self.steps,
                                  self.sizes[:2] if sizes else (0, 0))


class EpisodeWriter:
    """One queue and one daemon thread per process (see the module docstring)."""

    def __init__(self) -> None:
        self.pid = os.getpid()
        self._cv = threading.Condition()
        self._jobs: list[Job] = []
        self._queued = 0  # records ever queued; ``_applied`` catches up with it
        self._applied = 0
        self._urgent = 0  # readers waiting: apply at once, no lingering
        self._thread: threading.Thread | None = None

    def put(self, job: Job) -> None:
        """Queue a job; returns at once."""
        with self._cv:
            self._jobs.append(job)
            self._queued += job.size
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="graphmem-episodes",
                                                daemon=True)
                self._thread.start()
            elif len(self._jobs) == 1 or self._queued - self._applied >= BATCH:
                self._cv.notify_all()

    @property
    def pending(self) -> int:
        """Records queued and not applied yet."""
        return self._queued - self._applied

    def settle(self, timeout: float | None = None) -> bool:
        """Wait until everything queued so far is applied; False if ``timeout`` ran out first."""
        if self._applied == self._queued:  # the common case: nothing pending, no lock taken
            return True
        if threading.current_thread() is self._thread:
            return False  # never wait for ourselves
        with self._cv:
            target = self._queued
            self._urgent += 1
            self._cv.notify_all()
            try:
                return self._cv.wait_for(lambda: self._applied >= target, timeout)
            finally:
                self._urgent -= 1

    def _take(self) -> list[Job]:
        with self._cv:
            while not self._jobs:
                self._cv.wait()
            if not self._urgent and self._queued - self._applied < BATCH:
                self._cv.wait_for(lambda: self._urgent or self._queued - self._applied >= BATCH,
                                  LINGER)
            batch: list[Job]
            batch, n = [], 0
            while self._jobs and (n < BATCH or not batch):
                job = self._jobs.pop(0)
                batch.append(job)
                n += job.size
            return batch

    def _run(self) -> None:
        _background_priority()
        loop = asyncio.new_event_loop()  # cloud embedders keep one HTTP client per loop
        loop.set_default_executor(_Inline())
        while True:
            batch = self._take()
            try:
                loop.run_until_complete(_apply(batch))
            except BaseException as exc:  # keep serving: the files hold the records
                log.warning("episode index rows not written (%s); they are rebuilt from the files "
                            "when the session is next opened", exc)
            with self._cv:
                self._applied += sum(j.size for j in batch)
                self._cv.notify_all()


class _Inline(ThreadPoolExecutor):
    """The writer loop's executor: ``asyncio.to_thread`` calls run in the writer's own thread.

    The writer awaits each call before the next, so a worker thread would only add a hand-off;
    and at interpreter exit, when the writer flushes its queue, thread pools refuse new work.
    """

    def __init__(self) -> None:
        super().__init__(max_workers=1)

    def submit(self, fn, /, *args, **kwargs) -> Future:
        future: Future = Future()
        try:
            future.set_result(fn(*args, **kwargs))
        except BaseException as exc:
            future.set_exception(exc)
        return future


def _background_priority() -> None:
    """Lower this thread's CPU priority (Linux: per thread, inherited by the threads it starts,
    such as a model's pool when it loads here), so that recording never queues behind indexing."""
    if sys.platform.startswith("linux"):
        try:
            os.setpriority(os.PRIO_PROCESS, threading.get_native_id(), NICE)
        except (AttributeError, OSError):
            pass


async def _apply(batch: list[Job]) -> None:
    """Apply jobs in order: consecutive jobs of one backend share one transaction."""
    start = 0
    while start < len(batch):
        end = start
        while end < len(batch) and batch[end].local is batch[start].local:
            end += 1
        await _apply_group(batch[start:end])
        start = end


async def _apply_group(jobs: list[Job]) -> None:
    items = [it for j in jobs for it in j.items()]

    def rows(conn: Any) -> None:
        for j in jobs:
            j.rows(conn)

    try:
        await jobs[0].local.index.upsert(items, also=rows)
        return
    except Exception as exc:  # embedder mismatch or failure, database trouble: keep the episodes rows
        log.warning("search index not updated for %d session records (%s); run `graphmem "
                    "reindex`", len(items), exc)
    for j in jobs:  # the rows, but not the file sizes: the next open sees the gap and re-indexes
        if j.fallback is not None:
            with j.fallback.transaction() as conn:
                j.rows(conn, sizes=False)


_writers: dict[int, EpisodeWriter] = {}
_guard = threading.Lock()


def writer() -> EpisodeWriter:
    """This process's writer (a forked child gets its own; never keep one across a fork)."""
    pid = os.getpid()
    w = _writers.get(pid)
    if w is None:
        with _guard:
            w = _writers.get(pid)
            if w is None:
                w = _writers[pid] = EpisodeWriter()
    return w


def settle(timeout: float | None = None) -> bool:
    """Wait for this process's queued episode rows (a no-op when nothing is queued)."""
    w = _writers.get(os.getpid())
    return True if w is None else w.settle(timeout)


def _flush_at_exit() -> None:
    if not settle(EXIT_WAIT):
        log.warning("exiting with episode index rows still queued; the next open rebuilds them "
                    "from the session files")


# At exit (``atexit``: after the thread pools stopped taking work), the writer still applies the
# queue: its loop runs worker-thread calls inline (``_Inline``) and the local models run their
# texts one after another (``providers.onnx_runtime.run_each``).
atexit.register(_flush_at_exit)
