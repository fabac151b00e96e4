"""``AsyncMemory``, the core of the façade: every user-visible operation starts here.

Write path: validate -> redact -> file store (truth, atomic, locked) -> local index -> graph
(or the outbox when the graph fails). Read path: files for lists, the index or graph for search.
``Memory`` (``memory.py``) is its synchronous twin.

``AsyncMemory`` owns one ``Scope`` (project, spec folder) and small collaborators in
``graphmem/facade/``, each given what it uses and nothing else; every public method is one call
into one of them:

    SpecNotes (notes.py)           insights, codebase map, gotchas and patterns, supersede
    Episodes (episodic.py)         sessions, turns, steps, summaries, consolidation
    Recall (recall.py)             search and context
    Validity (validity.py)         retire (the validity log)
    Review (review.py)             what the hooks and an LLM proposed, held for a person
    Transfer (transfer.py)         export, import, the agents-md section
    About (about.py)               about a file or symbol, anchors refresh
    DerivedSync (derived_sync.py)  the write's derived steps, reindex, outbox sync, drift
    EpisodeLog (episode_log.py)    queued session rows, settled before every read
    WriteRules (write_rules.py)    size limit and redaction
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Iterator, Sequence

from graphmem.facade.derived import DerivedRef, DerivedStores
from graphmem.errors import ValidationError
from graphmem.facade.about import About
from graphmem.facade.derived_sync import DerivedSync
from graphmem.facade.notes import SpecNotes
from graphmem.facade.recall import Recall
from graphmem.facade.review import Review
from graphmem.facade.episode_log import EpisodeLog
from graphmem.facade.episodic import Episodes
from graphmem.facade.transfer import Transfer
from graphmem.facade.validity import Validity
from graphmem.facade.write_rules import WriteRules
from graphmem.identity import resolve_project
from graphmem.models import _SURROGATE, Hit, MemoryItem, SaveReport
from graphmem.facade.scope import Scope
from graphmem.settings import Settings

if TYPE_CHECKING:
    from graphmem.files.spec_store import SpecStore
    from graphmem.identity import Project


def _renamed_keyword(derived: DerivedStores | None, backends: DerivedStores | None
                     ) -> DerivedStores | None:
    """``derived``, or the value given under its former name ``backends`` (with a warning)."""
    if backends is None:
        return derived
    if derived is not None:
        raise ValidationError("give derived stores once: `derived` (`backends` is its "
                              "former name)", field="backends")
    warnings.warn("the `backends` keyword is deprecated: use `derived`", DeprecationWarning,
                  stacklevel=3)
    return backends


class AsyncMemory:
    """Memory for one spec folder of one project (async API).

    With only ``project_dir`` (``spec_dir=None``) it writes the project's own memory folder,
    ``<project>/.graphmem/memory/`` (``scope.py``), and its searches, contexts and ``about``
    cover every spec folder of the project.
    ``derived``: derived stores to share (one index view and one set of models for many
    ``AsyncMemory`` objects, as the warm search server does); by default each opens its own.
    ``backends`` is its former name, still accepted (deprecated).
    """

    def __init__(self, spec_dir: str | Path | None, project_dir: str | Path | None = None, *,
                 settings: Settings | None = None, derived: DerivedStores | None = None,
                 backends: DerivedStores | None = None):
        derived = _renamed_keyword(derived, backends)
        for name, value in (("spec_dir", spec_dir), ("project_dir", project_dir)):
            if value is not None and not isinstance(value, (str, os.PathLike)):
                raise ValidationError(f"must be a folder path (str or Path), got "
                                      f"{type(value).__name__}", field=name)
            if value is not None and _SURROGATE.search(os.fspath(value)):
                raise ValidationError("must be a folder path that is valid UTF-8 (it is stored "
                                      "in the index)", field=name)
        project_only = spec_dir is None and project_dir is not None and "\x00" not in str(project_dir)
        if not project_only:
            if spec_dir is None or str(spec_dir) == "" or "\x00" in str(spec_dir):
                raise ValidationError("must be a folder path", field="spec_dir")
            if project_dir is not None and (str(project_dir) == "" or "\x00" in str(project_dir)):
                raise ValidationError("must be a folder path", field="project_dir")
        self._settings = settings = settings or Settings.load()
        if project_only:
            project = resolve_project(None, project_dir, project_id=settings.project_id,
                                      known_roots=_known_roots(settings))
            self._scope = Scope(project, sync=settings.files.fsync)
        else:
            assert spec_dir is not None  # not project_only: refused above when None
            project = resolve_project(spec_dir, project_dir, project_id=settings.project_id)
            self._scope = Scope(project, Path(spec_dir).resolve(), settings.files.fsync)
        self._derived = DerivedRef(settings, derived, on_open=self._register_root)
        rules = WriteRules(settings)
        args = (settings, self._scope, self._derived)
        self._episodes = EpisodeLog(*args, rules.clean)
        self._sync = DerivedSync(*args, self._episodes.settle)
        self._validity = Validity(*args, rules, self._episodes)
        self._notes = SpecNotes(*args, rules, self._episodes, self._sync, self._validity)
        self._review = Review(settings, self._scope, self._validity)
        self._sessions = Episodes(*args, rules, self._episodes, self._sync)
        self._recall = Recall(*args, rules, self._episodes, self._sync)
        self._transfer = Transfer(self._scope, rules, self._sync, self._notes, self._validity,
                                  self._episodes)
        self._about = About(*args, self._episodes, self._recall.hits_by_id)

    def _register_root(self) -> None:
        from graphmem.code.roots import register_root

        register_root(self._scope.project.key, self._scope.root)  # for the code graph's writes

    # ---- where it reads and writes -------------------------------------------------------
    @property
    def settings(self) -> Settings:
        """The settings this object was opened with."""
        return self._settings

    @property
    def project(self) -> Project:
        """The project: its key (the same on every machine) and its root here."""
        return self._scope.project

    @property
    def project_dir(self) -> Path:
        """The project's root folder on this machine."""
        return self._scope.root

    @property
    def spec_dir(self) -> Path:
        """The spec folder it writes (resolved): the one given, else ``<project>/.graphmem``."""
        return self._scope.spec_dir

    @property
    def spec_key(self) -> str:
        """How items name this spec: its folder relative to the project root."""
        return self._scope.spec_key

    @property
    def files(self) -> SpecStore:
        """The spec's file store, the truth (the project's own one for a project-wide ``Memory``)."""
        return self._scope.files

    @property
    def derived(self) -> DerivedStores:
        """The derived stores (local index, graph): the shared ones, or opened on first use."""
        return self._derived.get()

    @property
    def backends(self) -> DerivedStores:
        """Deprecated name of ``derived``."""
        warnings.warn("AsyncMemory.backends is deprecated: use .derived", DeprecationWarning,
                      stacklevel=2)
        return self._derived.get()

    @property
    def search_notes(self) -> list[str]:
        """What the caller of the last search or context should know: the graph did not
        answer, N retired or superseded memories left out (search), a file given to
        ``context(files=)`` that nothing is known about."""
        return self._recall.notes

    # ---- session insights, codebase map, gotchas and patterns ----------------------------
    async def save_session_insights(self, session_num: int, insights: dict, *,
                                    as_written: bool = False, hold: bool = False) -> SaveReport:
        """Save one session's learnings to ``session_insights/session_NNN.json``.

        ``as_written``: the insights are an agent's own output (what ``graphmem.compat`` passes):
        a key in a shape graphmem cannot interpret is kept as given, read for its text and
        reported once (a warning, ``graphmem doctor``) instead of refused.
        ``hold``: the memories it adds are pending review (``review_pending``), hidden until
        accepted (the agent hooks pass it when ``review.mode`` is ``hold``).
        """
        _check_hold(hold)
        return await self._notes.save_session_insights(session_num, insights, as_written, hold)

    async def load_all_insights(self) -> list[dict]:
        """Every session's insights, oldest first."""
        return await self._notes.load_all_insights()

    async def update_codebase_map(self, discoveries: dict[str, str], *,
                                  hold: bool = False) -> SaveReport:
        """Merge file purposes into ``codebase_map.json`` (``hold``: the purposes it adds are
        pending review, as in ``save_session_insights``)."""
        _check_hold(hold)
        return await self._notes.update_codebase_map(discoveries, hold)

    async def load_codebase_map(self) -> dict[str, str]:
        """File path -> purpose."""
        return await self._notes.load_codebase_map()

    async def append_gotcha(self, gotcha: str) -> SaveReport:
        """Add a pitfall to ``gotchas.md`` (deduplicated)."""
        return await self._notes.append("gotcha", gotcha)

    async def append_pattern(self, pattern: str) -> SaveReport:
        """Add a pattern to ``patterns.md`` (deduplicated)."""
        return await self._notes.append("pattern", pattern)

    async def take_note(self, kind: str, text: str) -> SaveReport:
        """Record a gotcha or pattern (``kind``) that an agent tool may already have written to
        its file (as a bullet, or a ``## [time]`` entry): indexed as the file says it, appended
        only when the file does not say it yet."""
        if kind not in ("gotcha", "pattern"):
            raise ValidationError("must be 'gotcha' or 'pattern'", field="kind")
        return await self._notes.take_note(kind, text)

    async def load_gotchas(self) -> list[str]:
        """Every gotcha, in file order."""
        return await self._notes.load_bullets("gotcha")

    async def load_patterns(self) -> list[str]:
        """Every pattern, in file order."""
        return await self._notes.load_bullets("pattern")

    async def summary(self) -> dict[str, Any]:
        """Counts and the last three sessions, in the reference's shape."""
        return await self._notes.summary()

    async def clear(self) -> None:
        """Delete this spec's memory files and its derived index entries."""
        await self._notes.clear()

    async def items(self) -> list[MemoryItem]:
        """Every searchable item held in this spec's files: insights, map, bullets and sessions."""
        return await self._notes.items()

    # ---- validity ------------------------------------------------------------------------
    async def retire(self, id: str, reason: str, *, at: Any = None) -> dict:
        """Mark a memory as no longer true (it stays in the files; searches hide it)."""
        return await self._validity.retire(id, reason, at=at)

    async def supersede(self, id: str, new_text: str, *, reason: str = "", at: Any = None) -> dict:
        """Replace a gotcha or pattern with ``new_text``: the new one is written, the old one is
        logged as superseded by it."""
        return await self._notes.supersede(id, new_text, reason=reason, at=at)

    # ---- review ------------------------------------------------------------------------------
    async def review_pending(self) -> dict[str, Any]:
        """What waits for a person (``review.mode = hold``): ``pending`` memories the agent hooks
        wrote and ``proposed`` supersessions, each with its id, text and who held it."""
        return await self._review.pending()

    async def accept(self, ids: Sequence[str] | None = None, *, all: bool = False,
                     reason: str | None = None) -> dict[str, Any]:
        """Accept pending memories (they become current) and proposals (they take effect), by
        id or ``all``: one step in the validity log, all or nothing."""
        return await self._review.decide("accept", ids, all, reason)

    async def reject(self, ids: Sequence[str] | None = None, *, all: bool = False,
                     reason: str | None = None) -> dict[str, Any]:
        """Reject pending memories (hidden for good, kept in the files and the log) and
        proposals (the memory keeps the state it had), by id or ``all``: one step."""
        return await self._review.decide("reject", ids, all, reason)

    async def undo_review(self) -> dict[str, Any]:
        """Take back the latest accept or reject not undone yet (lines appended that restore
        what each of its memories was)."""
        return await self._review.undo()

    # ---- export, import, write-through ---------------------------------------------------
    async def export(self, path: str | Path | None = None) -> str:
        """Everything of this memory (the whole project when project-wide), history included,
        as graphmem's JSON Lines export; also written to ``path`` (atomically) when given."""
        from graphmem.files.atomic import atomic_write_text
        from graphmem.files.export_format import dump

        await self._episodes.settle()
        text = dump(self._transfer.export_lines())
        if path is not None:
            atomic_write_text(Path(path), text)
        return text

    async def import_paths(self, paths: Sequence[str | Path], embed: str = "now") -> dict:
        """Import other agents' memory files and folders (CLAUDE.md, AGENTS.md, GEMINI.md,
        ``.cursor/rules``, Claude Code's auto-memory, ``.serena/memories``, claude-mem and mem0
        JSON, graphmem's export) -> what it took, added and skipped (and why). ``embed="later"``:
        indexed by their words at once, embedded by the next ``reindex``."""
        return await self._transfer.import_paths(list(paths), embed)

    async def agents_md(self, write: str | Path | None = None, max_bytes: int = 2048) -> dict:
        """The project's current, verified memory as a marked section of AGENTS.md, CLAUDE.md
        or a ``.mdc`` rule -> ``{"section", "path", "changed"}``; written into ``write`` (between
        its markers, the rest untouched) when given."""
        return await self._transfer.agents_md(self.search, write, max_bytes)

    async def refresh_agents_md(self) -> dict:
        """Re-render the section in the project's agent files that already carry graphmem's
        markers (what the git and agent hooks run) -> ``{"refreshed", "unchanged", "failed",
        "off"}``; a file whose section did not change is not written."""
        return await self._transfer.refresh_agents_md(self.search)

    # ---- search, context, code -----------------------------------------------------------
    async def search(self, query: str, scope: str = "spec", kinds: Sequence[str] | None = None,
                     limit: int = 10, rerank: bool = False, include_history: bool = False,
                     *, pending: bool = True) -> list[Hit]:
        """Memories ranked by relevance to ``query`` within this spec, project, or every project.

        Retired and superseded memories are left out unless ``include_history`` (then they carry
        ``metadata["validity"]``). With ``pending``, the prompts agent hooks captured that no
        digest has read yet are found too (``metadata["pending"]``).
        """
        return await self._recall.search(query, scope, kinds, limit, rerank, include_history,
                                         pending)

    async def context(self, task: str, max_tokens: int = 1500,
                      files: Sequence[str] | None = None) -> str:
        """A markdown block of the gotchas, patterns, files and lessons most relevant to ``task``.

        ``files``: paths (relative to the project) the agent is working on; memories anchored
        to them come first, whatever their score.
        """
        return await self._recall.context(task, max_tokens, files)

    async def about(self, path_or_symbol: str) -> dict:
        """Everything known about a file or symbol of this project: ``current`` memories (newest
        first), ``gone`` ones (not retired, but their code is gone; newest first), then
        ``history``, the retired and superseded ones (oldest to newest), each with its
        freshness. Answered from the project's graph when it is on and reachable, else from
        the files (anchors and validity logs): both give the same answer."""
        return await self._about.about(path_or_symbol)

    async def diff(self, commits: str | None = None) -> dict:
        """What the commits ``BASE..HEAD`` (default ``HEAD~1..HEAD``; ``A...B`` from their merge
        base) did to memory: ``added``, ``stale``, ``moved``, ``gone``, ``superseded``,
        ``retired`` (``code/memory_diff.py``)."""
        return await self._about.diff(commits)

    async def refresh_anchors(self) -> dict:
        """What the git hooks run: anchor the items that have no anchors yet, write each spec's
        ``memory/anchor_states.json`` (every anchored item's freshness now), and send the moved
        ones to the graph again (their files' ``RENAMED_TO`` edges). Reads never wait for it."""
        return await self._about.refresh_anchors()

    # ---- derived stores --------------------------------------------------------------------
    async def reindex(self) -> dict[str, Any]:
        """Rebuild this project's part of the local index from its files."""
        return await self._sync.reindex()

    async def sync(self) -> dict[str, Any]:
        """Replay this spec's graph outbox now (reconnecting at once, without the usual pause).

        Returns ``{"replayed": items, "entries": n, "remaining": items, "graph": status}``; when
        the graph is still unreachable the entries stay queued and ``graph`` says why. On a
        shared server, ``pulled`` counts what was taken in from teammates (all of it, see
        ``team.pull_all``).
        """
        return await self._sync.sync()

    async def drift(self) -> dict[str, Any]:
        """Items in this spec's files but not in the graph, and graph items no file holds (on a
        shared server, only those written from this machine: the rest are teammates')."""
        return await self._sync.drift()

    # ---- sessions ----------------------------------------------------------------------------
    async def start_session(self, workspace: str | None = None, model: str | None = None,
                            mode: str | None = None, *, at: Any = None) -> str:
        """Start an episodic session and return its id (workspace defaults to the project folder)."""
        return await self._sessions.start_session(workspace, model, mode, at=at)

    async def record_turn(self, session_id: str, role: str, content: str, model: str | None = None,
                          tokens: int | None = None, metadata: dict | None = None,
                          at: Any = None) -> str:
        """Append a conversation turn; returns its id once it is on disk."""
        return await self._sessions.record_turn(session_id, role, content, model, tokens,
                                                metadata, at)

    def check_turn(self, role: str, content: str, model: str | None = None,
                   tokens: int | None = None, metadata: dict | None = None) -> None:
        """Refuse (ValidationError naming the field) a turn that ``record_turn`` would refuse,
        before any session exists; writes nothing."""
        self._sessions.check_turn(role, content, model, tokens, metadata)

    async def record_turns(self, session_id: str, turns: list[dict]) -> list[str]:
        """Append many turns in one write and one fsync (e.g. importing an old trace with ``at``).

        Each turn is a mapping with ``role`` and ``content`` and optionally ``model``, ``tokens``,
        ``metadata`` and ``at``. Every turn is checked before anything is written; returns the ids.
        """
        return await self._sessions.record_turns(session_id, turns)

    async def record_step(self, session_id: str, name: str, status: str, payload: Any = None,
                          at: Any = None) -> str:
        """Append an execution step (a tool call, a command, a check); returns its id."""
        return await self._sessions.record_step(session_id, name, status, payload, at)

    async def end_session(self, session_id: str, *, at: Any = None) -> dict:
        """Mark the session ended and store its token total (sum of its turns' tokens)."""
        return await self._sessions.end_session(session_id, at=at)

    async def get_session(self, session_id: str) -> dict:
        """One session: ids, workspace, times, status, token total, summary, first prompt, counts."""
        return await self._sessions.get_session(session_id)

    async def set_session_summary(self, session_id: str, summary: str) -> SaveReport:
        """Store a summary of the session (searchable; consolidation reads it)."""
        return await self._sessions.set_session_summary(session_id, summary)

    async def get_session_summary(self, session_id: str) -> str | None:
        """The session's stored summary, or None."""
        return await self._sessions.get_session_summary(session_id)

    async def get_session_history(self, session_id: str) -> list[dict]:
        """Every turn of the session in recorded order, read from its file."""
        return await self._sessions.get_session_history(session_id)

    async def get_session_steps(self, session_id: str) -> list[dict]:
        """Every execution step of the session in recorded order."""
        return await self._sessions.get_session_steps(session_id)

    async def get_recent_turns(self, limit: int = 20, session_id: str | None = None) -> list[dict]:
        """The latest ``limit`` turns (of one session, or of this spec's sessions), oldest first."""
        return await self._sessions.get_recent_turns(limit, session_id)

    async def list_recent_sessions(self, workspace: str | None = None, limit: int = 20) -> list[dict]:
        """The latest sessions of a workspace (default: this project), each with its first prompt."""
        return await self._sessions.list_recent_sessions(workspace, limit)

    async def delete_session(self, session_id: str) -> None:
        """Delete a session's files, its index rows and its searchable items."""
        await self._sessions.delete_session(session_id)

    async def rebuild_episode_index(self) -> int:
        """Re-read every session file of this spec into the episodes index; returns the count."""
        return await self._sessions.rebuild_episode_index()

    def episode_items(self) -> Iterator[MemoryItem]:
        """Every searchable item of this spec's sessions (for ``reindex``)."""
        return self._sessions.episode_items()

    async def consolidate(self, sessions: int = 50, concurrency: int = 8, project: bool = False,
                          progress: Callable[[int, int], None] | None = None) -> dict:
        """Summarise what the recent sessions taught into ``memory_summary.md`` (see consolidate.py)."""
        return await self._sessions.consolidate(sessions, concurrency, project, progress)

    def make_turn_handler(self) -> Callable[[Any], Awaitable[str]]:
        """An async handler for ``ConversationTurn`` events that records each turn.

        The event is the turn's fields as a mapping, or an object whose ``data`` is one
        (``session_id``, ``role``, ``content``, optional ``model``/``model_used``,
        ``tokens``/``tokens_used``, ``metadata``, ``at``). The handler returns the turn id only once
        the turn is durable, so a bus that acks after its handlers return never loses a turn; bad
        events raise ``ValidationError`` for the bus to report.
        """
        return self._sessions.make_turn_handler()

    async def subscribe(self, bus: Any, event: str = "ConversationTurn") -> Callable[[Any], Awaitable[str]]:
        """Subscribe the turn handler to ``bus.subscribe(event, handler)``; returns the handler."""
        return await self._sessions.subscribe(bus, event)

    # ---- lifetime --------------------------------------------------------------------------
    async def aclose(self) -> None:
        """Release connections held by the derived stores (after queued session rows are written)."""
        if self._derived.opened:
            await self._episodes.settle()
            await self._derived.get().aclose()

    async def __aenter__(self) -> AsyncMemory:
        return self

    async def __aexit__(self, *exc: Any) -> None:
        await self.aclose()


def _known_roots(settings: Settings) -> list[str]:
    """Project roots this home has registered (a sub-folder of one is that project)."""
    from graphmem.index.db import registered_roots

    return registered_roots(settings.home)


def _check_hold(hold: Any) -> None:
    """``hold`` must be a bool (a string such as "no" would hold)."""
    if not isinstance(hold, bool):
        raise ValidationError("must be true or false", field="hold")
