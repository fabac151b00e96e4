"""The ``Memory`` façade: ``AsyncMemory`` (``async_memory.py``) and its synchronous twin
``Memory``, written out method by method.

Each method has the signature and docstring of its ``AsyncMemory`` namesake and runs it on
graphmem's private event loop (``_sync.run``), so it works inside a running loop too.
``record_turn`` and ``record_step`` skip the loop when the graph is off (``Episodes.*_now``).
``tests/test_memory_surface.py`` fails when the two classes drift apart.
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Iterator, Sequence

from graphmem import _sync
from graphmem.facade.async_memory import AsyncMemory
from graphmem.models import Hit, MemoryItem, SaveReport
from graphmem.settings import Settings

__all__ = ["AsyncMemory", "Memory"]

if TYPE_CHECKING:
    from graphmem.facade.derived import DerivedStores
    from graphmem.files.spec_store import SpecStore
    from graphmem.identity import Project


class Memory:
    """Synchronous ``Memory``: the same methods as ``AsyncMemory``, returning plain values."""

    def __init__(self, spec_dir: str | Path | None, project_dir: str | Path | None = None, *,
                 settings: Settings | None = None, derived: DerivedStores | None = None,
                 backends: DerivedStores | None = None):
        self._async = AsyncMemory(spec_dir, project_dir, settings=settings, derived=derived,
                                  backends=backends)

    @property
    def aio(self) -> AsyncMemory:
        """The async core behind this object."""
        return self._async

    # ---- where it reads and writes (``AsyncMemory``'s properties) --------------------------
    @property
    def settings(self) -> Settings:
        """The settings this object was opened with."""
        return self._async.settings

    @property
    def project(self) -> Project:
        """The project: its key (the same on every machine) and its root here."""
        return self._async.project

    @property
    def project_dir(self) -> Path:
        """The project's root folder on this machine."""
        return self._async.project_dir

    @property
    def spec_dir(self) -> Path:
        """The spec folder it writes (resolved): the one given, else ``<project>/.graphmem``."""
        return self._async.spec_dir

    @property
    def spec_key(self) -> str:
        """How items name this spec: its folder relative to the project root."""
        return self._async.spec_key

    @property
    def files(self) -> SpecStore:
        """The spec's file store, the truth (the project's own one for a project-wide ``Memory``)."""
        return self._async.files

    @property
    def derived(self) -> DerivedStores:
        """The derived stores (local index, graph): the shared ones, or opened on first use."""
        return self._async.derived

    @property
    def backends(self) -> DerivedStores:
        """Deprecated name of ``derived``."""
        warnings.warn("Memory.backends is deprecated: use .derived", DeprecationWarning,
                      stacklevel=2)
        return self._async.derived

    @property
    def search_notes(self) -> list[str]:
        """What the caller of the last search or context should know: the graph did not
        answer, N retired or superseded memories left out (search), a file given to
        ``context(files=)`` that nothing is known about."""
        return self._async.search_notes

    # ---- operations ------------------------------------------------------------------------
    def save_session_insights(self, session_num: int, insights: dict, *,
                              as_written: bool = False, hold: bool = False) -> SaveReport:
        """Save one session's learnings to ``session_insights/session_NNN.json``.

        ``as_written``: the insights are an agent's own output (what ``graphmem.compat`` passes):
        a key in a shape graphmem cannot interpret is kept as given, read for its text and
        reported once (a warning, ``graphmem doctor``) instead of refused.
        ``hold``: the memories it adds are pending review (``review_pending``), hidden until
        accepted (the agent hooks pass it when ``review.mode`` is ``hold``).
        """
        return _sync.run(self._async.save_session_insights(session_num, insights,
                                                           as_written=as_written, hold=hold))

    def load_all_insights(self) -> list[dict]:
        """Every session's insights, oldest first."""
        return _sync.run(self._async.load_all_insights())

    def update_codebase_map(self, discoveries: dict[str, str], *,
                            hold: bool = False) -> SaveReport:
        """Merge file purposes into ``codebase_map.json`` (``hold``: the purposes it adds are
        pending review, as in ``save_session_insights``)."""
        return _sync.run(self._async.update_codebase_map(discoveries, hold=hold))

    def load_codebase_map(self) -> dict[str, str]:
        """File path -> purpose."""
        return _sync.run(self._async.load_codebase_map())

    def append_gotcha(self, gotcha: str) -> SaveReport:
        """Add a pitfall to ``gotchas.md`` (deduplicated)."""
        return _sync.run(self._async.append_gotcha(gotcha))

    def append_pattern(self, pattern: str) -> SaveReport:
        """Add a pattern to ``patterns.md`` (deduplicated)."""
        return _sync.run(self._async.append_pattern(pattern))

    def take_note(self, kind: str, text: str) -> SaveReport:
        """Record a gotcha or pattern (``kind``) that an agent tool may already have written to
        its file (as a bullet, or a ``## [time]`` entry): indexed as the file says it, appended
        only when the file does not say it yet."""
        return _sync.run(self._async.take_note(kind, text))

    def load_gotchas(self) -> list[str]:
        """Every gotcha, in file order."""
        return _sync.run(self._async.load_gotchas())

    def load_patterns(self) -> list[str]:
        """Every pattern, in file order."""
        return _sync.run(self._async.load_patterns())

    def summary(self) -> dict[str, Any]:
        """Counts and the last three sessions, in the reference's shape."""
        return _sync.run(self._async.summary())

    def clear(self) -> None:
        """Delete this spec's memory files and its derived index entries."""
        _sync.run(self._async.clear())

    def items(self) -> list[MemoryItem]:
        """Every searchable item held in this spec's files: insights, map, bullets and sessions."""
        return _sync.run(self._async.items())

    def retire(self, id: str, reason: str, *, at: Any = None) -> dict:
        """Mark a memory as no longer true (it stays in the files; searches hide it)."""
        return _sync.run(self._async.retire(id, reason, at=at))

    def supersede(self, id: str, new_text: str, *, reason: str = "", at: Any = None) -> dict:
        """Replace a gotcha or pattern with ``new_text``: the new one is written, the old one is
        logged as superseded by it."""
        return _sync.run(self._async.supersede(id, new_text, reason=reason, at=at))

    def review_pending(self) -> dict[str, Any]:
        """What waits for a person (``review.mode = hold``): ``pending`` memories the agent hooks
        wrote and ``proposed`` supersessions, each with its id, text and who held it."""
        return _sync.run(self._async.review_pending())

    def accept(self, ids: Sequence[str] | None = None, *, all: bool = False,
               reason: str | None = None) -> dict[str, Any]:
        """Accept pending memories (they become current) and proposals (they take effect), by
        id or ``all``: one step in the validity log, all or nothing."""
        return _sync.run(self._async.accept(ids, all=all, reason=reason))

    def reject(self, ids: Sequence[str] | None = None, *, all: bool = False,
               reason: str | None = None) -> dict[str, Any]:
        """Reject pending memories (hidden for good, kept in the files and the log) and
        proposals (the memory keeps the state it had), by id or ``all``: one step."""
        return _sync.run(self._async.reject(ids, all=all, reason=reason))

    def undo_review(self) -> dict[str, Any]:
        """Take back the latest accept or reject not undone yet (lines appended that restore
        what each of its memories was)."""
        return _sync.run(self._async.undo_review())

    def export(self, path: str | Path | None = None) -> str:
        """Everything of this memory (the whole project when project-wide), history included,
        as graphmem's JSON Lines export; also written to ``path`` (atomically) when given."""
        return _sync.run(self._async.export(path))

    def import_paths(self, paths: Sequence[str | Path], embed: str = "now") -> dict:
        """Import other agents' memory files and folders (CLAUDE.md, AGENTS.md, GEMINI.md,
        ``.cursor/rules``, Claude Code's auto-memory, ``.serena/memories``, claude-mem and mem0
        JSON, graphmem's export) -> what it took, added and skipped (and why). ``embed="later"``:
        indexed by their words at once, embedded by the next ``reindex``."""
        return _sync.run(self._async.import_paths(paths, embed))

    def agents_md(self, write: str | Path | None = None, max_bytes: int = 2048) -> dict:
        """The project's current, verified memory as a marked section of AGENTS.md, CLAUDE.md
        or a ``.mdc`` rule -> ``{"section", "path", "changed"}``; written into ``write`` (between
        its markers, the rest untouched) when given."""
        return _sync.run(self._async.agents_md(write, max_bytes))

    def refresh_agents_md(self) -> dict:
        """Re-render the section in the project's agent files that already carry graphmem's
        markers (what the git and agent hooks run) -> ``{"refreshed", "unchanged", "failed",
        "off"}``; a file whose section did not change is not written."""
        return _sync.run(self._async.refresh_agents_md())

    def search(self, query: str, scope: str = "spec", kinds: Sequence[str] | None = None,
               limit: int = 10, rerank: bool = False, include_history: bool = False,
               *, pending: bool = True) -> list[Hit]:
        """Memories ranked by relevance to ``query`` within this spec, project, or every project.

        Retired and superseded memories are left out unless ``include_history`` (then they carry
        ``metadata["validity"]``). With ``pending``, the prompts agent hooks captured that no
        digest has read yet are found too (``metadata["pending"]``).
        """
        return _sync.run(self._async.search(query, scope, kinds, limit, rerank, include_history,
                                            pending=pending))

    def context(self, task: str, max_tokens: int = 1500,
                files: Sequence[str] | None = None) -> str:
        """A markdown block of the gotchas, patterns, files and lessons most relevant to ``task``.

        ``files``: paths (relative to the project) the agent is working on; memories anchored
        to them come first, whatever their score.
        """
        return _sync.run(self._async.context(task, max_tokens, files))

    def about(self, path_or_symbol: str) -> dict:
        """Everything known about a file or symbol of this project: ``current`` memories (newest
        first), ``gone`` ones (not retired, but their code is gone; newest first), then
        ``history``, the retired and superseded ones (oldest to newest), each with its
        freshness. Answered from the project's graph when it is on and reachable, else from
        the files (anchors and validity logs): both give the same answer."""
        return _sync.run(self._async.about(path_or_symbol))

    def diff(self, commits: str | None = None) -> dict:
        """What the commits ``BASE..HEAD`` (default ``HEAD~1..HEAD``; ``A...B`` from their merge
        base) did to memory: ``added``, ``stale``, ``moved``, ``gone``, ``superseded``,
        ``retired`` (``code/memory_diff.py``)."""
        return _sync.run(self._async.diff(commits))

    def refresh_anchors(self) -> dict:
        """What the git hooks run: anchor the items that have no anchors yet, write each spec's
        ``memory/anchor_states.json`` (every anchored item's freshness now), and send the moved
        ones to the graph again (their files' ``RENAMED_TO`` edges). Reads never wait for it."""
        return _sync.run(self._async.refresh_anchors())

    def reindex(self) -> dict[str, Any]:
        """Rebuild this project's part of the local index from its files."""
        return _sync.run(self._async.reindex())

    def sync(self) -> dict[str, Any]:
        """Replay this spec's graph outbox now (reconnecting at once, without the usual pause).

        Returns ``{"replayed": items, "entries": n, "remaining": items, "graph": status}``; when
        the graph is still unreachable the entries stay queued and ``graph`` says why. On a
        shared server, ``pulled`` counts what was taken in from teammates (all of it, see
        ``team.pull_all``).
        """
        return _sync.run(self._async.sync())

    def drift(self) -> dict[str, Any]:
        """Items in this spec's files but not in the graph, and graph items no file holds (on a
        shared server, only those written from this machine: the rest are teammates')."""
        return _sync.run(self._async.drift())

    def start_session(self, workspace: str | None = None, model: str | None = None,
                      mode: str | None = None, *, at: Any = None) -> str:
        """Start an episodic session and return its id (workspace defaults to the project folder)."""
        return _sync.run(self._async.start_session(workspace, model, mode, at=at))

    def record_turn(self, session_id: str, role: str, content: str, model: str | None = None,
                    tokens: int | None = None, metadata: dict | None = None,
                    at: Any = None) -> str:
        """Append a conversation turn; returns its id once it is on disk."""
        return self._async._sessions.record_turn_now(session_id, role, content, model, tokens, metadata, at)

    def check_turn(self, role: str, content: str, model: str | None = None,
                   tokens: int | None = None, metadata: dict | None = None) -> None:
        """Refuse (ValidationError naming the field) a turn that ``record_turn`` would refuse,
        before any session exists; writes nothing."""
        self._async.check_turn(role, content, model, tokens, metadata)

    def record_turns(self, session_id: str, turns: list[dict]) -> list[str]:
        """Append many turns in one write and one fsync (e.g. importing an old trace with ``at``).

        Each turn is a mapping with ``role`` and ``content`` and optionally ``model``, ``tokens``,
        ``metadata`` and ``at``. Every turn is checked before anything is written; returns the ids.
        """
        return _sync.run(self._async.record_turns(session_id, turns))

    def record_step(self, session_id: str, name: str, status: str, payload: Any = None,
                    at: Any = None) -> str:
        """Append an execution step (a tool call, a command, a check); returns its id."""
        return self._async._sessions.record_step_now(session_id, name, status, payload, at)

    def end_session(self, session_id: str, *, at: Any = None) -> dict:
        """Mark the session ended and store its token total (sum of its turns' tokens)."""
        return _sync.run(self._async.end_session(session_id, at=at))

    def get_session(self, session_id: str) -> dict:
        """One session: ids, workspace, times, status, token total, summary, first prompt, counts."""
        return _sync.run(self._async.get_session(session_id))

    def set_session_summary(self, session_id: str, summary: str) -> SaveReport:
        """Store a summary of the session (searchable; consolidation reads it)."""
        return _sync.run(self._async.set_session_summary(session_id, summary))

    def get_session_summary(self, session_id: str) -> str | None:
        """The session's stored summary, or None."""
        return _sync.run(self._async.get_session_summary(session_id))

    def get_session_history(self, session_id: str) -> list[dict]:
        """Every turn of the session in recorded order, read from its file."""
        return _sync.run(self._async.get_session_history(session_id))

    def get_session_steps(self, session_id: str) -> list[dict]:
        """Every execution step of the session in recorded order."""
        return _sync.run(self._async.get_session_steps(session_id))

    def get_recent_turns(self, limit: int = 20, session_id: str | None = None) -> list[dict]:
        """The latest ``limit`` turns (of one session, or of this spec's sessions), oldest first."""
        return _sync.run(self._async.get_recent_turns(limit, session_id))

    def list_recent_sessions(self, workspace: str | None = None, limit: int = 20) -> list[dict]:
        """The latest sessions of a workspace (default: this project), each with its first prompt."""
        return _sync.run(self._async.list_recent_sessions(workspace, limit))

    def delete_session(self, session_id: str) -> None:
        """Delete a session's files, its index rows and its searchable items."""
        _sync.run(self._async.delete_session(session_id))

    def rebuild_episode_index(self) -> int:
        """Re-read every session file of this spec into the episodes index; returns the count."""
        return _sync.run(self._async.rebuild_episode_index())

    def episode_items(self) -> Iterator[MemoryItem]:
        """Every searchable item of this spec's sessions (for ``reindex``)."""
        return self._async.episode_items()

    def consolidate(self, sessions: int = 50, concurrency: int = 8, project: bool = False,
                    progress: Callable[[int, int], None] | None = None) -> dict:
        """Summarise what the recent sessions taught into ``memory_summary.md`` (see consolidate.py)."""
        return _sync.run(self._async.consolidate(sessions, concurrency, project, progress))

    def make_turn_handler(self) -> Callable[[Any], Awaitable[str]]:
        """An async handler for ``ConversationTurn`` events that records each turn.

        The event is the turn's fields as a mapping, or an object whose ``data`` is one
        (``session_id``, ``role``, ``content``, optional ``model``/``model_used``,
        ``tokens``/``tokens_used``, ``metadata``, ``at``). The handler returns the turn id only once
        the turn is durable, so a bus that acks after its handlers return never loses a turn; bad
        events raise ``ValidationError`` for the bus to report.
        """
        return self._async.make_turn_handler()

    def subscribe(self, bus: Any, event: str = "ConversationTurn") -> Callable[[Any], Awaitable[str]]:
        """Subscribe the turn handler to ``bus.subscribe(event, handler)``; returns the handler."""
        return _sync.run(self._async.subscribe(bus, event))

    # ---- lifetime --------------------------------------------------------------------------
    def close(self) -> None:
        """Release connections held by the derived stores."""
        _sync.run(self._async.aclose())

    def __enter__(self) -> Memory:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
