"""Episodic sessions on the façade: sessions, conversation turns, execution steps, summaries.

Write path (what ``record_turn`` waits for): validate -> redact -> one append of whole JSON Lines
to the session's file, fdatasync'ed under the session lock -> return. The derived rows (the
episodes index, the search index and its vectors) are queued to a background writer
(``index/episode_writer.py``) that applies them in batches, one SQLite transaction per batch;
every read that depends on them waits for the queue first, so a process reads its own writes, and
a process that died with a queue is caught up from the files on the next open. With the graph on,
the graph write (or its outbox entry) still happens before ``record_turn`` returns.

Concurrent async calls on one session are group-committed: every turn or step submitted while a
write is being prepared joins it, so they share one ``fdatasync``; each caller still returns only
once its own record is durable (``episode_log.py``). The sync ``Memory`` records without a trip
through the event loop when the graph is off (``record_turn_now``).
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Iterator, Mapping

from graphmem.graph.presence import in_use as graph_in_use
from ..errors import StorageError, ValidationError
from ..files.episode_items import step_item, summary_item, turn_item
from ..files.episodes import STEPS, TURNS, EpisodeStore, check_session_id, iso
from ..models import _SURROGATE, MemoryItem, SaveReport, to_time, utcnow
from graphmem.rules.turn_input import (StartInput, StepInput, TurnInput, check_limit, json_value, text_ok,
                              validate)
from .episode_log import MAX_TURNS_PER_CALL, _TURN_KEYS, EpisodeLog, _new_id

from graphmem.facade.derived import Collaborator

if TYPE_CHECKING:
    from .derived_sync import DerivedSync
    from .write_rules import WriteRules

log = logging.getLogger("graphmem.sessions")


@dataclass(eq=False)
class Episodes(Collaborator):
    """Session operations of ``AsyncMemory`` over one ``Scope``."""

    rules: WriteRules
    episodes: EpisodeLog
    sync: DerivedSync

    # ---- plumbing -----------------------------------------------------------------------
    def _turn_record(self, session_id: Any, role: Any, content: Any, model: Any, tokens: Any,
                     metadata: Any, at: Any) -> tuple[str, dict]:
        """Validate and redact one turn -> (session id, record to append)."""
        sid = check_session_id(session_id)
        if metadata is not None:
            json_value(metadata, "metadata")  # before pydantic or a size check walks it
        args = validate(TurnInput, {"role": role, "content": content, "model": model,
                                     "tokens": tokens, "metadata": metadata})
        self.rules.check_size(args.content, "content")
        clean = self.rules.clean
        rec = {"id": f"trn-{_new_id()}", "at": iso(to_time(at)), "role": clean(args.role),
               "content": clean(args.content), "model": clean(args.model),
               "tokens": args.tokens}
        if args.metadata:
            self.rules.check_json_size(json_value(args.metadata, "metadata"), "metadata")
            rec["metadata"] = clean(args.metadata)
        return sid, rec

    def _step_record(self, session_id: Any, name: Any, status: Any, payload: Any,
                     at: Any) -> tuple[str, dict]:
        """Validate and redact one step -> (session id, record to append)."""
        sid = check_session_id(session_id)
        args = validate(StepInput, {"name": name, "status": status})
        self.rules.check_json_size(json_value(payload, "payload"), "payload")
        clean = self.rules.clean
        rec = {"id": f"stp-{_new_id()}", "at": iso(to_time(at)),
               "name": clean(args.name), "status": clean(args.status),
               "payload": clean(payload)}
        return sid, rec

    def check_turn(self, role: str, content: str, model: str | None = None,
                   tokens: int | None = None, metadata: dict | None = None) -> None:
        """Refuse (ValidationError) a turn ``record_turn`` would refuse; writes nothing."""
        self._turn_record("ses-unstarted", role, content, model, tokens, metadata, None)

    # ---- sync fast path (``Memory``) ------------------------------------------------------
    def record_turn_now(self, session_id: str, role: str, content: str, model: str | None = None,
                        tokens: int | None = None, metadata: dict | None = None,
                        at: Any = None) -> str:
        """``Memory.record_turn``: with the graph off nothing here needs the event loop."""
        sid, rec = self._turn_record(session_id, role, content, model, tokens, metadata, at)
        return self._commit_now(sid, "turn", rec)

    def record_step_now(self, session_id: str, name: str, status: str, payload: Any = None,
                        at: Any = None) -> str:
        """``Memory.record_step`` (see ``record_turn_now``)."""
        sid, rec = self._step_record(session_id, name, status, payload, at)
        return self._commit_now(sid, "step", rec)

    def _commit_now(self, sid: str, kind: str, rec: dict) -> str:
        if graph_in_use(self.settings):
            from graphmem import _sync

            return _sync.run(self._submit(sid, kind, rec))
        done = self.episodes.state.commit(sid, [rec] if kind == "turn" else [],
                                      [rec] if kind == "step" else [])
        return (done.turns or done.steps)[0]["id"]

    async def _submit(self, sid: str, kind: str, rec: dict) -> str:
        """Group-commit one record (the batcher belongs to the running loop) -> its id."""
        return (await self.episodes.state.batcher.submit(sid, kind, rec))["id"]

    # ---- sessions -----------------------------------------------------------------------
    async def start_session(self, workspace: str | None = None, model: str | None = None,
                            mode: str | None = None, *, at: Any = None) -> str:
        """Start an episodic session and return its id (workspace defaults to the project folder)."""
        args = validate(StartInput, {"workspace": workspace, "model": model, "mode": mode})
        started = to_time(at)
        sid = f"ses-{uuid.uuid4().hex[:16]}"
        clean, root = self.rules.clean, self.scope.root
        meta = {"session_id": sid, "workspace": clean(args.workspace) or str(root),
                "project": str(root), "spec": str(self.scope.spec_dir),
                "model": clean(args.model), "mode": clean(args.mode),
                "started_at": iso(started), "ended_at": None, "status": "active",
                "total_tokens": 0, "summary": None}
        ep = self.episodes.state
        ep.store.create_session(meta)
        try:
            ep.index.put_session(ep.spec, meta, ep.store.sizes(sid))
        except StorageError as exc:
            log.warning("session %s: episodes index not updated: %s", sid, exc)
        return sid

    async def record_turn(self, session_id: str, role: str, content: str, model: str | None = None,
                          tokens: int | None = None, metadata: dict | None = None,
                          at: Any = None) -> str:
        """Append a conversation turn; returns its id once it is on disk."""
        sid, rec = self._turn_record(session_id, role, content, model, tokens, metadata, at)
        return await self._submit(sid, "turn", rec)

    async def record_turns(self, session_id: str, turns: list[dict]) -> list[str]:
        """Append many turns in one write and one fsync; every turn is checked first."""
        sid = check_session_id(session_id)
        if not isinstance(turns, list) or not 1 <= len(turns) <= MAX_TURNS_PER_CALL:
            raise ValidationError(f"must be a list of 1 to {MAX_TURNS_PER_CALL} turns",
                                  field="turns")
        recs = []
        for n, turn in enumerate(turns):
            if not isinstance(turn, Mapping):
                raise ValidationError(f"must be a mapping, got {type(turn).__name__}",
                                      field=f"turns[{n}]")
            extra = set(turn) - _TURN_KEYS
            if extra:
                raise ValidationError(f"unknown field {sorted(map(str, extra))[0]!r}",
                                      field=f"turns[{n}]")
            try:
                recs.append(self._turn_record(sid, turn.get("role"), turn.get("content"),
                                              turn.get("model"), turn.get("tokens"),
                                              turn.get("metadata"), turn.get("at"))[1])
            except ValidationError as exc:
                raise ValidationError(str(exc).removeprefix(f"{exc.field}: "),
                                      field=f"turns[{n}].{exc.field}") from None
        done = self.episodes.state.commit(sid, recs, [])
        if graph_in_use(self.settings):
            await self.episodes.state.to_graph(sid, done)
        return [t["id"] for t in done.turns]

    async def record_step(self, session_id: str, name: str, status: str, payload: Any = None,
                          at: Any = None) -> str:
        """Append an execution step (a tool call, a command, a check); returns its id."""
        sid, rec = self._step_record(session_id, name, status, payload, at)
        return await self._submit(sid, "step", rec)

    async def end_session(self, session_id: str, *, at: Any = None) -> dict:
        """Mark the session ended and store its token total (sum of its turns' tokens)."""
        sid = check_session_id(session_id)
        ended = to_time(at)
        ep = self.episodes.state

        def close(meta: dict) -> dict:
            if meta.get("ended_at"):
                return meta  # ending twice keeps the first end
            turns = ep.store.read_lines(sid, TURNS, locked=True)
            meta["total_tokens"] = sum(t["tokens"] for t in turns
                                       if isinstance(t.get("tokens"), int))
            meta["ended_at"], meta["status"] = iso(ended), "ended"
            return meta

        meta = ep.store.update_session(sid, close)
        ep.resync(sid)
        return await self.get_session(sid) or meta

    async def get_session(self, session_id: str) -> dict:
        """One session: ids, workspace, times, status, token total, summary, first prompt, counts."""
        sid = check_session_id(session_id)
        await self.episodes.settle()
        ep = self.episodes.state
        ep.store.require(sid)
        row = ep.index.session(ep.spec, sid)
        if row is None or ep.index.state(ep.spec, sid) != ep.store.sizes(sid):
            ep.resync(sid)
            row = ep.index.session(ep.spec, sid)
        return row or {}

    async def set_session_summary(self, session_id: str, summary: str) -> SaveReport:
        """Store a summary of the session (searchable; consolidation reads it)."""
        sid = check_session_id(session_id)
        if not isinstance(summary, str):
            raise ValidationError(f"must be a string, got {type(summary).__name__}", field="summary")
        try:
            text_ok(summary)
        except ValueError as exc:
            raise ValidationError(str(exc), field="summary") from None
        self.rules.check_size(summary, "summary")
        await self.sync.guard()
        clean, ep = self.rules.clean(summary.strip()), self.episodes.state

        def put(meta: dict) -> dict:
            meta["summary"], meta["summary_updated_at"] = clean, iso(utcnow())
            return meta

        with self.sync.journal() as entry:
            meta = ep.store.update_session(sid, put)
            ep.resync(sid)
            proj = self.scope.project
            item = summary_item(proj.key, proj.rel(ep.store.spec_dir), meta,
                                proj.rel(ep.store.session_file(sid)))
            return await self.sync.propagate([item], SaveReport(path=str(ep.store.session_file(sid))),
                                         entry)

    async def get_session_summary(self, session_id: str) -> str | None:
        """The session's stored summary, or None."""
        return self.episodes.state.store.require(check_session_id(session_id)).get("summary")

    async def get_session_history(self, session_id: str) -> list[dict]:
        """Every turn of the session in recorded order, read from its file."""
        sid = check_session_id(session_id)
        await self.episodes.settle()
        ep = self.episodes.state
        ep.store.require(sid)
        turns = ep.store.read_lines(sid, TURNS)
        if ep.index.state(ep.spec, sid) != ep.store.sizes(sid):
            ep.resync(sid)  # the file changed behind the index (e.g. a torn line was cut)
        return [dict(t, session_id=sid, metadata=t.get("metadata") or {}) for t in turns]

    async def get_session_steps(self, session_id: str) -> list[dict]:
        """Every execution step of the session in recorded order."""
        sid = check_session_id(session_id)
        store = self.episodes.state.store
        store.require(sid)
        return [dict(s, session_id=sid) for s in store.read_lines(sid, STEPS)]

    async def get_recent_turns(self, limit: int = 20, session_id: str | None = None) -> list[dict]:
        """The latest ``limit`` turns (of one session, or of this spec's sessions), oldest first."""
        limit = check_limit(limit)
        await self.episodes.settle()
        ep = self.episodes.state
        if session_id is None:
            return ep.index.recent_turns(ep.spec, limit)
        sid = check_session_id(session_id)
        ep.store.require(sid)
        return ep.index.turns(ep.spec, sid, limit)

    async def list_recent_sessions(self, workspace: str | None = None, limit: int = 20) -> list[dict]:
        """The latest sessions of a workspace (default: this project), each with its first prompt."""
        limit = check_limit(limit)
        if workspace is not None and (not isinstance(workspace, str) or not workspace.strip()
                                      or _SURROGATE.search(workspace)):
            raise ValidationError("must be a non-empty string of valid UTF-8", field="workspace")
        from ..index.episode_index.tables import open_episode_index

        await self.episodes.settle()  # this spec's (or project's) files caught up, queued rows applied
        return open_episode_index(self.settings.home).recent_sessions(  # stored redacted
            workspace=self.rules.clean(workspace) or str(self.scope.root), spec=None, limit=limit)

    async def delete_session(self, session_id: str) -> None:
        """Delete a session's files, its index rows and its searchable items."""
        sid = check_session_id(session_id)
        await self.episodes.settle()  # no queued row may bring the session back after it is gone
        ep = self.episodes.state
        ids = [i.id for i in self._session_items(sid)]
        ep.store.delete(sid)
        ep.index.delete_session(ep.spec, sid)
        if ids:
            await self._forget_items(ids)

    async def _forget_items(self, ids: list[str]) -> None:
        """Drop a deleted session's items from the local search index and the graph."""
        try:
            await self.derived.forget_items(self.scope.project.key, ids)
        except StorageError as exc:
            log.warning("deleted session's items may stay searchable until `graphmem reindex`: %s",
                        exc)

    def _session_items(self, sid: str) -> list[MemoryItem]:
        ep, proj = self.episodes.state, self.scope.project
        meta = ep.store.require(sid)
        key, spec, rel = proj.key, proj.rel(ep.store.spec_dir), proj.rel
        folder = ep.store.session_dir(sid)
        items = [turn_item(key, spec, sid, t, rel(folder / TURNS))
                 for t in ep.store.read_lines(sid, TURNS)]
        items += [step_item(key, spec, sid, s, rel(folder / STEPS))
                  for s in ep.store.read_lines(sid, STEPS)]
        if meta.get("summary"):
            items.append(summary_item(key, spec, meta, rel(ep.store.session_file(sid))))
        return items

    async def rebuild_episode_index(self) -> int:
        """Re-read every session file of this spec into the episodes index; returns the count."""
        return self.episodes.state.reconcile(force=True)

    def episode_items(self) -> Iterator[MemoryItem]:
        """Every searchable item of this spec's sessions (for ``reindex``)."""
        return EpisodeStore(self.scope.require_spec("sessions")).items(self.scope.project)

    # ---- consolidation ------------------------------------------------------------------
    async def consolidate(self, sessions: int = 50, concurrency: int = 8, project: bool = False,
                          progress: Callable[[int, int], None] | None = None) -> dict:
        """Summarise what the recent sessions taught into ``memory_summary.md`` (see consolidate.py)."""
        from graphmem.rules import consolidate as cons
        from ..errors import GraphmemError
        from ..providers import get_embedder, get_llm
        from ..files.walk import episode_specs, spec_folders

        sessions = check_limit(sessions, "sessions", 10_000)
        concurrency = check_limit(concurrency, "concurrency", 64)
        if not isinstance(project, bool):
            raise ValidationError("must be true or false", field="project")
        whole = project or self.scope.project_wide
        if whole:
            root = Path(self.scope.root)
            specs = sorted(set(spec_folders(root)) | set(episode_specs(root)))
        else:
            specs = [Path(self.scope.require_spec())]  # not whole: the scope has a spec
        llm = get_llm(self.settings)
        note = None
        try:
            embedder = get_embedder(self.settings)
        except GraphmemError as exc:
            embedder, note = None, f"near-duplicate pass skipped: {exc}"
        report = await cons.consolidate(
            specs=specs, target=cons.summary_path(self.scope.spec_dir, self.scope.root, whole),
            home=self.settings.home, sessions=sessions, concurrency=concurrency, label_spec=whole,
            scope="project" if whole else "spec", embedder=embedder, llm=llm, progress=progress,
            redact=self.settings.redact, history=self._history_texts(specs))
        if note and not report.detail:
            report.detail = note
        return report.model_dump()

    def _history_texts(self, specs: list[Path]) -> dict[Path, set[str]]:
        """Spec folder -> the normalised texts of its memories the validity log retired,
        superseded or flagged as possibly superseded (a summary states what holds now)."""
        from ..files.spec_store import SpecStore
        from ..models import normalise
        from graphmem.files.validity_log import validity_log

        out: dict[Path, set[str]] = {}
        for spec in specs:
            events = validity_log(spec).events
            if events:
                out[spec] = {normalise(i.text) for i in SpecStore(spec, self.scope.project).items()
                             if i.id in events}
        return out

    # ---- event hook ---------------------------------------------------------------------
    def make_turn_handler(self) -> Callable[[Any], Awaitable[str]]:
        """The ``ConversationTurn`` handler (``AsyncMemory.make_turn_handler`` says what it takes)."""

        async def handle(event: Any) -> str:
            data = getattr(event, "data", event)
            if not isinstance(data, Mapping):
                raise ValidationError(f"must be a mapping of turn fields, got {type(data).__name__}",
                                      field="event")
            get: Callable[..., Any] = data.get  # unchecked fields: record_turn checks each
            return await self.record_turn(
                get("session_id"), get("role"), get("content"),
                model=get("model", get("model_used")),
                tokens=get("tokens", get("tokens_used")),
                metadata=get("metadata"), at=get("at"))

        return handle

    async def subscribe(self, bus: Any, event: str = "ConversationTurn") -> Callable[[Any], Awaitable[str]]:
        """Subscribe the turn handler to ``bus.subscribe(event, handler)``; returns the handler."""
        handler = self.make_turn_handler()
        result = bus.subscribe(event, handler)
        if asyncio.iscoroutine(result) or isinstance(result, asyncio.Future):
            await result
        return handler
