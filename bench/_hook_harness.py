"""Claude Code's side of the hook contract, for benches that replay recorded sessions through a
project's hooks (../shared/notes/claude-code-hooks.md says what is played and where it departs).

``HookRunner`` reads ``<project>/.claude/settings.json`` and ``settings.local.json``, matches each
event's handlers, runs each command handler as its own process (its own session, cwd the project,
the event's JSON on stdin), honours timeouts, exit codes and JSON output, and keeps what Claude
would read (``additionalContext`` and plain stdout), blocks, denials, failures and times.
``ClaudeSession`` builds the events' payloads and the transcript for one recorded session.
"""

from __future__ import annotations

import fnmatch
import json
import os
import re
import signal
import subprocess
import tempfile
import threading
import time
import urllib.request
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

EVENTS = {"SessionStart", "SessionEnd", "UserPromptSubmit", "UserPromptExpansion", "PreToolUse",
          "PostToolUse", "PostToolUseFailure", "PostToolBatch", "PermissionRequest",
          "PermissionDenied", "Notification", "Stop", "StopFailure", "SubagentStart",
          "SubagentStop", "PreCompact", "PostCompact", "Setup", "TaskCreated", "TaskCompleted",
          "FileChanged", "CwdChanged", "InstructionsLoaded", "ConfigChange", "WorktreeCreate",
          "WorktreeRemove", "Elicitation", "ElicitationResult", "PostModelSwitch",
          "MessageDisplay"}
TOOL_EVENTS = {"PreToolUse", "PostToolUse", "PostToolUseFailure", "PermissionRequest",
               "PermissionDenied"}
MATCH_FIELD = {**{e: "tool_name" for e in TOOL_EVENTS}, "SessionStart": "source",
               "SessionEnd": "reason", "SubagentStart": "agent_type", "SubagentStop": "agent_type",
               "PreCompact": "trigger", "PostCompact": "trigger"}
TAKES_CONTEXT = {"SessionStart", "UserPromptSubmit", "PreToolUse", "PostToolUse",
                 "PostToolUseFailure", "PostToolBatch", "Stop", "SubagentStart", "SubagentStop"}
PLAIN_CONTEXT = {"SessionStart", "UserPromptSubmit", "UserPromptExpansion", "PostModelSwitch"}
EXIT2_BLOCKS = {"PreToolUse", "UserPromptSubmit", "Stop", "SubagentStop", "PreCompact",
                "PostToolBatch"}
EXIT2_FEEDS = {"PostToolUse", "PostToolUseFailure"}
KNOWN_FIELDS = {"continue", "stopReason", "suppressOutput", "systemMessage", "decision", "reason",
                "hookSpecificOutput"}
NAME_LIST = re.compile(r"^[A-Za-z0-9_\-\s,|]*$")
CONTEXT_LIMIT, CONTEXT_PREVIEW = 10_000, 2_000
MARK = "HOOK_HARNESS_RUN"


class ConfigError(ValueError):
    """A settings file that is not the documented shape (its path and the problem)."""


def read_settings(project: Path) -> tuple[dict[str, list[dict]], bool, list[str]]:
    """The merged ``hooks`` of the project's settings.json and settings.local.json, whether
    ``disableAllHooks`` is set, and notes (unknown events)."""
    hooks: dict[str, list[dict]] = {}
    disabled, notes = False, []
    for name in ("settings.json", "settings.local.json"):
        path = project / ".claude" / name
        if not path.exists():
            continue
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise ConfigError(f"{path}: not JSON: {exc}") from exc
        if not isinstance(data, dict):
            raise ConfigError(f"{path}: the top level must be an object")
        disabled |= data.get("disableAllHooks") is True
        block = data.get("hooks") or {}
        if not isinstance(block, dict):
            raise ConfigError(f"{path}: hooks must be an object of event names")
        for event, groups in block.items():
            if event not in EVENTS:
                notes.append(f"{path.name}: unknown event {event!r}")
            if not isinstance(groups, list):
                raise ConfigError(f"{path}: hooks.{event} must be a list of matcher groups")
            for n, g in enumerate(groups):
                if not isinstance(g, dict) or not isinstance(g.get("hooks"), list):
                    raise ConfigError(f"{path}: hooks.{event}[{n}] needs a 'hooks' list")
                for h in g["hooks"]:
                    if not isinstance(h, dict) or not isinstance(h.get("type"), str):
                        raise ConfigError(f"{path}: hooks.{event}[{n}] has a handler without 'type'")
                    if h["type"] == "command" and not isinstance(h.get("command"), str):
                        raise ConfigError(f"{path}: hooks.{event}[{n}]: a command handler "
                                          "needs a 'command' string")
            hooks.setdefault(event, []).extend(groups)
    return hooks, disabled, notes


def matches(matcher, value) -> bool:
    """Claude Code's matcher rule: everything, a list of exact names, or an unanchored regex."""
    if matcher in (None, "", "*"):
        return True
    value = "" if value is None else str(value)
    if NAME_LIST.match(matcher):
        return value in {n.strip() for n in re.split(r"[|,]", matcher) if n.strip()}
    try:
        return re.search(matcher, value) is not None
    except re.error:
        return False


def _if_allows(rule: str, event: str, payload: dict, project: Path) -> bool:
    """The ``if`` field (permission-rule syntax), approximated as ``Tool`` or ``Tool(glob)``."""
    if event not in TOOL_EVENTS:
        return False
    m = re.fullmatch(r"\s*([\w*]+)\s*(?:\((.*)\))?\s*", rule or "")
    if not m or not fnmatch.fnmatchcase(payload.get("tool_name", ""), m.group(1)):
        return False
    glob = m.group(2)
    if glob is None:
        return True
    inp = payload.get("tool_input") or {}
    if payload.get("tool_name") == "Bash":
        for part in re.split(r"&&|\|\||;|\|", inp.get("command", "")):
            part = re.sub(r"^\s*(\w+=\S*\s+)*", "", part).strip()
            if fnmatch.fnmatchcase(part, glob):
                return True
        return False
    path = inp.get("file_path") or inp.get("path") or ""
    rel = os.path.relpath(path, project) if os.path.isabs(path) else path
    return fnmatch.fnmatchcase(rel, glob) or fnmatch.fnmatchcase(path, glob)


@dataclass
class HandlerRun:
    """One handler's run: its wall time, exit code and what its output meant."""
    key: str
    ms: float
    code: int | None = None
    failure: str | None = None
    context: list[str] = field(default_factory=list)
    blocked: bool = False
    denied: bool = False
    feedback: str = ""
    stopped: bool = False


@dataclass
class EventResult:
    """What Claude Code takes from one event: context, block/deny, and its handlers' runs."""
    event: str
    wait_ms: float = 0.0
    runs: list[HandlerRun] = field(default_factory=list)
    context: list[str] = field(default_factory=list)
    blocked: bool = False
    denied: bool = False

    @property
    def text(self) -> str:
        """The context as one string (each hook's part on its own)."""
        return "\n".join(c for c in self.context if c)


class HookRunner:
    """Runs a project's configured hooks as Claude Code does; keeps per-event times and failures."""

    def __init__(self, project: Path, env: dict | None = None, max_timeout: float = 60.0):
        self.project = Path(project)
        self.env = dict(os.environ if env is None else env)
        self.env["CLAUDE_PROJECT_DIR"] = str(self.project)
        self.mark = f"{MARK}={uuid.uuid4().hex}"  # in every process the hooks start, and theirs
        self.env[MARK] = self.mark.split("=", 1)[1]
        self.max_timeout = max_timeout
        self.hooks: dict[str, list[dict]] = {}
        self.disabled = False
        self.notes: list[str] = []
        self.waits: dict[str, list[float]] = {}     # event -> agent held (ms)
        self.walls: dict[str, list[float]] = {}     # event -> each sync handler's wall (ms)
        self.async_walls: dict[str, list[float]] = {}
        self.failures: list[dict] = []
        self.counts: dict[str, dict[str, int]] = {}  # event -> fired/blocked/denied/handlers
        self._pending: list[threading.Thread] = []
        self._lock = threading.Lock()
        self.reload()

    def reload(self) -> None:
        """Read the settings again (each session is a new Claude Code process)."""
        self.hooks, self.disabled, self.notes = read_settings(self.project)

    def background(self, keep: tuple[str, ...] = ("search-server", "search_server")) -> list[int]:
        """Processes the hooks left running (detached workers carry the run's mark in their
        environment), other than long-lived servers named in ``keep``."""
        out, me, needle = [], os.getpid(), self.mark.encode()
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                if int(pid) == me or needle not in Path(f"/proc/{pid}/environ").read_bytes():
                    continue
                cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
                state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
            except OSError:
                continue
            if state != "Z" and not any(k in cmd for k in keep):
                out.append(int(pid))
        return out

    def settle(self, limit: float) -> float:
        """Wait (up to ``limit`` s) for the hooks' background work, as the time between two real
        sessions would; the seconds waited."""
        t0 = time.perf_counter()
        while self.background() and time.perf_counter() - t0 < limit:
            time.sleep(0.05)
        return time.perf_counter() - t0

    def validate(self) -> list[str]:
        """The notes on the settings (unknown events); raises ``ConfigError`` on a bad shape."""
        self.reload()
        return list(self.notes)

    def configured(self, event: str) -> bool:
        """Whether any handler is configured for ``event``."""
        return not self.disabled and bool(self.hooks.get(event))

    def handlers(self, event: str, payload: dict) -> list[dict]:
        """The handlers that run for this event, matched and deduplicated."""
        if self.disabled:
            return []
        value = payload.get(MATCH_FIELD.get(event, ""), None)
        out, seen = [], set()
        for g in self.hooks.get(event) or []:
            if event in MATCH_FIELD and not matches(g.get("matcher"), value):
                continue
            for h in g["hooks"]:
                if "if" in h and not _if_allows(h["if"], event, payload, self.project):
                    continue
                key = json.dumps([h.get("type"), h.get("command"), h.get("args"), h.get("url")])
                if key not in seen:
                    seen.add(key)
                    out.append(h)
        return out

    def _timeout(self, event: str, h: dict) -> float:
        if event == "SessionEnd":
            ms = os.environ.get("CLAUDE_CODE_SESSIONEND_HOOKS_TIMEOUT_MS")
            biggest = max([float(x.get("timeout") or 0) for g in self.hooks.get("SessionEnd") or []
                           for x in g.get("hooks") or []] or [0])
            budget = float(ms) / 1000 if ms else min(60.0, max(1.5, biggest))
            return min(budget, self.max_timeout)
        default = 30.0 if event == "UserPromptSubmit" else 600.0
        return min(float(h.get("timeout") or default), self.max_timeout)

    def fire(self, event: str, payload: dict) -> EventResult:
        """Run ``event``'s handlers in parallel on ``payload``; what Claude Code takes from them."""
        res = EventResult(event)
        c = self.counts.setdefault(event, {"fired": 0, "handlers": 0, "blocked": 0, "denied": 0})
        c["fired"] += 1
        todo = self.handlers(event, payload)
        if not todo:
            return res
        data = json.dumps(payload, ensure_ascii=False).encode()
        sync = [h for h in todo if not (h.get("async") or h.get("asyncRewake"))]
        for h in todo:
            if h not in sync:
                t = threading.Thread(target=self._background, args=(event, h, data), daemon=True)
                t.start()
                self._pending.append(t)
        t0 = time.perf_counter()
        if len(sync) == 1:
            runs = [self._run(event, sync[0], data)]
        elif sync:
            with ThreadPoolExecutor(len(sync)) as pool:
                runs = list(pool.map(lambda h: self._run(event, h, data), sync))
        else:
            runs = []
        if sync:
            res.wait_ms = (time.perf_counter() - t0) * 1000
            self.waits.setdefault(event, []).append(res.wait_ms)
        c["handlers"] += len(todo)
        for r in runs:
            self.walls.setdefault(event, []).append(r.ms)
            if r.failure:
                self.failures.append({"event": event, "handler": r.key, "code": r.code,
                                      "why": r.failure})
            res.runs.append(r)
            res.context.extend(r.context)
            res.blocked |= r.blocked
            res.denied |= r.denied
            if r.feedback:
                res.context.append(r.feedback)
        if res.blocked and event == "UserPromptSubmit":
            res.context = []
        c["blocked"] += res.blocked
        c["denied"] += res.denied
        return res

    def _background(self, event: str, h: dict, data: bytes) -> None:
        r = self._run(event, h, data)
        with self._lock:
            self.async_walls.setdefault(event, []).append(r.ms)
            if r.failure:
                self.failures.append({"event": event, "handler": r.key, "code": r.code,
                                      "why": r.failure, "async": True})

    def join(self) -> None:
        """Wait for the async handlers still running (at SessionEnd)."""
        pending, self._pending = self._pending, []
        for t in pending:
            t.join(self.max_timeout)

    def _run(self, event: str, h: dict, data: bytes) -> HandlerRun:
        kind = h.get("type")
        key = f"{kind}:{h.get('command') or h.get('url') or ''}"[:120]
        if kind == "http":
            return self._http(event, h, data, key)
        if kind != "command" or h.get("shell") == "powershell":
            return HandlerRun(key, 0.0, failure=f"handler type {kind!r} is not run by the harness")
        env = dict(self.env)
        if event == "SessionStart":
            env["CLAUDE_ENV_FILE"] = str(Path(tempfile.gettempdir()) / f"claude-env-{os.getpid()}")
        if h.get("args") is not None:
            sub = lambda s: str(s).replace("${CLAUDE_PROJECT_DIR}", str(self.project))  # noqa: E731
            argv = [sub(h["command"]), *(sub(a) for a in h["args"])]
        else:
            argv = ["sh", "-c", h["command"]]
        timeout = self._timeout(event, h)
        t0 = time.perf_counter()
        try:
            p = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, cwd=self.project, env=env,
                                 start_new_session=True)
        except OSError as exc:
            return HandlerRun(key, 0.0, code=127, failure=f"not started: {exc}")
        try:
            out, err = p.communicate(data, timeout=timeout)
        except subprocess.TimeoutExpired:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            p.communicate()
            return HandlerRun(key, (time.perf_counter() - t0) * 1000, code=None,
                              failure=f"timed out after {timeout:g} s")
        ms = (time.perf_counter() - t0) * 1000
        return self._interpret(event, key, ms, p.returncode, out.decode("utf-8", "replace"),
                               err.decode("utf-8", "replace"))

    def _http(self, event: str, h: dict, data: bytes, key: str) -> HandlerRun:
        t0 = time.perf_counter()
        req = urllib.request.Request(h.get("url", ""), data=data, method="POST",
                                     headers={"Content-Type": "application/json",
                                              **(h.get("headers") or {})})
        try:
            with urllib.request.urlopen(req, timeout=self._timeout(event, h)) as resp:
                body, status = resp.read().decode("utf-8", "replace"), resp.status
        except Exception as exc:  # any transport or HTTP error is a non-blocking error
            return HandlerRun(key, (time.perf_counter() - t0) * 1000, failure=f"http: {exc}")
        ms = (time.perf_counter() - t0) * 1000
        if not 200 <= status < 300:
            return HandlerRun(key, ms, code=status, failure=f"http status {status}")
        if not body.strip():
            return HandlerRun(key, ms, code=status)
        return self._interpret(event, key, ms, 0, body, "", http=True)

    def _interpret(self, event: str, key: str, ms: float, code: int, out: str, err: str,
                   http: bool = False) -> HandlerRun:
        r = HandlerRun(key, ms, code=code)
        text = out.strip()
        parsed, why = _parse_json(text, event) if text.startswith("{") and text.endswith("}") \
            else (None, None)
        if http and parsed is None:
            r.failure = why or "http reply is not a JSON object"
            return r
        if code not in (0, 2) and parsed is None:
            r.failure = f"exit {code}: {err.strip()[:200]}"
            return r
        if code == 2 and parsed is None:
            if event in EXIT2_BLOCKS:
                r.blocked = event != "PreToolUse"
                r.denied = event == "PreToolUse"
            elif event in EXIT2_FEEDS:
                r.feedback = err.strip()
            else:
                r.failure = f"exit 2 on {event}: {err.strip()[:200]}"
            return r
        if why:
            r.failure = why
            return r
        if parsed is None:
            if text and event in PLAIN_CONTEXT:
                r.context.append(_cap(text))
            return r
        if parsed == "plain":
            if event in PLAIN_CONTEXT:
                r.context.append(_cap(text))
            return r
        r.stopped = parsed.get("continue") is False
        spec = parsed.get("hookSpecificOutput") or {}
        ctx = spec.get("additionalContext")
        if ctx and event in TAKES_CONTEXT:
            r.context.append(_cap(ctx))
        if parsed.get("decision") == "block" and event in EXIT2_BLOCKS | {"PostToolUse"}:
            r.blocked = True
        if event == "PreToolUse" and spec.get("permissionDecision") == "deny":
            r.denied = True
        return r

    def report(self) -> dict:
        """Per event: fired, handlers run, wait/wall p50/p95 (ms), blocks, denials, failures."""
        from _common import pct

        out = {}
        for event, c in sorted(self.counts.items()):
            w, a = self.walls.get(event, []), self.async_walls.get(event, [])
            out[event] = {**c, "failures": sum(1 for f in self.failures if f["event"] == event),
                          "wait_p50": pct(self.waits.get(event, []), 50),
                          "wait_p95": pct(self.waits.get(event, []), 95),
                          "wall_p50": pct(w, 50), "wall_p95": pct(w, 95), "async_n": len(a),
                          "async_p50": pct(a, 50), "async_p95": pct(a, 95)}
        return out


def _parse_json(text: str, event: str):
    """(object, None), ("plain", None) for JSON lines setting no known field, or (None, why)."""
    try:
        obj = json.loads(text)
    except ValueError:
        try:
            values = [json.loads(x) for x in text.splitlines() if x.strip()]
        except ValueError as exc:
            return None, f"stdout is not valid JSON: {exc}"
        if any(isinstance(v, dict) and KNOWN_FIELDS & set(v) for v in values):
            return None, "stdout holds several JSON values"
        return "plain", None
    if not isinstance(obj, dict):
        return None, "stdout JSON is not an object"
    types = {"continue": bool, "stopReason": str, "suppressOutput": bool, "systemMessage": str,
             "decision": str, "reason": str, "hookSpecificOutput": dict}
    for k, t in types.items():
        if k in obj and not isinstance(obj[k], t):
            return None, f"JSON field {k} is not a {t.__name__}"
    spec = obj.get("hookSpecificOutput")
    if spec is not None:
        if spec.get("hookEventName") != event:
            return None, f"hookSpecificOutput.hookEventName is {spec.get('hookEventName')!r}, " \
                         f"not {event!r}"
        if "additionalContext" in spec and not isinstance(spec["additionalContext"], str):
            return None, "hookSpecificOutput.additionalContext is not a string"
    return obj, None


def _cap(text: str) -> str:
    """Claude Code's treatment of a context over 10,000 characters: a file and a preview."""
    if len(text) <= CONTEXT_LIMIT:
        return text
    fd, path = tempfile.mkstemp(prefix="hook-output-", suffix=".txt")
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)
    return f"[output saved to {path}]\n{text[:CONTEXT_PREVIEW]}"


# ---- the Claude Code side of one recorded session -------------------------------------------

TOOL_NAMES = {"Task": "Agent", "Delete": "Bash"}
ERRORS = {"Bash": "Exit code 1", "Read": "File does not exist.",
          "Edit": "String to replace not found in file."}


class ClaudeSession:
    """One Claude Code session's events, payloads and transcript, as the notes describe."""

    def __init__(self, runner: HookRunner, data_id: str, transcripts: Path, model: str = "claude"):
        self.runner, self.project = runner, runner.project
        self.id = str(uuid.uuid5(uuid.NAMESPACE_URL, f"codemem:{data_id}"))
        folder = transcripts / re.sub(r"[^A-Za-z0-9]", "-", str(self.project))
        folder.mkdir(parents=True, exist_ok=True)
        self.transcript = folder / f"{self.id}.jsonl"
        self.model, self.prompt_id, self.parent, self.steps = model, None, None, 0
        self.results: list[EventResult] = []

    def _common(self, event: str, mode: bool = True) -> dict:
        out = {"session_id": self.id, "transcript_path": str(self.transcript),
               "cwd": str(self.project), "hook_event_name": event}
        if mode:
            out["permission_mode"] = "default"
        if self.prompt_id:
            out["prompt_id"] = self.prompt_id
        return out

    def _line(self, kind: str, message: dict, **extra) -> None:
        u = str(uuid.uuid4())
        row = {"parentUuid": self.parent, "isSidechain": False, "userType": "external",
               "cwd": str(self.project), "sessionId": self.id, "version": "2.0.0",
               "gitBranch": "main", "type": kind, "message": message, "uuid": u,
               "timestamp": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), **extra}
        with self.transcript.open("a", encoding="utf-8") as f:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
        self.parent = u

    def fire(self, event: str, payload: dict) -> EventResult:
        res = self.runner.fire(event, payload)
        self.results.append(res)
        return res

    def start(self, source: str = "startup") -> EventResult:
        """SessionStart (the settings are read again: a new Claude Code process)."""
        self.runner.reload()
        return self.fire("SessionStart", {**self._common("SessionStart", mode=False),
                                          "source": source, "model": self.model})

    def prompt(self, text: str) -> EventResult:
        """UserPromptSubmit, then the prompt's transcript line unless a hook blocked it."""
        res = self.fire("UserPromptSubmit", {**self._common("UserPromptSubmit"), "prompt": text})
        if not res.blocked:
            self._line("user", {"role": "user", "content": text})
        self.prompt_id = str(uuid.uuid4())
        return res

    def tool(self, step: dict) -> None:
        """One recorded step: PreToolUse, Subagent events, then PostToolUse or its failure."""
        self.steps += 1
        name, inp = tool_call(step, self.project)
        use_id = f"toolu_{uuid.uuid5(uuid.NAMESPACE_URL, f'{self.id}:{self.steps}').hex[:24]}"
        self._line("assistant", {"role": "assistant", "model": self.model, "stop_reason": "tool_use",
                                 "content": [{"type": "tool_use", "id": use_id, "name": name,
                                              "input": inp}]})
        base = {"tool_name": name, "tool_input": inp, "tool_use_id": use_id}
        pre = self.fire("PreToolUse", {**self._common("PreToolUse"), **base})
        if pre.denied:
            return
        agent = f"agent-{self.steps}"
        if name == "Agent":
            self.fire("SubagentStart", {**self._common("SubagentStart"), "agent_id": agent,
                                        "agent_type": "general-purpose"})
            self.fire("SubagentStop", {**self._common("SubagentStop"), "agent_id": agent,
                                       "agent_type": "general-purpose",
                                       "agent_transcript_path": str(self.transcript),
                                       "last_assistant_message": "", "stop_hook_active": False})
        ok = step.get("status") != "error"
        response = tool_response(name, inp, self.project) if ok else ERRORS.get(name, "Tool failed.")
        self._line("user", {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": use_id, "is_error": not ok,
             "content": response if isinstance(response, str) else ""}]},
            toolUseResult=response)
        if ok:
            self.fire("PostToolUse", {**self._common("PostToolUse"), **base,
                                      "tool_response": response, "duration_ms": 0})
        else:
            self.fire("PostToolUseFailure", {**self._common("PostToolUseFailure"), **base,
                                             "error": response, "is_interrupt": False,
                                             "duration_ms": 0})
        if self.runner.configured("PostToolBatch"):
            self.fire("PostToolBatch", {**self._common("PostToolBatch"), "tool_calls": [
                {**base, "tool_response": response if ok else {"error": response}}]})

    def stop(self) -> EventResult:
        """Stop at the end of a turn."""
        return self.fire("Stop", {**self._common("Stop"), "stop_hook_active": False,
                                  "last_assistant_message": "", "background_tasks": [],
                                  "session_crons": []})

    def end(self, reason: str = "other") -> EventResult:
        """SessionEnd; the async handlers still running are waited for."""
        res = self.fire("SessionEnd", {**self._common("SessionEnd", mode=False), "reason": reason})
        self.runner.join()
        return res


def tool_call(step: dict, project: Path) -> tuple[str, dict]:
    """A recorded step as Claude Code's tool name and ``tool_input`` (absolute paths)."""
    action, d = step.get("action", ""), step.get("detail") or {}
    absolute = lambda p: str(project / p) if p and not os.path.isabs(p) else p  # noqa: E731
    if action == "Bash":
        return "Bash", {"command": d.get("command", "")}
    if action == "Read":
        return "Read", {"file_path": absolute(d.get("path", ""))}
    if action == "Edit":
        return "Edit", {"file_path": absolute(d.get("path", "")), "old_string": "",
                        "new_string": "", "replace_all": False}
    if action == "Write":
        return "Write", {"file_path": absolute(d.get("path", "")), "content": ""}
    if action in ("Grep", "Glob"):
        inp = {"pattern": d.get("pattern") or d.get("query") or ""}
        if d.get("path"):
            inp["path"] = absolute(d["path"])
        return action, inp
    if action == "Task":
        desc = d.get("description") or d.get("prompt") or ""
        return "Agent", {"description": desc, "prompt": desc, "subagent_type": "general-purpose"}
    if action == "Delete":
        return "Bash", {"command": f"rm {d.get('path', '')}"}
    return action or "Unknown", dict(d)


def tool_response(name: str, inp: dict, project: Path) -> dict:
    """A minimal plausible ``tool_response`` (the data keeps no tool output)."""
    path = inp.get("file_path", "")
    if name == "Read":
        try:
            lines = Path(path).read_text(encoding="utf-8", errors="replace").splitlines()
        except OSError:
            lines = []
        return {"type": "text", "file": {"filePath": path, "content": "\n".join(lines[:2000]),
                                         "numLines": min(len(lines), 2000), "startLine": 1,
                                         "totalLines": len(lines)}}
    if name == "Edit":
        return {"filePath": path, "oldString": "", "newString": "", "originalFile": "",
                "structuredPatch": [], "userModified": False, "replaceAll": False}
    if name == "Write":
        return {"type": "update" if Path(path).exists() else "create", "filePath": path,
                "content": "", "structuredPatch": [], "success": True}
    if name == "Grep":
        return {"mode": "files_with_matches", "filenames": [], "numFiles": 0}
    if name == "Glob":
        return {"filenames": [], "durationMs": 0, "numFiles": 0, "truncated": False}
    if name == "Agent":
        return {"status": "completed", "prompt": inp.get("prompt", ""),
                "content": [{"type": "text", "text": ""}], "totalDurationMs": 0,
                "totalTokens": 0, "totalToolUseCount": 0}
    return {"stdout": "", "stderr": "", "interrupted": False, "isImage": False,
            "noOutputExpected": False}
