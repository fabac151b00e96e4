"""Auto-Claude's ``GraphitiMemory`` and its config functions, on graphmem (files first, graph
when on).

The same methods, signatures and return shapes as Auto-Claude's ``integrations.graphiti``
(``GraphitiMemory``, ``GroupIdMode``, ``get_graphiti_memory``, ``is_graphiti_enabled``,
``get_graphiti_status``, ``validate_graphiti_config``, ``get_available_providers``). Every save
writes the spec's files first (a session file, the codebase map, ``gotchas.md`` / ``patterns.md``,
task outcomes as steps of an episodic session), then the local index and, when the graph is on,
the graph; every read is a graphmem search, with its freshness and validity. The methods run the
synchronous ``Memory`` in a worker thread, so they never block the caller's loop.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
from pathlib import Path
from typing import Any

from ..errors import GraphmemError
from ..graph.presence import in_use as graph_in_use
from ._store import memory, settings

logger = logging.getLogger(__name__)

MAX_CONTEXT_RESULTS = 10
MAX_RETRIES = 2  # Auto-Claude's names; graphmem retries by its own settings
RETRY_DELAY_SECONDS = 1
EPISODE_TYPE_SESSION_INSIGHT = "session_insight"
EPISODE_TYPE_CODEBASE_DISCOVERY = "codebase_discovery"
EPISODE_TYPE_PATTERN = "pattern"
EPISODE_TYPE_GOTCHA = "gotcha"
EPISODE_TYPE_TASK_OUTCOME = "task_outcome"
EPISODE_TYPE_QA_RESULT = "qa_result"
EPISODE_TYPE_HISTORICAL_CONTEXT = "historical_context"
OUTCOME_STEP = "task_outcome"  # the step name prefix task outcomes are recorded under

__all__ = ["EPISODE_TYPE_CODEBASE_DISCOVERY", "EPISODE_TYPE_GOTCHA",
           "EPISODE_TYPE_HISTORICAL_CONTEXT", "EPISODE_TYPE_PATTERN", "EPISODE_TYPE_QA_RESULT",
           "EPISODE_TYPE_SESSION_INSIGHT", "EPISODE_TYPE_TASK_OUTCOME", "GraphitiMemory",
           "GroupIdMode", "MAX_CONTEXT_RESULTS", "MAX_RETRIES", "RETRY_DELAY_SECONDS",
           "get_available_providers", "get_graphiti_memory",
           "get_graphiti_status", "is_graphiti_enabled", "validate_graphiti_config"]


class GroupIdMode:
    """How memories are scoped: one spec, or the whole project."""

    SPEC = "spec"
    PROJECT = "project"


def is_graphiti_enabled() -> bool:
    """Whether graphmem's knowledge graph is in use now (``GRAPHITI_ENABLED=true``,
    ``GRAPHMEM_GRAPH=on``, or the default ``auto`` with a FalkorDB there: ``graph.presence``)."""
    return graph_in_use(settings())


def get_graphiti_status() -> dict:
    """``enabled``, ``available``, ``database``, ``db_path``, ``llm_provider``,
    ``embedder_provider``, ``reason``, ``errors`` — graphmem's graph, as Auto-Claude words it."""
    s = settings()
    enabled = graph_in_use(s)
    status = {"enabled": enabled, "available": False, "database": "graphmem",
              "db_path": str(s.home), "llm_provider": s.providers.llm,
              "embedder_provider": s.providers.embedder, "reason": "", "errors": []}
    if not enabled:
        status["reason"] = ("graph not in use (GRAPHITI_ENABLED / GRAPHMEM_GRAPH, or no FalkorDB "
                            "running: `graphmem db start`); files and local index in use")
        return status
    import importlib.util

    if importlib.util.find_spec("graphiti_core") is None:
        status["reason"] = "Graphiti packages not installed: no graphiti_core"
        return status
    status["available"] = True
    return status


def validate_graphiti_config() -> tuple[bool, list[str]]:
    """(valid, problems): the settings load, and the graph is on."""
    try:
        s = settings()
    except GraphmemError as exc:
        return False, [str(exc)]
    if not graph_in_use(s):
        return False, ["GRAPHITI_ENABLED must be set to true (or GRAPHMEM_GRAPH to on, or the "
                       "embedded graph started: `graphmem db start`)"]
    return True, []


def get_available_providers() -> dict:
    """``llm_providers`` and ``embedder_providers`` graphmem is set to use."""
    s = settings()
    return {"llm_providers": [s.providers.llm] if s.providers.llm else [],
            "embedder_providers": [s.providers.embedder]}


def get_graphiti_memory(spec_dir: Path, project_dir: Path,
                        group_id_mode: str = GroupIdMode.PROJECT) -> "GraphitiMemory":
    """A ``GraphitiMemory`` for the spec (project-wide scope by default)."""
    return GraphitiMemory(spec_dir, project_dir, group_id_mode)


class GraphitiMemory:
    """Auto-Claude's Graphiti memory, backed by graphmem: files first, graph when on."""

    def __init__(self, spec_dir: Path, project_dir: Path, group_id_mode: str = GroupIdMode.SPEC):
        self.spec_dir = Path(spec_dir)
        self.project_dir = Path(project_dir)
        self.group_id_mode = group_id_mode
        self._initialized = False
        self._episode: str | None = None  # the episodic session task outcomes are steps of
        self._errors: list[str] = []
        self._saved = 0
        self._last_session: int | None = None

    # ---- state ------------------------------------------------------------------------------
    @property
    def is_enabled(self) -> bool:
        """Whether the graph is on (the files are written either way)."""
        return is_graphiti_enabled()

    @property
    def is_initialized(self) -> bool:
        """Whether ``initialize`` ran."""
        return self._initialized

    @property
    def group_id(self) -> str:
        """The spec folder's name, or ``project_<name>_<hash>`` in project mode."""
        if self.group_id_mode == GroupIdMode.PROJECT:
            digest = hashlib.md5(str(self.project_dir.resolve()).encode(),
                                 usedforsecurity=False).hexdigest()[:8]
            return f"project_{self.project_dir.name}_{digest}"
        return self.spec_dir.name

    @property
    def spec_context_id(self) -> str:
        """The spec folder's name."""
        return self.spec_dir.name

    async def initialize(self) -> bool:
        """Open the spec's memory (its folder is created); True once it is usable."""
        try:
            await self._run(lambda m: m.files.memory_dir)
        except Exception as exc:  # as Auto-Claude's: False and a recorded error, never a raise
            self._record_error(f"Initialization failed: {exc}")
            return False
        self._initialized = True
        return True

    async def close(self) -> None:
        """Nothing to release: the spec's ``Memory`` is shared by the process."""

    # ---- plumbing -----------------------------------------------------------------------------
    async def _run(self, fn: Any) -> Any:
        """``fn(memory)`` in a worker thread, the caller's loop free meanwhile."""
        def call() -> Any:
            (self.spec_dir / "memory").mkdir(parents=True, exist_ok=True)
            # the project as graphmem names it (its repository), as the compat functions do:
            # one spec, one Memory, one project key; project_dir only names the group
            with memory(self.spec_dir) as m:
                return fn(m)
        return await asyncio.to_thread(call)

    async def _save(self, what: str, fn: Any) -> bool:
        try:
            await self._run(fn)
        except Exception as exc:  # the original reports False and logs; so does this
            logger.warning("Failed to %s: %s", what, exc)
            self._record_error(f"{what} failed: {exc}")
            return False
        self._saved += 1
        return True

    def _record_error(self, message: str) -> None:
        self._errors = (self._errors + [message[:500]])[-10:]

    def _scope(self, wide: bool) -> str:
        return "project" if wide or self.group_id_mode == GroupIdMode.PROJECT else "spec"

    # ---- saves --------------------------------------------------------------------------------
    async def save_session_insights(self, session_num: int, insights: dict) -> bool:
        """Save a session's insights: its file, then the index and the graph."""
        ok = await self._save("save_session_insights", lambda m: m.save_session_insights(
            session_num, insights, as_written=True))
        if ok:
            self._last_session = session_num
        return ok

    async def save_codebase_discoveries(self, discoveries: dict[str, str]) -> bool:
        """Merge file purposes into the codebase map."""
        if not discoveries:
            return True
        return await self._save("save_codebase_discoveries",
                                lambda m: m.update_codebase_map(discoveries))

    async def save_pattern(self, pattern: str) -> bool:
        """Record a pattern (indexed as written when an agent tool already wrote it)."""
        return await self._save("save_pattern", lambda m: m.take_note("pattern", pattern))

    async def save_gotcha(self, gotcha: str) -> bool:
        """Record a gotcha (indexed as written when an agent tool already wrote it)."""
        return await self._save("save_gotcha", lambda m: m.take_note("gotcha", gotcha))

    async def save_task_outcome(self, task_id: str, success: bool, outcome: str,
                                metadata: dict | None = None) -> bool:
        """Record a task outcome as a step of this object's episodic session."""
        def save(m: Any) -> None:
            if self._episode is None:
                self._episode = m.start_session(mode="graphiti-compat")
            m.record_step(self._episode, f"{OUTCOME_STEP} {task_id}",
                          "succeeded" if success else "failed",
                          {"task_id": task_id, "success": success, "outcome": outcome,
                           **(metadata or {})})
        return await self._save("save_task_outcome", save)

    async def save_structured_insights(self, insights: dict) -> bool:
        """Save the insight extractor's output as the session file of its ``session_num``."""
        if not insights:
            return True
        num = insights.get("session_num")

        def save(m: Any) -> None:
            n = num if isinstance(num, int) and not isinstance(num, bool) and num > 0 else \
                len(m.files.sessions()) + 1
            session = {"discoveries": insights}
            for key in ("subtask_id", "success"):
                if key in insights:
                    session[key] = insights[key]
            m.save_session_insights(n, session, as_written=True)
        return await self._save("save_structured_insights", save)

    # ---- reads ----------------------------------------------------------------------------------
    async def get_relevant_context(self, query: str, num_results: int = MAX_CONTEXT_RESULTS,
                                   include_project_context: bool = True) -> list[dict]:
        """``[{"content", "score", "type"}]``: graphmem's search, fresh and valid memories only."""
        try:
            hits = await self._run(lambda m: m.search(
                query, scope=self._scope(include_project_context),
                limit=max(1, min(num_results, MAX_CONTEXT_RESULTS))))
        except Exception as exc:
            self._record_error(f"get_relevant_context failed: {exc}")
            return []
        return [{"content": h.text, "score": h.score, "type": h.kind} for h in hits]

    async def get_session_history(self, limit: int = 5, spec_only: bool = True) -> list[dict]:
        """The latest sessions' insights, newest first (read from the session files)."""
        try:
            sessions = await self._run(lambda m: m.load_all_insights())
        except Exception as exc:
            self._record_error(f"get_session_history failed: {exc}")
            return []
        out = [{"type": EPISODE_TYPE_SESSION_INSIGHT, "spec_id": self.spec_context_id, **s}
               for s in sessions]
        out.sort(key=_session_number, reverse=True)
        return out[:max(0, limit)]

    async def get_similar_task_outcomes(self, task_description: str, limit: int = 5) -> list[dict]:
        """``[{"task_id", "success", "outcome", "score"}]`` of the outcomes most like the task."""
        def find(m: Any) -> list[dict]:
            out = []
            for h in m.search(f"task outcome: {task_description}", kinds=["step"],
                              limit=max(1, limit * 2)):
                name = str(h.metadata.get("step") or "")
                if not name.startswith(OUTCOME_STEP + " "):
                    continue
                payload = next((s.get("payload") for s in m.get_session_steps(h.session)
                                if s.get("id") == h.metadata.get("step_id")), None) or {}
                out.append({"task_id": payload.get("task_id", name[len(OUTCOME_STEP) + 1:]),
                            "success": payload.get("success", h.metadata.get("status") == "succeeded"),
                            "outcome": payload.get("outcome"), "score": h.score})
            return out[:limit]
        try:
            return await self._run(find)
        except Exception as exc:
            self._record_error(f"get_similar_task_outcomes failed: {exc}")
            return []

    async def get_patterns_and_gotchas(self, query: str, num_results: int = 5,
                                       min_score: float = 0.5) -> tuple[list[dict], list[dict]]:
        """(patterns, gotchas) relevant to ``query``, best first, each scoring ``min_score`` or
        more on graphmem's 0-1 scale."""
        def find(m: Any) -> tuple[list[dict], list[dict]]:
            scope = self._scope(False)
            pats = [{"pattern": h.text, "applies_to": "", "example": "", "score": h.score}
                    for h in m.search(query, scope=scope, kinds=["pattern"], limit=num_results)
                    if h.score >= min_score]
            gots = [{"gotcha": h.text, "trigger": "", "solution": "", "score": h.score}
                    for h in m.search(query, scope=scope, kinds=["gotcha"], limit=num_results)
                    if h.score >= min_score]
            return pats, gots
        try:
            return await self._run(find)
        except Exception as exc:
            self._record_error(f"get_patterns_and_gotchas failed: {exc}")
            return [], []

    def get_status_summary(self) -> dict:
        """The keys of Auto-Claude's status summary, filled from graphmem's state."""
        status = get_graphiti_status()
        on = status["enabled"]
        return {"enabled": on, "initialized": self.is_initialized,
                "database": status["database"] if on else None,
                "db_path": status["db_path"] if on else None,
                "group_id": self.group_id, "group_id_mode": self.group_id_mode,
                "llm_provider": status["llm_provider"] if on else None,
                "embedder_provider": status["embedder_provider"] if on else None,
                "episode_count": self._saved, "last_session": self._last_session,
                "errors": len(self._errors)}


def _session_number(session: dict) -> int:
    """A session's number for ordering; 0 for one that has none."""
    n = session.get("session_number")
    return n if isinstance(n, int) else 0
