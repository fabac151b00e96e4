"""Each agent's hook protocol as data: its events, what graphmem does on each, its settings
file, and how an answer is written. Standard library only (the hook process imports it).

An ``Agent`` maps the agent's event names to graphmem's *actions*:

    brief     the session's start: a short briefing of current memories
    prompt    context for the user's prompt (and the prompt is captured)
    file      before a file is read or edited: what is known about it
    capture   after a tool ran (or failed): one spool line
    digest    the end of a turn or session, or a compaction: the spool becomes memories
    capture_file  capture, then (after a file was read or edited) what is known about it: for
              agents whose only file hook that takes context runs after the tool (Gemini CLI)

Tool names are mapped to Claude Code's (``Read``, ``Edit``, ``Write``, ``Bash``) and a file's
path to ``tool_input.file_path``, so the spool and the digest read one vocabulary.
"""

from __future__ import annotations

import json
TYPE_CHECKING = False  # typing costs a hook process ~3 ms to import; mypy reads the names
if TYPE_CHECKING:
    from typing import Any

FILE_TOOLS = "Read|Edit|Write|MultiEdit"


class Hook:
    """One event graphmem hooks: the action, the matcher and the timeout (seconds)."""

    __slots__ = ("event", "action", "matcher", "timeout")

    def __init__(self, event: str, action: str, matcher: str | None = None, timeout: int = 10):
        self.event, self.action, self.matcher, self.timeout = event, action, matcher, timeout


class Agent:
    """An agent's hook protocol (plain classes: a dataclass costs a hook ~10 ms of imports)."""

    def __init__(self, name: str, settings: str, hooks: tuple[Hook, ...],
                 context_events: frozenset[str] = frozenset(),
                 end_events: frozenset[str] = frozenset(), tools: dict[str, str] | None = None,
                 timeout_unit: int = 1):
        self.name = name
        self.settings = settings  # the settings file, relative to the project (or to ~)
        self.hooks = hooks
        self.context_events = context_events
        self.end_events = end_events
        self.tools = tools or {}  # the agent's tool names -> Claude Code's
        self.timeout_unit = timeout_unit  # settings' timeout unit per second (1000: milliseconds)

    def action(self, event: str) -> str | None:
        """What graphmem does on ``event`` (None: an event graphmem does not hook)."""
        return next((h.action for h in self.hooks if h.event == event), None)

    def answer(self, event: str, text: str) -> str:
        """The stdout that gives ``text`` to the model on ``event`` ('' when nothing to add)."""
        if not text or event not in self.context_events:
            return ""
        return json.dumps({"hookSpecificOutput": {"hookEventName": event,
                                                  "additionalContext": text}},
                          ensure_ascii=False)

    def ends_session(self, event: str) -> bool:
        """Whether ``event`` ends the agent's session (its spool is then closed)."""
        return event in self.end_events

    def fields(self, payload: dict[str, Any]) -> dict[str, Any]:
        """The event's fields under graphmem's names (``tool``, ``input``, ``output``, ``error``)."""
        tool = payload.get("tool_name")
        tool = self.tools.get(tool, tool) if isinstance(tool, str) else tool
        tool_input = payload.get("tool_input")
        if isinstance(tool_input, dict) and not isinstance(tool_input.get("file_path"), str):
            path = next((tool_input[k] for k in ("absolute_path", "path")
                         if isinstance(tool_input.get(k), str)), None)
            if path is not None and tool in ("Read", "Edit", "Write", "MultiEdit"):
                tool_input = {**tool_input, "file_path": path}
        output, error = payload.get("tool_response"), payload.get("error")
        if error is None and isinstance(output, dict) and output.get("error"):
            error = output["error"]  # Gemini CLI: a failed tool's response carries its error
            error = error.get("message", error) if isinstance(error, dict) else error
        return {"session": payload.get("session_id"), "prompt": payload.get("prompt"),
                "tool": tool, "input": tool_input, "output": output, "error": error,
                "source": payload.get("source") or payload.get("reason")}


# https://code.claude.com/docs/en/hooks: settings {"hooks": {Event: [{matcher, hooks: [...]}]}}
CLAUDE_CODE = Agent(
    name="claude-code",
    settings=".claude/settings.json",
    hooks=(
        Hook("SessionStart", "brief", "startup|resume|clear|compact", 10),
        Hook("UserPromptSubmit", "prompt", None, 10),
        Hook("PreToolUse", "file", FILE_TOOLS, 10),
        Hook("PostToolUse", "capture", "*", 10),
        Hook("PostToolUseFailure", "capture", "*", 10),
        Hook("PreCompact", "digest", None, 10),
        Hook("Stop", "digest", None, 10),
        Hook("SessionEnd", "digest", None, 10),
    ),
    context_events=frozenset({"SessionStart", "UserPromptSubmit", "PreToolUse"}),
    end_events=frozenset({"SessionEnd"}),
)

# https://geminicli.com/docs/hooks/reference: the same settings shape in .gemini/settings.json,
# timeouts in milliseconds; context on SessionStart, BeforeAgent and AfterTool (appended to the
# tool's result: BeforeTool takes none); SessionEnd is not waited for.
GEMINI_CLI = Agent(
    name="gemini-cli",
    settings=".gemini/settings.json",
    hooks=(
        Hook("SessionStart", "brief", None, 10),
        Hook("BeforeAgent", "prompt", None, 10),
        Hook("AfterTool", "capture_file", ".*", 10),
        Hook("AfterAgent", "digest", None, 10),
        Hook("PreCompress", "digest", None, 10),
        Hook("SessionEnd", "digest", None, 10),
    ),
    context_events=frozenset({"SessionStart", "BeforeAgent", "AfterTool"}),
    end_events=frozenset({"SessionEnd"}),
    tools={"read_file": "Read", "write_file": "Write", "replace": "Edit",
           "run_shell_command": "Bash"},
    timeout_unit=1000,
)

AGENTS: dict[str, Agent] = {a.name: a for a in (CLAUDE_CODE, GEMINI_CLI)}


def get_agent(name: str) -> Agent:
    """The agent called ``name`` (``ValueError`` listing the known ones)."""
    agent = AGENTS.get(name)
    if agent is None:
        raise ValueError(f"agent: must be one of {', '.join(sorted(AGENTS))}, got {name!r}")
    return agent
