"""graphmem's MCP server: each tool is a thin adapter over ``AsyncMemory``.

The server holds one ``AsyncMemory`` per (spec, project) for its lifetime and awaits it directly
(MCP is async, so the sync wrapper is never used inside the event loop). Every ``GraphmemError``
comes back as an MCP tool error (``isError``) carrying the CLI's message; the server keeps serving.
"""

from __future__ import annotations

import logging
import os
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Annotated, Any, AsyncIterator, Awaitable, Callable, Iterable, Literal

import pydantic
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
from mcp.types import ToolAnnotations
from pydantic import Field

from graphmem.rules.context import MAX_TOKENS, MIN_TOKENS
from graphmem.errors import GraphmemError, ValidationError, field_name, first_problem
from graphmem.identity import resolve_project
from graphmem.facade.memory import AsyncMemory
from graphmem.models import Kind, SessionInsights, check_folders
from graphmem.settings import Settings

log = logging.getLogger("graphmem.mcp")

INSTRUCTIONS = (
    "graphmem is the long-term memory of coding agents. Before a task, call get_context (or "
    "search_memory) to recall gotchas, patterns, files and lessons from past sessions of this and "
    "other projects. While working, record what you learn: add_gotcha, add_pattern, "
    "update_codebase_map, record_turn (then end_session); at the end of a session, "
    "save_session_insights.")

# The roles a conversation turn may have over MCP (the Python API stores any one-line role).
Role = Literal["user", "assistant", "system", "tool"]

SpecArg = Annotated[str | None, Field(
    description="spec folder (e.g. auto-claude/specs/001-feature), inside the server's folders "
                "(--spec-dir, --project-dir, --root); when neither spec_dir nor project_dir is "
                "given, the server's --spec-dir/--project-dir are used")]
ProjectArg = Annotated[str | None, Field(
    description="project root (default: the git work tree enclosing spec_dir), inside the "
                "server's folders; "
                "alone, reads cover the whole project and writes go to the project's own memory "
                "(<project>/.graphmem/memory)")]


def _int(description: str, **bounds: int) -> Any:
    # strict: JSON 3 only; "3", 3.0 and true are refused instead of coerced.
    return Field(strict=True, description=description, **bounds)


def _reads(title: str) -> ToolAnnotations:
    return ToolAnnotations(title=title, read_only_hint=True, open_world_hint=False)


def _writes(title: str, idempotent: bool = False) -> ToolAnnotations:
    return ToolAnnotations(title=title, read_only_hint=False, destructive_hint=False,
                           idempotent_hint=idempotent, open_world_hint=False)


class MemoryPool:
    """One ``AsyncMemory`` per (spec, project), created on first use and closed with the server."""

    def __init__(self, settings: Settings, spec_dir: Path | None, project_dir: Path | None,
                 roots: Iterable[str | Path] = ()):
        self.settings = settings
        self.spec_dir = spec_dir
        self.project_dir = project_dir
        implied = project_dir or (resolve_project(spec_dir, project_id=settings.project_id).root
                                  if spec_dir else None)  # the spec's project (``identity``)
        # The folders tool arguments may name: the start-up folders and the explicit --root's.
        self.roots = tuple(dict.fromkeys(_real(r) for r in (spec_dir, implied, *roots) if r))
        self._memories: dict[tuple[str | None, str | None], AsyncMemory] = {}

    def confine(self, field: str, folder: Path) -> None:
        """Refuse a folder argument whose real path is outside every root (links resolved)."""
        real = _real(folder)
        if any(real == root or real.is_relative_to(root) for root in self.roots):
            return
        if not self.roots:
            raise ValidationError(
                "this server was started without folders, so tools may not name any: start it "
                "with --spec-dir, --project-dir or --root DIR", field=field)
        raise ValidationError(
            f"{folder} is outside the folders this server was started for "
            f"({', '.join(map(str, self.roots))}); add one with --root DIR", field=field)

    def get(self, spec_dir: str | None, project_dir: str | None) -> AsyncMemory:
        """The memory for these folders; when a tool is given neither, the server's start-up options.

        Arguments replace the start-up folders as a pair, so a spec of another project is never
        joined to the server's project. With only a project folder the memory reads the whole
        project and writes the project's own memory, ``<project>/.graphmem/memory``.
        """
        for name, value in (("spec_dir", spec_dir), ("project_dir", project_dir)):
            if value is not None and (not value.strip() or "\x00" in value):
                raise ValidationError("must be a folder path", field=name)
        if spec_dir or project_dir:
            spec = Path(spec_dir).expanduser() if spec_dir else None
            project = Path(project_dir).expanduser() if project_dir else None
            # Checked before the folders are looked at, so nothing outside leaks, not even existence.
            if spec is not None:
                self.confine("spec_dir", spec)
            if project is not None:
                self.confine("project_dir", project)
            elif spec is not None:  # the implied project (``identity``) is read and indexed too
                self.confine("spec_dir", resolve_project(
                    spec, project_id=self.settings.project_id).root)
        else:
            spec, project = self.spec_dir, self.project_dir
        if spec is None and project is None:
            raise ValidationError("no folder: pass spec_dir or project_dir (the project's own "
                                  "memory), or start the server with --spec-dir or --project-dir", field="spec_dir")
        check_folders(spec=spec, project=project)
        key = (str(spec.resolve()) if spec else None, str(project.resolve()) if project else None)
        mem = self._memories.get(key)
        if mem is None:
            mem = self._memories[key] = AsyncMemory(spec, project, settings=self.settings)
        return mem

    async def aclose(self) -> None:
        """Close every memory; one failing close does not keep the others open."""
        for mem in self._memories.values():
            try:
                await mem.aclose()
            except Exception:  # shutting down: log and carry on
                log.exception("closing memory for %s failed", mem.spec_dir)
        self._memories.clear()


def _real(folder: str | Path) -> Path:
    return Path(os.path.realpath(Path(folder).expanduser()))


def _fail(exc: GraphmemError) -> ToolError:
    # The same line the CLI prints on stderr, so agents and humans read one vocabulary.
    return ToolError(f"graphmem: error: {exc}")


def _arguments_message(exc: pydantic.ValidationError) -> str:
    """The first schema problem, worded like graphmem's own checks: ``files[0]: problem``."""
    loc, msg = first_problem(exc)
    return f"graphmem: error: {field_name(*loc) or 'arguments'}: {msg}"


class GraphmemMCPServer(MCPServer):
    """``MCPServer`` whose tool errors read like the CLI's, without the SDK's wrapping."""

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
        try:
            return await super().call_tool(name, arguments, context)
        except UnexpectedToolError:
            raise  # a crash: the SDK keeps its text on the server and logs the traceback
        except ToolError as exc:
            cause = exc.__cause__
            if isinstance(cause, pydantic.ValidationError):  # arguments that fail the schema
                raise ToolError(_arguments_message(cause)) from cause
            if isinstance(cause, ToolError) and str(cause).startswith("graphmem: error:"):
                raise ToolError(str(cause)) from None
            raise


def build_server(spec_dir: str | Path | None = None, project_dir: str | Path | None = None, *,
                 settings: Settings | None = None, roots: Iterable[str | Path] = ()) -> MCPServer:
    """An MCP server exposing the memory tools; the folders are defaults tools may override.

    Tools may name only folders inside ``spec_dir``, ``project_dir`` (by default the project of
    ``spec_dir``, see ``identity``) and ``roots``; with none of them, every folder argument is refused.
    """
    pool = MemoryPool(settings or Settings.load(), Path(spec_dir) if spec_dir else None,
                      Path(project_dir) if project_dir else None, roots)

    sessions = 0

    @asynccontextmanager
    async def lifespan(_server: MCPServer) -> AsyncIterator[MemoryPool]:
        # Entered once per client session (many at once over HTTP): close on the last one out.
        nonlocal sessions
        sessions += 1
        try:
            yield pool
        finally:
            sessions -= 1
            if sessions == 0:
                await pool.aclose()

    from graphmem import __version__

    server = GraphmemMCPServer("graphmem", version=__version__, instructions=INSTRUCTIONS,
                               lifespan=lifespan, log_level="WARNING")
    server.pool = pool  # type: ignore[attr-defined]  # for tests and embedding
    _register_tools(server, pool)
    return server


def _register_tools(server: MCPServer, pool: MemoryPool) -> None:
    tool = server.tool

    async def use(spec: str | None, project: str | None,
                  op: Callable[[AsyncMemory], Awaitable[Any]]) -> Any:
        try:
            return await op(pool.get(spec, project))
        except GraphmemError as exc:
            raise _fail(exc) from None

    def report(rep: Any) -> dict[str, Any]:
        return rep.model_dump(mode="json")

    @tool(title="Save session insights", annotations=_writes("Save session insights", True),
          description="Save one session's learnings (subtasks_completed, discoveries{files_understood, "
                      "patterns_found, gotchas_encountered}, what_worked, what_failed, "
                      "recommendations_for_next_session; today's Auto-Claude keys file_insights, "
                      "patterns_discovered, gotchas_discovered, recommendations, approach_outcome, "
                      "changed_files, subtask_id, success are read too) as session_NNN.json; returns "
                      "which stores took it.")
    async def save_session_insights(
            session_num: Annotated[int, _int("1-based session number", ge=1, le=999_999)],
            insights: Annotated[SessionInsights, Field(
                description="the session's insights (the reference's session_NNN.json keys; "
                            "extra keys are kept)")],
            spec_dir: SpecArg = None, project_dir: ProjectArg = None) -> dict[str, Any]:
        data = insights.model_dump(mode="json", exclude_unset=True)  # as sent
        return report(await use(spec_dir, project_dir,
                                 lambda m: m.save_session_insights(session_num, data)))

    @tool(title="Add a gotcha", annotations=_writes("Add a gotcha", True),
          description="Record a pitfall to avoid in this codebase (one line; duplicates are ignored).")
    async def add_gotcha(text: Annotated[str, Field(description="the gotcha, one line")],
                         spec_dir: SpecArg = None, project_dir: ProjectArg = None) -> dict[str, Any]:
        return report(await use(spec_dir, project_dir, lambda m: m.append_gotcha(text)))

    @tool(title="Retire a memory", annotations=_writes("Retire a memory", True),
          description="Mark a memory (by the id search_memory returns) as no longer true: it stays "
                      "in the files, and searches and contexts leave it out from now on.")
    async def retire_memory(
            id: Annotated[str, Field(description="the memory's id, from search_memory")],
            reason: Annotated[str, Field(description="why it is no longer true")],
            spec_dir: SpecArg = None, project_dir: ProjectArg = None) -> dict[str, Any]:
        return await use(spec_dir, project_dir, lambda m: m.retire(id, reason))

    @tool(title="Supersede a memory", annotations=_writes("Supersede a memory"),
          description="Replace a gotcha or pattern (by its id) with a newer text: the new one is "
                      "written and the old one is logged as superseded by it.")
    async def supersede_memory(
            id: Annotated[str, Field(description="the old memory's id, from search_memory")],
            new_text: Annotated[str, Field(description="the memory that replaces it, one line")],
            reason: Annotated[str, Field(description="why the old one is no longer true")] = "",
            spec_dir: SpecArg = None, project_dir: ProjectArg = None) -> dict[str, Any]:
        return await use(spec_dir, project_dir,
                         lambda m: m.supersede(id, new_text, reason=reason))

    @tool(title="About a file or symbol", annotations=_reads("About a file or symbol"),
          description="Everything known about a file (path relative to the project; for a "
                      "folder use get_context's files) or a symbol "
                      "(function, class, method name): current (not retired or superseded, "
                      "code still there), newest first; gone (not retired, but the code they "
                      "describe is gone), newest first; history (retired and superseded), "
                      "oldest first; each with its freshness (current, changed, moved, gone).")
    async def about(
            path_or_symbol: Annotated[str, Field(description="e.g. src/pay.py or Client.charge")],
            spec_dir: SpecArg = None, project_dir: ProjectArg = None) -> dict[str, Any]:
        return await use(spec_dir, project_dir, lambda m: m.about(path_or_symbol))

    @tool(title="Add a pattern", annotations=_writes("Add a pattern", True),
          description="Record a code pattern to follow in this codebase (one line; duplicates are ignored).")
    async def add_pattern(text: Annotated[str, Field(description="the pattern, one line")],
                          spec_dir: SpecArg = None, project_dir: ProjectArg = None) -> dict[str, Any]:
        return report(await use(spec_dir, project_dir, lambda m: m.append_pattern(text)))

    @tool(title="Update the codebase map", annotations=_writes("Update the codebase map", True),
          description="Merge file purposes into the codebase map: {relative/path: what the file does}.")
    async def update_codebase_map(
            discoveries: Annotated[dict[str, str], Field(description="relative file path -> purpose")],
            spec_dir: SpecArg = None, project_dir: ProjectArg = None) -> dict[str, Any]:
        return report(await use(spec_dir, project_dir, lambda m: m.update_codebase_map(discoveries)))

    @tool(title="Search memory", annotations=_reads("Search memory"),
          description="Search memory by meaning and keywords: gotchas, patterns, files, session "
                      "insights, conversation turns. scope: spec (this spec), project (every spec of "
                      "this project) or all (every project). Returns ranked hits with their source file, and "
                      "notes when there is more to know (the graph did not answer, retired "
                      "memories left out).")
    async def search_memory(
            query: Annotated[str, Field(description="what to look for, in words or a file path")],
            scope: Annotated[Literal["spec", "project", "all"], Field(
                description="spec (this spec), project (every spec of the project) or all "
                            "(every project in this GRAPHMEM_HOME)")] = "project",
            kinds: Annotated[list[Kind] | None, Field(description="only these kinds")] = None,
            limit: Annotated[int, _int("how many hits at most", ge=1, le=100)] = 10,
            include_history: Annotated[bool, Field(
                strict=True, description="also return retired and superseded memories, marked")
            ] = False,
            spec_dir: SpecArg = None, project_dir: ProjectArg = None) -> dict[str, Any]:
        notes: list[str] = []

        async def run(m: AsyncMemory) -> list:
            hits = await m.search(query, scope=scope, kinds=kinds, limit=limit,
                                 include_history=include_history)
            notes.extend(getattr(m, "search_notes", []))
            return hits

        hits = await use(spec_dir, project_dir, run)
        out: dict[str, Any] = {"hits": [h.model_dump(mode="json") for h in hits]}
        if notes:  # the graph did not answer: the agent is told, not given fewer hits silently
            out["notes"] = notes
        return out

    @tool(title="Context for a task", annotations=_reads("Context for a task"),
          description="A markdown block for an agent's prompt: the gotchas, patterns, files and "
                      "past-session lessons most relevant to a task, within a token budget; it "
                      "ends with notes when there is more to know (a file given that is neither "
                      "in the project nor named by any memory, the graph did not answer).")
    async def get_context(
            task: Annotated[str, Field(description="the task about to be done")],
            max_tokens: Annotated[int, _int("token budget of the block", ge=MIN_TOKENS,
                                            le=MAX_TOKENS)] = 1500,  # as the API and CLI
            files: Annotated[list[str] | None, Field(
                description="files or folders (relative to the project) being worked on: "
                            "memories anchored to them come first; a folder (src, or . for the "
                            "project) adds its 5 newest")] = None,
            spec_dir: SpecArg = None, project_dir: ProjectArg = None) -> str:
        return await use(spec_dir, project_dir,
                         lambda m: m.context(task, max_tokens=max_tokens, files=files))

    @tool(title="Record a conversation turn", annotations=_writes("Record a conversation turn"),
          description="Append one conversation turn to an episodic session. Without session_id a "
                      "new session is started (workspace = the project) and its id returned: pass "
                      "it back on the next turns, and to end_session when the conversation is over.")
    async def record_turn(
            role: Annotated[Role, Field(description="who spoke: user, assistant, system or tool")],
            content: Annotated[str, Field(description="what was said")],
            session_id: Annotated[str | None, Field(
                description="from a previous record_turn; omit to start a new session")] = None,
            model: Annotated[str | None, Field(description="the model that answered, if any")] = None,
            tokens: Annotated[int | None, _int("tokens this turn used", ge=0)] = None,
            spec_dir: SpecArg = None, project_dir: ProjectArg = None) -> dict[str, Any]:
        async def op(m: AsyncMemory) -> dict[str, Any]:
            if session_id is None:
                # Check the turn the way record_turn will before a session exists, so a refused
                # first turn leaves no empty session behind (the id is a placeholder, never used).
                m.check_turn(role, content, model, tokens)
            sid = session_id if session_id is not None else \
                await m.start_session(model=model, mode="mcp")
            turn_id = await m.record_turn(sid, role, content, model=model, tokens=tokens)
            return {"session_id": sid, "turn_id": turn_id}
        return await use(spec_dir, project_dir, op)

    @tool(title="End a session", annotations=_writes("End a session", True),
          description="Mark an episodic session ended and store its token total; consolidation "
                      "reads only ended sessions. Ending twice keeps the first end.")
    async def end_session(
            session_id: Annotated[str, Field(description="the id record_turn returned")],
            spec_dir: SpecArg = None, project_dir: ProjectArg = None) -> dict[str, Any]:
        return await use(spec_dir, project_dir, lambda m: m.end_session(session_id))

    @tool(title="Recent sessions", annotations=_reads("Recent sessions"),
          description="The most recent episodic sessions of a workspace (default: the project), "
                      "newest first, each with its first user prompt and token total.")
    async def list_sessions(limit: Annotated[int, _int("how many sessions at most", ge=1, le=500)] = 10,
                            workspace: Annotated[str | None, Field(
                                description="workspace folder; default: the project")] = None,
                            spec_dir: SpecArg = None, project_dir: ProjectArg = None) -> dict[str, Any]:
        sessions = await use(spec_dir, project_dir,
                             lambda m: m.list_recent_sessions(workspace, limit=limit))
        return {"sessions": sessions}

    @tool(title="Memory summary", annotations=_reads("Memory summary"),
          description="Counts of sessions, mapped files, patterns and gotchas for a spec, with the "
                      "last three sessions' insights.")
    async def memory_summary(spec_dir: SpecArg = None, project_dir: ProjectArg = None) -> dict[str, Any]:
        return await use(spec_dir, project_dir, lambda m: m.summary())
