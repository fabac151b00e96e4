"""``graphmem hook <agent> <Event>``: the process an agent starts for each event.

It reads the event's JSON on stdin, does one cheap thing (``hooks/agents.py`` says which) and exits 0,
printing the agent's JSON only when there is something to tell. It never blocks the agent: an
internal failure, a missing server or a passed deadline prints one ``graphmem hook: ...`` line
on stderr and exits 0 with nothing on stdout. ``GRAPHMEM_HOOKS=off`` turns every hook into a
no-op. Standard library only, plus graphmem's stdlib modules (redaction, the search client),
and not even ``pathlib`` or ``typing`` on the way to a capture: the process is started once per
event, so every import is paid again (``bench/hook_latency.py`` measures it).
"""

from __future__ import annotations

import json
import os
import signal
import sys
import time

from graphmem.hooks import spool
from graphmem.hooks.agents import Agent, get_agent

TYPE_CHECKING = False  # typing costs a hook process ~3 ms to import; mypy reads the names
if TYPE_CHECKING:
    from typing import Any

MAX_STDIN = 8 << 20  # bytes of event JSON read at most
# Seconds a hook may take before it gives up quietly (under the timeouts it installs with).
# A capture or a digest start takes milliseconds; their deadline only bounds a stuck disk.
DEADLINES = {"brief": 6.0, "prompt": 4.0, "file": 3.0, "capture": 8.0, "digest": 8.0,
             "capture_file": 8.0}
# Seconds waited for a server starting up. Only a briefing with no usable cache waits (a first
# session, or the memory or a file it names changed since it was kept, ``hooks/brief_cache.py``); a
# prompt or a file answers nothing rather than keep the agent waiting.
WAIT_FOR_SERVER = {"brief": 1.5, "prompt": 0.0, "file": 0.0}
IN_PROCESS_DEADLINE = 8.0  # with the search server off (under the installed timeouts)
AFTER: list = []  # what the hook does once its answer is written (a server's start, see ``_ask``)


class Deadline(Exception):
    """The hook ran out of time."""


def disabled(env: dict[str, str] | None = None) -> bool:
    """Whether ``GRAPHMEM_HOOKS`` turns the hooks off."""
    value = (os.environ if env is None else env).get("GRAPHMEM_HOOKS", "").strip().lower()
    return value in ("off", "0", "false", "no", "disabled")


def main(argv: list[str]) -> int:
    """Run one hook; always exits 0 (see the module docstring)."""
    if len(argv) != 2:
        print("usage: graphmem hook AGENT EVENT  (the event's JSON on stdin)", file=sys.stderr)
        return 2
    if disabled():
        return 0
    name, event = argv
    try:
        agent = get_agent(name)
        action = agent.action(event)
        if action is None:
            return 0  # an event graphmem does not hook: nothing to do
        _arm(DEADLINES[action])
        payload = _read_payload()
        text = ACTIONS[action](agent, event, payload)
        signal.setitimer(signal.ITIMER_REAL, 0)
        out = agent.answer(event, text or "")
        if out:
            sys.stdout.write(out + "\n")
            sys.stdout.flush()
        for then in AFTER:  # a server started for the next event, once this one is answered
            then()
    except Deadline:
        _log(name, event, "gave up at its deadline")
    except Exception as exc:
        _log(name, event, f"{type(exc).__name__}: {exc}")
    return 0


def _log(agent: str, event: str, message: str) -> None:
    print(f"graphmem hook {agent} {event}: {' '.join(message.split())[:300]}", file=sys.stderr)


def _arm(seconds: float) -> None:
    def expire(_sig, _frame):
        raise Deadline()

    signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)


def _read_payload() -> dict[str, Any]:
    raw = sys.stdin.buffer.read(MAX_STDIN + 1)
    if len(raw) > MAX_STDIN:
        raise ValueError(f"stdin: the event's JSON is over {MAX_STDIN} bytes")
    data = json.loads(raw or b"{}")
    if not isinstance(data, dict):
        raise ValueError("stdin: must be a JSON object")
    return data


def project_of(payload: dict[str, Any]) -> str:
    """The project root: ``CLAUDE_PROJECT_DIR`` (the agent's project root), else the event's
    ``cwd`` up to its work tree."""
    given = os.environ.get("CLAUDE_PROJECT_DIR")
    start = given or payload.get("cwd") or os.getcwd()
    if not isinstance(start, str) or not os.path.isabs(start) or not os.path.isdir(start):
        raise ValueError(f"cwd: must be an existing absolute folder, got {str(start)[:80]!r}")
    real = os.path.realpath(start)
    if given:
        return real
    from pathlib import Path

    from graphmem.identity import enclosing

    found = enclosing(Path(real))
    return str(found) if found else real


# ---- actions ----------------------------------------------------------------------------------
def _capture(agent: Agent, event: str, payload: dict[str, Any]) -> str:
    f = agent.fields(payload)
    project = project_of(payload)
    rec: dict[str, Any] = {"kind": "fail" if f["error"] is not None else "tool", "tool": f["tool"],
                           "input": _input_of(f["input"], project)}
    if f["error"] is not None:
        rec["error"] = str(f["error"])[:500]
    elif isinstance(f["output"], dict) and f["tool"] == "Bash":
        rec["output"] = {k: str(f["output"].get(k, ""))[-500:] for k in ("stdout", "stderr")
                         if f["output"].get(k)}
        if f["output"].get("interrupted"):
            rec["kind"] = "fail"
    spool.append(project, f["session"], rec)
    return ""


def _input_of(value: Any, project: str) -> Any:
    """The tool input kept: paths made relative to the project, edited text left out."""
    if not isinstance(value, dict):
        return value
    out = {k: v for k, v in value.items()
           if k not in ("content", "old_string", "new_string", "edits", "prompt")}
    path = value.get("file_path") or value.get("path")
    if isinstance(path, str):
        out["file_path"] = relative(path, project)
        out.pop("path", None)
    return out


def relative(path: str, project: str) -> str:
    """``path`` relative to the project when inside it (POSIX), else as given."""
    if not os.path.isabs(path):
        return path
    full, root = os.path.realpath(path), project.rstrip("/") or "/"
    if full == root:
        return "."
    prefix = root if root.endswith("/") else root + "/"
    return full[len(prefix):] if full.startswith(prefix) else path


def _prompt(agent: Agent, event: str, payload: dict[str, Any]) -> str:
    f = agent.fields(payload)
    project = project_of(payload)
    if isinstance(f["prompt"], str) and f["prompt"].strip():
        spool.append(project, f["session"], {"kind": "prompt", "prompt": f["prompt"]})
        text = spool.scrub(f["prompt"], 2000)  # never a private span or a secret to the search
        if text.strip():
            return _ask("prompt", project, {"prompt": text})
    return ""


def _brief(agent: Agent, event: str, payload: dict[str, Any]) -> str:
    return _ask("brief", project_of(payload), {})


def _file(agent: Agent, event: str, payload: dict[str, Any]) -> str:
    f = agent.fields(payload)
    project = project_of(payload)
    path = (f["input"] or {}).get("file_path") if isinstance(f["input"], dict) else None
    if not isinstance(path, str) or not path:
        return ""
    rel = relative(path, project)
    if os.path.isabs(rel):
        return ""  # outside the project
    told = os.path.join(spool.spool_dir(project), f"{spool.session_name(f['session'])}.told")
    try:
        with open(told, encoding="utf-8") as fh:
            seen = fh.read().splitlines()
        if rel in seen:
            return ""  # said once this session already
    except FileNotFoundError:
        pass
    text = _ask("file", project, {"path": rel})
    if text:
        fd = os.open(told, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, (rel + "\n").encode("utf-8"))
        finally:
            os.close(fd)
    return text


def _digest(agent: Agent, event: str, payload: dict[str, Any]) -> str:
    """Mark the end (SessionEnd), then start the project's digest worker unless one runs: a
    running worker reads every spool again before it exits (``digest.py``)."""
    from graphmem.hooks.digest_state import pending, start_worker, worker_running

    f = agent.fields(payload)
    project = project_of(payload)
    if agent.ends_session(event):
        spool.append(project, f["session"], {"kind": "end"})
    if pending(project, f["session"]) and not worker_running(project):
        start_worker(project)
    return ""


def _capture_file(agent: Agent, event: str, payload: dict[str, Any]) -> str:
    """Capture the step; after a file tool, also what is known about the file."""
    _capture(agent, event, payload)
    if agent.fields(payload)["tool"] in ("Read", "Edit", "Write", "MultiEdit"):
        return _file(agent, event, payload)
    return ""


ACTIONS = {"capture": _capture, "prompt": _prompt, "brief": _brief, "file": _file,
           "digest": _digest, "capture_file": _capture_file}


# ---- asking the warm search server -----------------------------------------------------------
def _ask(action: str, project: str, fields: dict[str, Any]) -> str:
    """The text for ``action`` from the warm server, or computed here when the server is off.

    No server answering: one is started in the background, never waited for, and the event
    answers nothing, except a briefing: the one kept on disk when it is still current
    (``hooks/brief_cache.py``), else the new server's, waited for up to ``WAIT_FOR_SERVER``. A
    server whose graphmem changed on disk (an upgrade) answers ``wrong_server`` and exits: the
    one started replaces it as soon as it is gone (``--replace``)."""
    from graphmem.cli.search_client import ask, client_config, spawn

    req = {"op": "hook", "action": action, "project_dir": project, **fields}
    cfg = client_config(cwd=project)
    if cfg is None or cfg.mode == "off":
        _arm(IN_PROCESS_DEADLINE)  # no server by choice: the models load here, slowly
        return _in_process(req)

    def current() -> tuple[dict[str, Any] | None, bool]:
        got = ask(cfg, req, timeout=DEADLINES[action])
        wrong = got is not None and bool(got.get("wrong_server"))
        return (None if wrong else got), wrong

    got, wrong = current()
    if got is None:
        wait = WAIT_FOR_SERVER.get(action, 0.0)
        kept = _kept_brief(project, cfg) if action == "brief" else None
        if kept is not None or not wait:
            # started once the answer is out: its loading does not slow this hook down
            AFTER.append(lambda: spawn(cfg, replace=wrong))
            return kept or ""
        started = spawn(cfg, replace=wrong)  # None: one is loading, or failed lately
        until = time.monotonic() + wait
        while got is None and time.monotonic() < until:
            time.sleep(0.1)
            got, again = current()
            if again and started is None:
                started = spawn(cfg, replace=True)
    if got is None:
        return ""  # no server yet: quiet this time, warm for the next event
    if got.get("internal_error"):
        raise RuntimeError(got["internal_error"])
    if "error" in got:
        raise RuntimeError(got["error"])
    return got.get("context") or ""


def _kept_brief(project: str, cfg: Any) -> str | None:
    """The briefing kept on disk when still current, else None (a file that is not a cache
    of ours is said in one log line, and ignored)."""
    from graphmem.hooks.brief_cache import BadCache, load

    try:
        return load(project, cfg.key, cfg.home)
    except BadCache as exc:
        print(f"graphmem hook: briefing cache ignored: {exc}", file=sys.stderr)
        return None


def _in_process(req: dict[str, Any]) -> str:
    from graphmem import _sync
    from graphmem.facade.async_memory import AsyncMemory
    from graphmem.hooks.agent_context import answer

    mem = AsyncMemory(None, req["project_dir"])

    async def go() -> str:
        try:
            return await answer(mem, req)
        finally:
            await mem.aclose()

    return _sync.run(go())
