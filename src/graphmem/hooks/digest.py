"""A session's spool turned into memories, with no LLM (the worker the Stop hooks start).

    python -m graphmem.hooks.digest PROJECT

What it writes to the project's own memory (``<project>/.graphmem/memory``):

- an episodic session: every prompt as a user turn (so any prompt is found again);
- one ``session_insights/session_NNN.json`` per agent session, rewritten as it grows: the task
  (the first prompt), the files edited (``changed_files``, and each as a file understood), the
  commands that passed (``what_worked``), those that failed (``what_failed``), and each failure
  followed by a passing run of the same command as a gotcha candidate;
- the codebase map: a file edited is anchored to its code with the tasks it was edited for
  (a purpose someone wrote is never replaced).

With ``GRAPHMEM_REVIEW=hold`` the insight's and the map's new memories are written pending review
(``graphmem review``), hidden until a person accepts them.

One worker per project at a time (``digest.lock`` beside the spools): it digests every session
with unread lines, from the offset the last run reached, until none is left, so a Stop per turn,
parallel sessions and subagents lose and duplicate nothing and start one process, not one each.
The writes are idempotent (the same insight number, a map merge), so a run killed half-way is
redone safely; the prompts, appended as turns, are counted first (``RECORDING`` in the state),
so a run killed after appending them and before saving its offset does not append them again.
The SessionEnd hook's ``end`` line ends the episodic session; only then, and only when an LLM is
configured (``providers.llm``), the LLM writes the session's summary. A
session resumed after its end (the agent's ``--resume`` keeps its id) goes on in a new episodic
session. A session whose digest fails is logged and left for the next worker; the others are
digested.
"""

from __future__ import annotations

import os
import re
import sys
import time
from pathlib import Path
from typing import Any

from graphmem.hooks import spool
from graphmem.hooks.digest_state import load_state, save_state

EDIT_TOOLS = ("Edit", "Write", "MultiEdit", "NotebookEdit")
KEEP = 5  # commands kept per list in the insight
CMD_CHARS = 120  # characters of a command kept
CHECK = re.compile(r"\b(?:test|tests|pytest|unittest|tox|nox|lint|linter|vet|build|compile|check|"
                   r"typecheck|tsc|mypy|pyright|ruff|flake8|pylint|eslint|prettier|fmt|clippy|"
                   r"cargo|gradle|mvn|jest|vitest|mocha|rspec|phpunit|ctest|bazel)\b|\bmake\b")
TASKS_PER_FILE = 3
MAP_TAG = "edited for: "
# Steps (each command, each edit) as episode steps: off, the insight already names the files
# and commands, and a step per line cost a context more tokens than it told.
RECORD_STEPS = False
_ENV = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=\S*$")


def command_key(command: str) -> str:
    """What makes two runs "the same command": the last ``&&`` part's first two words,
    leading ``VAR=value`` left out (``pytest tests/a.py -x`` and ``pytest tests/a.py`` match)."""
    last = command.split("&&")[-1].split(";")[-1]
    words = [w for w in last.split() if not _ENV.match(w)]
    return " ".join(words[:2])


def _facts(state: dict[str, Any]) -> dict[str, Any]:
    f = state.setdefault("facts", {})
    for key in ("edited", "failed", "passed", "fixes"):
        f.setdefault(key, [])
    f.setdefault("open", {})
    f.setdefault("task", None)
    return f


def substantive(prompt: str) -> bool:
    """Whether a prompt can name the session's task: a few words, not a slash command, a
    greeting or a pasted tool message."""
    words = prompt.split()
    return len(words) >= 3 and not prompt.lstrip().startswith(("/", "<"))


def is_check(command: str) -> bool:
    """Whether a command verifies the work (tests, lint, build, type checks): the ones whose
    failure and fix are worth remembering; ``git status`` or ``ls`` are not. Only the first
    words of each ``&&``/``;``/``|`` part count (``git commit -m "add tests"`` is no check)."""
    for part in re.split(r"&&|\|\||;|\|", command):
        words = [w for w in part.split() if not _ENV.match(w)]
        if words and words[0] == "cd":
            continue
        if CHECK.search(" ".join(words[:3])):
            return True
    return False


def _short(command: str) -> str:
    text = " ".join(command.split())
    return text if len(text) <= CMD_CHARS else text[:CMD_CHARS - 1] + "\u2026"


def learn(facts: dict[str, Any], records: list[dict]) -> tuple[list[str], list[dict]]:
    """Fold spool records into ``facts``; the new prompts and the steps to record."""
    prompts: list[str] = []
    steps: list[dict] = []
    for rec in records:
        kind, tool = rec.get("kind"), rec.get("tool")
        inp: dict = got if isinstance(got := rec.get("input"), dict) else {}
        if kind == "prompt" and isinstance(rec.get("prompt"), str) and rec["prompt"].strip():
            text = " ".join(rec["prompt"].split())
            prompts.append(rec["prompt"])
            facts.setdefault("prompts", [])
            if len(facts["prompts"]) < 8:
                facts["prompts"].append(text[:300])
            if not facts["task"] and substantive(text):
                facts["task"] = text[:300]
            continue
        if kind not in ("tool", "fail"):
            continue
        if tool in EDIT_TOOLS and isinstance(inp.get("file_path"), str):
            path = inp["file_path"]
            if kind == "tool" and not os.path.isabs(path) and path not in facts["edited"]:
                facts["edited"].append(path)
            steps.append({"name": tool, "status": "ok" if kind == "tool" else "error",
                          "payload": {"file_path": path}})
        elif tool == "Bash" and isinstance(inp.get("command"), str) and inp["command"].strip():
            cmd = _short(inp["command"])
            steps.append({"name": "Bash", "status": "ok" if kind == "tool" else "error",
                          "payload": {"command": cmd}})
            if not is_check(cmd):
                continue
            key = command_key(cmd)
            if kind == "fail":
                error = " ".join(str(rec.get("error") or "failed").split())[:80]
                facts["failed"].append(f"`{cmd}` ({error})")
                facts["open"][key] = [cmd, error, len(facts["edited"])]
            else:
                facts["passed"] = [c for c in facts["passed"] if command_key(c.strip("`")) != key]
                facts["passed"].append(f"`{cmd}`")
                if key in facts["open"]:
                    was, error, edits = facts["open"].pop(key)
                    changed = facts["edited"][edits:][:3]
                    if cmd == was and not changed:
                        continue  # failed, then passed as it was: a flake, not a lesson
                    how = f"it passed as `{cmd}`" if cmd != was else "it passed"
                    if changed:
                        how += " after editing " + ", ".join(changed)
                    facts["fixes"].append(f"`{was}` failed ({error}); {how}")
    for key in ("failed", "passed", "fixes"):
        facts[key] = list(dict.fromkeys(facts[key]))[-KEEP:]
    return prompts, steps


def learned(facts: dict[str, Any]) -> bool:
    """Whether the session taught something worth an insight: files edited, or checks that
    failed (a prompt alone is kept as a turn, and a passing test run alone says little)."""
    return bool(facts["edited"] or facts["fixes"] or facts["failed"])


def insight_of(facts: dict[str, Any], agent_session: str) -> dict[str, Any]:
    """The session's insight, in the reference's keys."""
    task = facts["task"]
    worked = ["Checks that passed: " + "; ".join(facts["passed"])] if facts["passed"] else []
    failed = ["Checks that failed: " + "; ".join(facts["failed"])] if facts["failed"] else []
    files = {p: MAP_TAG + task[:200] for p in facts["edited"]} if task else {}
    return {"subtasks_completed": [task] if task else [],
            "discoveries": {"files_understood": files, "gotchas_encountered": facts["fixes"]},
            "what_worked": worked, "what_failed": failed,
            **({"changed_files": facts["edited"]} if facts["edited"] and not task else {})}


def _purpose(old: str | None, task: str) -> str | None:
    """The map entry for a file edited for ``task`` (None: leave a written purpose alone)."""
    if old and not old.startswith(MAP_TAG):
        return None
    tasks = old[len(MAP_TAG):].split(" | ") if old else []
    tasks = [t for t in tasks if t != task][-(TASKS_PER_FILE - 1):] + [task]
    return MAP_TAG + " | ".join(tasks)


def digest(mem: Any, project: Path, session_id: str) -> dict[str, Any]:
    """Turn one session's unread spool lines into memories (the caller holds the project's
    digest lock); what was written."""
    state = load_state(project, session_id)
    records, offset = spool.read_from(spool.spool_path(project, session_id),
                                      int(state.get("offset", 0)))
    if not records:
        return {"records": 0}
    end = any(r.get("kind") == "end" for r in records)
    if state.get("ended"):  # resumed after its end (``claude --resume``): a new episodic session
        state.pop("session", None)
        state["ended"] = False
    facts = _facts(state)
    prompts, steps = learn(facts, records)
    out = _write(mem, project, session_id, state, facts, prompts, steps, end)
    state["offset"] = offset
    state.pop(RECORDING, None)
    save_state(project, session_id, state)
    return {"records": len(records), **out}


def run(project: Path, log: Any = print, key: str | None = None) -> int:
    """Digest every session with unread lines, again until none is left, under the project's
    digest lock; after letting go, look once more (a hook that found the lock held did not
    start a worker for the lines it had just appended). Returns the sessions digested. With
    ``key`` (the search server's) the briefing is then computed again and kept for a cold
    SessionStart (``brief_cache.py``)."""
    from graphmem.hooks.digest_state import pending_sessions, try_lock, worker_lock

    done = 0
    failed: set[str] = set()  # a session that failed waits for the next worker, not the others
    fd = worker_lock(project)
    try:
        if not try_lock(fd):
            return 0  # another worker has it, and will look again before it exits
        mem = None
        try:
            while True:
                while todo := [s for s in pending_sessions(project) if s not in failed]:
                    if mem is None:
                        from graphmem.facade.memory import Memory

                        mem = Memory(None, project)
                    for sid in todo:
                        started = time.time()
                        try:
                            out = digest(mem, project, sid)
                        except Exception as exc:
                            log(f"{_now()} digest {sid}: failed: {type(exc).__name__}: {exc}")
                            failed.add(sid)
                            continue
                        done += 1
                        log(f"{_now()} digest {sid}: {out} in {time.time() - started:.2f} s")
                import fcntl

                fcntl.flock(fd, fcntl.LOCK_UN)
                if not [s for s in pending_sessions(project) if s not in failed] \
                        or not try_lock(fd):
                    return done
        finally:
            if mem is not None:
                _refresh_agents_md(mem, log)
                if key:
                    _refresh_briefing(mem, project, key, log)
                mem.close()
    finally:
        os.close(fd)


def _refresh_agents_md(mem: Any, log: Any) -> None:
    """The marked section of the project's agent files, re-rendered from what was just digested
    (``Memory.refresh_agents_md``: only files that carry the markers; off by setting)."""
    try:
        got = mem.refresh_agents_md()
    except Exception as exc:
        log(f"{_now()} agents-md refresh: failed: {type(exc).__name__}: {exc}")
        return
    if got["refreshed"] or got["failed"]:
        log(f"{_now()} agents-md refresh: {got}")


def _refresh_briefing(mem: Any, project: Path, key: str, log: Any) -> None:
    """The briefing kept on disk, computed from what was just digested, so that a SessionStart
    finding no warm server tells the latest session (``brief_cache.py``)."""
    from graphmem import _sync
    from graphmem.hooks.agent_context import remember_brief

    try:
        _sync.run(remember_brief(mem.aio, key, str(project)))
    except Exception as exc:
        log(f"{_now()} briefing: not kept: {type(exc).__name__}: {exc}")


RECORDING = "recording"  # the state's note of turns being appended: session, turns before, how many


def _record_prompts(mem: Any, project: Path, session_id: str, state: dict, sid: str,
                    prompts: list[str]) -> None:
    """Append ``prompts`` as user turns of ``sid``, leaving out those a run killed before it
    saved its offset had appended already: the state notes the session's turn count and the
    batch's size before the append, and a rerun (the same spool lines read again, perhaps with
    more after them) skips as many of its first prompts as the session gained since."""
    mark = state.get(RECORDING)
    if isinstance(mark, dict):
        try:
            gained = _turns(mem, mark["session"]) - int(mark["before"])
            prompts = prompts[min(max(gained, 0), int(mark["n"])):]
        except Exception:  # a note of another shape, or its session gone: none of it is there
            pass
    if not prompts:
        return
    state[RECORDING] = {"session": sid, "before": _turns(mem, sid), "n": len(prompts)}
    save_state(project, session_id, state)
    mem.record_turns(sid, [{"role": "user", "content": p} for p in prompts])


def _turns(mem: Any, sid: str) -> int:
    return int(mem.get_session(sid).get("turns") or 0)


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S")


def _write(mem: Any, project: Path, session_id: str, state: dict, facts: dict,
           prompts: list[str], steps: list[dict], end: bool) -> dict[str, Any]:
    from graphmem.files.lock import folder_lock

    if not state.get("session"):
        state["session"] = mem.start_session(workspace=str(project), mode="agent-hooks")
        save_state(project, session_id, state)  # a rerun reuses it
    sid = state["session"]
    _record_prompts(mem, project, session_id, state, sid, prompts)
    if RECORD_STEPS:
        for step in steps:
            mem.record_step(sid, step["name"], step["status"], step["payload"])
    memory_dir = mem.files.memory_dir
    memory_dir.mkdir(parents=True, exist_ok=True)
    wrote: dict[str, Any] = {"session": sid, "prompts": len(prompts), "steps": len(steps)}
    # the one branch point of review: held for a person (`graphmem review`), or applied at once
    hold = mem.settings.review.mode == "hold"
    if learned(facts):
        with folder_lock(memory_dir, name=".agent_hooks.lock"):
            if facts["edited"] and facts["task"]:
                current = mem.load_codebase_map()
                update = {p: v for p in facts["edited"]
                          if (v := _purpose(current.get(p), facts["task"][:200]))
                          and v != current.get(p)}
                if update:
                    mem.update_codebase_map(update, hold=hold)
                wrote["files"] = len(update)
            insight = insight_of(facts, session_id)
            if insight != state.get("saved"):  # a turn that taught nothing new: no write
                n = state.get("insight") or mem.files.next_session_number()
                mem.save_session_insights(n, insight, hold=hold)
                state["insight"] = wrote["insight"] = n
                state["saved"] = insight
    if end and not state.get("ended"):
        summary = _llm_summary(mem, facts, facts.get("prompts") or [])
        if summary:
            mem.set_session_summary(sid, summary)
            wrote["summary"] = True
        mem.end_session(sid)
        state["ended"] = True
    return wrote


SUMMARY_PROMPT = ("Summarise this coding-agent session for the project's memory in at most five "
                  "short lines: what was asked, what changed (name the files), what failed and "
                  "what fixed it, and anything the next session must know. Plain text, no "
                  "preamble.")


def _llm_summary(mem: Any, facts: dict[str, Any], prompts: list[str]) -> str | None:
    """A short summary of the session by the configured LLM; None when no LLM is configured
    (the digest needs none) or when it fails (logged; the session keeps its other memories)."""
    from graphmem import _sync
    from graphmem.providers import get_llm

    try:
        llm = get_llm(mem.settings)
    except Exception as exc:
        print(f"{_now()} digest: no LLM summary: {exc}", flush=True)
        return None
    if llm is None:
        return None
    lines = [f"Task: {facts['task'] or '(none)'}",
             *(f"Prompt: {p}" for p in prompts[1:8]),
             f"Files edited: {', '.join(facts['edited'][:20]) or 'none'}",
             *(f"Failed then passed: {x}" for x in facts["fixes"][:5]),
             *(f"Failed: {x}" for x in facts["failed"][-5:]),
             *(f"Passed: {x}" for x in facts["passed"][-5:])]
    try:
        text = _sync.run(llm.generate([{"role": "system", "content": SUMMARY_PROMPT},
                                       {"role": "user", "content": "\n".join(lines)[:8000]}],
                                      max_tokens=300))
    except Exception as exc:
        print(f"{_now()} digest: no LLM summary: {type(exc).__name__}: {exc}", flush=True)
        return None
    return " ".join(text.split())[:2000] or None


def main(argv: list[str]) -> int:
    """``digest PROJECT [KEY]``: digest the project's spools; one log line per session."""
    os.environ.setdefault("GRAPHITI_TELEMETRY_ENABLED", "false")
    if len(argv) not in (1, 2):
        print("usage: python -m graphmem.hooks.digest PROJECT [KEY]", file=sys.stderr)
        return 2
    try:
        run(Path(argv[0]), log=lambda line: print(line, flush=True),
            key=argv[1] if len(argv) == 2 else None)
    except Exception as exc:
        print(f"{_now()} digest: failed: {type(exc).__name__}: {exc}", flush=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
