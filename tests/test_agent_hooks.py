"""Claude Code hooks as Claude Code runs them: ``graphmem hooks install claude-code`` writes
``.claude/settings.json``; each event runs the installed command as a process (``sh -c``), the
event's JSON on stdin, in a real git project; the answers are checked against the documented
output, and the memory the sessions leave behind against the files."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import run_cli
from test_code_freshness import PAY, commit, git

REPO = Path(__file__).resolve().parent.parent
BIN = str(Path(sys.executable).parent)
AUTO = {"GRAPHMEM_SEARCH_SERVER": "auto"}
SECRET = "sk-ant-" + "abcdefghij" * 3


@pytest.fixture
def proj(tmp_path: Path) -> Path:
    root = tmp_path / "shop"
    (root / "src").mkdir(parents=True)
    (root / "src" / "pay.py").write_text(PAY)
    (root / "src" / "cart.py").write_text("def total(items):\n    return sum(items)\n")
    git(root, "init", "-q")
    git(root, "config", "user.email", "t@example.invalid")
    git(root, "config", "user.name", "t")
    commit(root, "start")
    return root


@pytest.fixture
def warm(isolated_env, proj, monkeypatch):
    """A warm search server for the test's home (hooks ask it, as they do by default)."""
    from graphmem.cli.search_client import ask, client_config, spawn

    monkeypatch.setenv("GRAPHMEM_SEARCH_SERVER", "auto")
    cfg = client_config(cwd=str(proj))
    spawn(cfg)
    deadline = time.monotonic() + 120
    while not (ask(cfg, {"op": "ping"}) or {}).get("pid"):
        assert time.monotonic() < deadline, cfg.log.read_text() if cfg.log.exists() else "no log"
        time.sleep(0.2)
    yield cfg
    pid = (ask(cfg, {"op": "ping"}) or {}).get("pid")
    if pid:
        os.kill(pid, signal.SIGTERM)


def install(root: Path, *extra: str, env: dict | None = None) -> subprocess.CompletedProcess:
    out = run_cli("hooks", "install", "claude-code", "--project-dir", str(root), "--json", *extra,
                  env=env)
    assert out.returncode == 0, out.stderr
    return out


def handlers(root: Path, event: str, value: str | None = None) -> list[dict]:
    """The command handlers the project's settings run on ``event`` (matched as documented:
    ``*``/empty/none match all, ``A|B`` is a list of exact names, else a regex)."""
    hooks = json.loads((root / ".claude" / "settings.json").read_text())["hooks"]
    found = []
    for group in hooks.get(event, []):
        m = group.get("matcher")
        if m not in (None, "", "*") and value is not None:
            names = m.split("|") if re.fullmatch(r"[\w|, -]+", m) else None
            if names is not None and value not in [n.strip() for n in names]:
                continue
            if names is None and not re.search(m, value):
                continue
        found.extend(h for h in group["hooks"] if h.get("type") == "command")
    return found


def fire(root: Path, event: str, payload: dict, value: str | None = None,
         env: dict | None = None) -> list[subprocess.CompletedProcess]:
    """Run every handler for ``event`` as Claude Code does: ``sh -c``, JSON on stdin, cwd the
    project, ``CLAUDE_PROJECT_DIR`` set; each answer checked against the documented output."""
    data = {"cwd": str(root), "hook_event_name": event, "transcript_path": "/dev/null", **payload}
    full = dict(os.environ, CLAUDE_PROJECT_DIR=str(root), **(env or {}))
    outs = []
    for h in handlers(root, event, value):
        p = subprocess.run(["sh", "-c", h["command"]], input=json.dumps(data), text=True,
                           capture_output=True, cwd=root, env=full, timeout=h["timeout"])
        assert p.returncode == 0, (event, p.stderr)
        if p.stdout.strip():
            out = json.loads(p.stdout)
            spec = out["hookSpecificOutput"]
            assert spec["hookEventName"] == event and isinstance(spec["additionalContext"], str)
            assert set(out) == {"hookSpecificOutput"}  # never a decision: graphmem only adds
        outs.append(p)
    return outs


def context(outs: list[subprocess.CompletedProcess]) -> str:
    return "".join(json.loads(p.stdout)["hookSpecificOutput"]["additionalContext"]
                   for p in outs if p.stdout.strip())


def session(root: Path, sid: str, prompt: str, steps: list[tuple], end: str = "SessionEnd",
            env: dict | None = None) -> None:
    """One recorded session: start, prompt, tool steps (tool, input, error-or-None), stop, end."""
    fire(root, "SessionStart", {"session_id": sid, "source": "startup"}, "startup", env)
    fire(root, "UserPromptSubmit", {"session_id": sid, "prompt": prompt}, env=env)
    for tool, tool_input, error in steps:
        base = {"session_id": sid, "tool_name": tool, "tool_input": tool_input, "tool_use_id": "t"}
        fire(root, "PreToolUse", base, tool, env)
        if error is None:
            fire(root, "PostToolUse", {**base, "tool_response": {"stdout": "", "stderr": ""}},
                 tool, env)
        else:
            fire(root, "PostToolUseFailure", {**base, "error": error}, tool, env)
    fire(root, "Stop", {"session_id": sid, "stop_hook_active": False}, env=env)
    fire(root, end, {"session_id": sid, "reason": "other"}, "other", env)


def digested(root: Path, sid: str, timeout: float = 120.0) -> dict:
    """The session's digest state once its worker has read the whole spool and ended it."""
    spool = root / ".graphmem" / "spool"
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            state = json.loads((spool / f"{sid}.state.json").read_text())
            size = (spool / f"{sid}.jsonl").stat().st_size
        except (FileNotFoundError, ValueError):
            state, size = {}, -1
        if state.get("ended") and state.get("offset") == size:
            return state
        time.sleep(0.2)
    log = (spool / "digest.log").read_text() if (spool / "digest.log").exists() else "(no log)"
    raise AssertionError(f"session {sid} not digested; log: {log}")


# ---- install ---------------------------------------------------------------------------------
def test_install_is_idempotent_keeps_other_entries_and_uninstall_removes_only_ours(proj):
    settings = proj / ".claude" / "settings.json"
    settings.parent.mkdir()
    theirs = {"model": "opus", "hooks": {
        "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "./guard.sh"}]}],
        "Stop": [{"hooks": [{"type": "command", "command": "notify-send done"},
                            {"type": "command", "command": "graphmem hook claude-code Stop"}]}]}}
    settings.write_text(json.dumps(theirs))
    assert json.loads(install(proj).stdout)["replaced"] == 1  # the stale Stop one
    once = settings.read_text()
    install(proj)
    assert settings.read_text() == once  # idempotent
    data = json.loads(once)
    assert data["model"] == "opus"
    assert data["hooks"]["PreToolUse"][0] == theirs["hooks"]["PreToolUse"][0]
    assert {h["command"] for g in data["hooks"]["Stop"] for h in g["hooks"]} >= {"notify-send done"}
    for event in ("SessionStart", "UserPromptSubmit", "PreToolUse", "PostToolUse",
                  "PostToolUseFailure", "PreCompact", "Stop", "SessionEnd"):
        ours = [h for g in data["hooks"][event] for h in g["hooks"]
                if h["command"].endswith(f"hook claude-code {event}")]
        assert len(ours) == 1 and ours[0]["type"] == "command" and ours[0]["timeout"] > 0, event
    assert [g.get("matcher") for g in data["hooks"]["PreToolUse"]][1] == "Read|Edit|Write|MultiEdit"
    out = run_cli("hooks", "uninstall", "claude-code", "--project-dir", str(proj), "--json")
    assert out.returncode == 0 and json.loads(out.stdout)["removed"] == 8
    left = json.loads(settings.read_text())
    assert left == {"model": "opus", "hooks": {
        "PreToolUse": theirs["hooks"]["PreToolUse"],
        "Stop": [{"hooks": [{"type": "command", "command": "notify-send done"}]}]}}


def test_install_refuses_a_broken_settings_file_and_user_scope_writes_home(proj, tmp_path):
    settings = proj / ".claude" / "settings.json"
    settings.parent.mkdir()
    settings.write_text("{not json")
    out = run_cli("hooks", "install", "claude-code", "--project-dir", str(proj))
    assert out.returncode != 0 and "settings" in out.stderr and "Traceback" not in out.stderr
    assert settings.read_text() == "{not json"  # untouched
    settings.write_text('["a list"]')
    assert run_cli("hooks", "install", "claude-code", "--project-dir", str(proj)).returncode != 0
    home = tmp_path / "user-home"
    home.mkdir()
    out = run_cli("hooks", "install", "claude-code", "--user", "--json", env={"HOME": str(home)})
    assert out.returncode == 0, out.stderr
    assert "SessionStart" in json.loads((home / ".claude" / "settings.json").read_text())["hooks"]
    # no agent: the git hooks, as before
    out = run_cli("hooks", "install", "--project-dir", str(proj), "--json")
    assert out.returncode == 0 and "post-commit" in json.loads(out.stdout)["installed"]


def test_the_plugin_hooks_file_is_what_install_writes(proj):
    plugin = REPO / "plugins" / "claude-code"
    manifest = json.loads((plugin / ".claude-plugin" / "plugin.json").read_text())
    assert manifest["name"] == "graphmem"
    market = json.loads((REPO / ".claude-plugin" / "marketplace.json").read_text())
    entry = next(p for p in market["plugins"] if p["name"] == "graphmem")
    assert (REPO / entry["source"]).resolve() == plugin.resolve()
    install(proj, env={"PATH": BIN + os.pathsep + os.environ.get("PATH", "")})
    written = json.loads((proj / ".claude" / "settings.json").read_text())["hooks"]
    assert json.loads((plugin / "hooks" / "hooks.json").read_text())["hooks"] == written


# ---- a session's memory, and the next session's context ----------------------------------------
def test_a_session_leaves_memories_the_next_session_is_given(proj, warm):
    install(proj)
    pay = str(proj / "src" / "pay.py")
    session(proj, "s-one", f"Make refund() round half-even in the payments module {SECRET} "
                           "<private>the staging password is hunter2</private>",
            [("Read", {"file_path": pay}, None),
             ("Edit", {"file_path": pay, "old_string": "a", "new_string": "b"}, None),
             ("Bash", {"command": "pytest tests/test_pay.py"}, "Exit code 1"),
             ("Bash", {"command": "pytest tests/test_pay.py -p no:randomly"}, None)])
    digested(proj, "s-one")
    mem = proj / ".graphmem" / "memory"
    insight = json.loads(next((mem / "session_insights").glob("session_001-*.json")).read_text())
    assert insight["subtasks_completed"][0].startswith("Make refund() round half-even")
    assert list(insight["discoveries"]["files_understood"]) == ["src/pay.py"]
    assert insight["discoveries"]["gotchas_encountered"] == [
        "`pytest tests/test_pay.py` failed (Exit code 1); it passed as "
        "`pytest tests/test_pay.py -p no:randomly`"]
    assert "edited for: Make refund()" in json.loads((mem / "codebase_map.json").read_text())[
        "src/pay.py"]
    everything = "".join(p.read_text(errors="replace") for p in (proj / ".graphmem").rglob("*")
                         if p.is_file())
    assert "hunter2" not in everything and "<private>" not in everything
    assert SECRET not in everything and "[REDACTED:anthropic_key]" in everything

    # the next session: a briefing, context for a related prompt, nothing for an unrelated one
    brief = context(fire(proj, "SessionStart", {"session_id": "s-two", "source": "startup"},
                         "startup"))
    assert "round half-even" in brief and "pytest tests/test_pay.py" in brief
    told = context(fire(proj, "UserPromptSubmit",
                        {"session_id": "s-two", "prompt": "refunds are rounded wrong again"}))
    assert "src/pay.py" in told and len(told) / 4 <= 800
    assert context(fire(proj, "UserPromptSubmit", {
        "session_id": "s-two", "prompt": "translate the onboarding emails into German"})) == ""
    where = context(fire(proj, "UserPromptSubmit", {"session_id": "s-two",
                                                    "prompt": "Where is `total` implemented?"}))
    assert "`total` is defined in src/cart.py" in where  # no memory names it: the code does
    about = context(fire(proj, "PreToolUse", {"session_id": "s-two", "tool_name": "Read",
                                              "tool_input": {"file_path": pay}}, "Read"))
    assert "known about src/pay.py" in about and "round half-even" in about
    again = context(fire(proj, "PreToolUse", {"session_id": "s-two", "tool_name": "Edit",
                                              "tool_input": {"file_path": pay}}, "Edit"))
    assert again == ""  # told once per session
    cart = str(proj / "src" / "cart.py")
    assert context(fire(proj, "PreToolUse", {"session_id": "s-two", "tool_name": "Read",
                                             "tool_input": {"file_path": cart}}, "Read")) == ""
    # the prompt is found by graphmem search afterwards
    found = run_cli("search", "round half-even payments module", "--project-dir", str(proj),
                    "--json")
    assert any("round half-even" in h["text"] for h in json.loads(found.stdout))

    # the file is renamed and its code changed: the file note warns, the briefing follows
    git(proj, "add", "-A")
    commit(proj, "memory")
    git(proj, "mv", "src/pay.py", "src/payments.py")
    (proj / "src" / "payments.py").write_text(PAY.replace("order.total", "round(order.total)"))
    commit(proj, "rename and change")
    moved = context(fire(proj, "PreToolUse", {"session_id": "s-three", "tool_name": "Read",
                                              "tool_input": {"file_path": str(
                                                  proj / "src" / "payments.py")}}, "Read"))
    assert "round half-even" in moved and "src/pay.py is now src/payments.py" in moved
    assert "src/payments.py: edited for" in moved  # the old path is rewritten, never shown first
    (proj / "src" / "payments.py").write_text(
        "def refund(order, mode='even'):\n    total = order.total\n    cents = round(total * 100)\n"
        "    return cents / 100\n\n\nclass Gateway:\n    pass\n")
    commit(proj, "rewrite")
    changed = context(fire(proj, "PreToolUse", {"session_id": "s-four", "tool_name": "Edit",
                                                "tool_input": {"file_path": str(
                                                    proj / "src" / "payments.py")}}, "Edit"))
    assert "round half-even" in changed  # the function it names moved out of a deleted file
    assert "`refund` moved from src/pay.py (deleted) to src/payments.py" in changed


def test_the_briefing_names_recent_work_under_current_names_and_nothing_gone(proj):
    """A session's task and edited files, after the code moved on: the renamed file under its
    new name (in the task's text too), the deleted one left out, a task digested in two parts
    said once, and its lesson kept; all within the briefing's budget."""
    import asyncio

    from graphmem import AsyncMemory, Memory
    from graphmem.hooks.agent_context import BRIEF_BUDGET, brief

    task = "Make refund() in src/pay.py round half-even"
    with Memory(None, proj) as m:
        for n, files in ((1, ["src/pay.py", "src/cart.py"]), (2, ["src/pay.py"])):
            m.save_session_insights(n, {"subtasks_completed": [task], "discoveries": {
                "files_understood": {f: f"edited for: {task}" for f in files},
                "gotchas_encountered": ["`pytest tests/test_pay.py` failed (Exit code 1); it "
                                        "passed as `pytest tests/test_pay.py -p no:randomly`"]}})
    git(proj, "add", "-A")
    commit(proj, "memory")
    git(proj, "mv", "src/pay.py", "src/payments.py")
    git(proj, "rm", "-q", "src/cart.py")
    commit(proj, "rename pay, drop cart")

    async def told() -> str:
        async with AsyncMemory(None, proj) as mem:
            return await brief(mem)

    text = asyncio.run(told())
    assert "Make refund() in src/payments.py round half-even \u2014 edited src/payments.py" in text
    marked = text.replace("src/pay.py is now src/payments.py", "")  # a move note may say it
    assert "src/pay.py" not in marked and "src/cart.py" not in text  # nothing old, nothing gone
    assert text.count("round half-even") == 1 and "pytest tests/test_pay.py -p no:randomly" in text
    assert len(text) / 4 <= BRIEF_BUDGET


def test_off_switch_garbage_and_failures_never_break_the_agent(proj):
    install(proj)
    payload = {"session_id": "s-x", "prompt": "hello there"}
    outs = fire(proj, "UserPromptSubmit", payload, env={"GRAPHMEM_HOOKS": "off"})
    assert outs and all(p.stdout == "" and p.stderr == "" for p in outs)
    assert not (proj / ".graphmem" / "spool").exists()  # nothing captured
    cmd = handlers(proj, "PostToolUse", "Bash")[0]["command"]
    for stdin in ("not json", "[1, 2]", json.dumps({"session_id": "../../etc/x", "cwd": str(proj),
                                                     "tool_name": "Bash", "tool_input": {}}),
                  json.dumps({"session_id": "s", "cwd": "relative/dir"})):
        p = subprocess.run(["sh", "-c", cmd], input=stdin, text=True, capture_output=True,
                           cwd=proj, timeout=30)
        assert p.returncode == 0 and p.stdout == ""
        assert len(p.stderr.splitlines()) == 1 and p.stderr.startswith("graphmem hook")
    assert not list(proj.parent.rglob("x.jsonl"))  # the bad session id wrote nothing anywhere
    # an event graphmem does not hook, and a broken server setting: still exit 0, quiet
    p = subprocess.run(["sh", "-c", cmd.replace("PostToolUse", "Notification")], input="{}",
                       text=True, capture_output=True, cwd=proj, timeout=30)
    assert (p.returncode, p.stdout, p.stderr) == (0, "", "")


def search(root: Path, query: str) -> list[dict]:
    """``graphmem search`` as a user runs it (the warm server answers when the test has one)."""
    out = run_cli("search", query, "--project-dir", str(root), "--json")
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


@pytest.mark.serial  # changes a module's mtime: every warm server steps aside
def test_a_prompt_is_found_as_soon_as_its_hook_returned_and_no_digest_loses_it(proj, warm):
    """Found before any digest ran (read from the spool), still once after a digest worker was
    killed, then once as the digested turn; a session resumed after its end is digested on."""
    install(proj)
    asked = "make the invoice totals use bankers rounding for every currency"
    fire(proj, "SessionStart", {"session_id": "s-p", "source": "startup"}, "startup")
    fire(proj, "UserPromptSubmit", {"session_id": "s-p", "prompt": asked})
    spool = proj / ".graphmem" / "spool"
    assert not (spool / "s-p.state.json").exists()  # no Stop yet: no digest has run
    hits = [h for h in search(proj, "bankers rounding of invoice totals") if h["text"] == asked]
    assert len(hits) == 1, hits
    hit = hits[0]
    assert hit["kind"] == "turn" and hit["metadata"]["pending"] is True
    assert hit["source"] == ".graphmem/spool/s-p.jsonl"
    assert search(proj, asked)[0]["text"] == asked  # the query is the prompt: it comes first

    # a digest worker killed before it finished: the spool keeps the prompt, still found once
    worker = subprocess.Popen([sys.executable, "-m", "graphmem.cli.digest_worker", str(proj)],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(0.3)
    worker.kill()
    worker.wait(timeout=30)
    assert [h["text"] for h in search(proj, "bankers rounding of invoice totals")].count(asked) == 1

    fire(proj, "Stop", {"session_id": "s-p", "stop_hook_active": False})
    fire(proj, "SessionEnd", {"session_id": "s-p", "reason": "other"}, "other")
    first = digested(proj, "s-p")
    found = [h for h in search(proj, "bankers rounding of invoice totals") if h["text"] == asked]
    assert len(found) == 1 and not found[0]["metadata"].get("pending")  # the turn, not the spool

    # resumed after its end (the agent's --resume keeps the id): digested into a new session
    again = "now also round the tax lines of each invoice the same way"
    fire(proj, "SessionStart", {"session_id": "s-p", "source": "resume"}, "resume")
    fire(proj, "UserPromptSubmit", {"session_id": "s-p", "prompt": again})
    fire(proj, "Stop", {"session_id": "s-p", "stop_hook_active": False})
    fire(proj, "SessionEnd", {"session_id": "s-p", "reason": "other"}, "other")
    second = digested(proj, "s-p")
    assert second["session"] != first["session"]
    turns = proj / ".graphmem" / "memory" / "episodes" / second["session"] / "turns.jsonl"
    assert [json.loads(t)["content"] for t in turns.read_text().splitlines()] == [again]
    assert "failed" not in (spool / "digest.log").read_text()

    # the server watches the code its searches loaded, not only its warm-up's: edited, a
    # module of the façade makes it step aside (it went on answering with the old code)
    import graphmem.facade.recall as loaded_by_a_search
    from graphmem.cli.search_client import ask

    module = loaded_by_a_search.__file__
    st = os.stat(module)
    try:
        os.utime(module, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
        got = ask(warm, {"op": "search", "query": "invoice", "project_dir": str(proj)})
        assert got == {"wrong_server": True}, got
    finally:
        os.utime(module, ns=(st.st_atime_ns, st.st_mtime_ns))


def test_a_digest_killed_after_appending_the_turns_does_not_append_them_again(proj):
    """A worker killed between appending a session's prompts as turns and saving its offset
    (the window a Stop's worker can be killed in): the next worker reads the same spool lines
    again, and appends only the prompt that came after them."""
    install(proj)
    first, later = "make the invoice totals use bankers rounding", "and the tax lines too"
    fire(proj, "SessionStart", {"session_id": "s-k", "source": "startup"}, "startup")
    fire(proj, "UserPromptSubmit", {"session_id": "s-k", "prompt": first})
    dies = ("import os, sys\n"
            "from pathlib import Path\n"
            "from graphmem.hooks import digest\n"
            "real = digest.save_state\n"
            "def save_state(project, session_id, state):\n"
            "    if state.get('offset'):\n"
            "        os._exit(9)  # as a SIGKILL: no finally, no atexit\n"
            "    real(project, session_id, state)\n"
            "digest.save_state = save_state\n"
            "digest.run(Path(sys.argv[1]))\n")
    died = subprocess.run([sys.executable, "-c", dies, str(proj)], capture_output=True, text=True,
                          timeout=120)
    assert died.returncode == 9, died.stderr
    spool = proj / ".graphmem" / "spool"
    sid = json.loads((spool / "s-k.state.json").read_text())["session"]
    turns = proj / ".graphmem" / "memory" / "episodes" / sid / "turns.jsonl"
    assert [json.loads(t)["content"] for t in turns.read_text().splitlines()] == [first]

    fire(proj, "UserPromptSubmit", {"session_id": "s-k", "prompt": later})
    fire(proj, "Stop", {"session_id": "s-k", "stop_hook_active": False})
    fire(proj, "SessionEnd", {"session_id": "s-k", "reason": "other"}, "other")
    assert digested(proj, "s-k")["session"] == sid
    assert [json.loads(t)["content"] for t in turns.read_text().splitlines()] == [first, later]
    assert [h["text"] for h in search(proj, "bankers rounding of invoice totals")].count(first) == 1


def test_pending_prompts_are_read_after_the_digest_offset_and_garbage_is_skipped(tmp_path):
    """The spool's prompts a search adds: only after the offset the digest reached, whole lines
    only (a torn last line waits), lines that are not a prompt object skipped, a state file that
    is not JSON read as "nothing digested"."""
    from graphmem.agent_spool import pending_prompts

    spool = tmp_path / ".graphmem" / "spool"
    spool.mkdir(parents=True)
    read = json.dumps({"t": 1.0, "kind": "prompt", "prompt": "digested already"}) + "\n"
    lines = [json.dumps({"t": 2.0, "kind": "prompt", "prompt": "the one left to find"}),
             "not json at all", "[1, 2]", json.dumps({"kind": "prompt", "prompt": 7}),
             json.dumps({"kind": "prompt", "prompt": "   "}),
             json.dumps({"t": 3.0, "kind": "tool", "tool": "Bash"})]
    (spool / "a.jsonl").write_bytes((read + "\n".join(lines) + "\n").encode()
                                    + b'{"t": 4.0, "kind": "prompt", "prompt": "torn')
    (spool / "a.state.json").write_text(json.dumps({"offset": len(read.encode())}))
    (spool / "b.jsonl").write_text(json.dumps({"t": 5.0, "kind": "prompt", "prompt": "b's"}) + "\n")
    (spool / "b.state.json").write_text("{broken")
    got = pending_prompts(tmp_path)
    assert [(p["session"], p["prompt"], p["offset"]) for p in got] == [
        ("a", "the one left to find", len(read.encode())), ("b", "b's", 0)]
    assert pending_prompts(tmp_path / "nowhere") == []


def test_parallel_sessions_and_subagents_lose_and_duplicate_nothing(proj, warm):
    """4 sessions at once, each with 3 writers (the agent and two subagents) capturing 10 steps
    and a Stop after each prompt: every line whole in its spool, every prompt one turn."""
    install(proj)
    script = REPO / "tests" / "agent_hook_writer.py"
    procs = [subprocess.Popen([sys.executable, str(script), str(proj), f"s{n}", str(w)],
                              env=dict(os.environ, CLAUDE_PROJECT_DIR=str(proj)),
                              stderr=subprocess.PIPE, text=True)
             for n in range(4) for w in range(3)]
    for p in procs:
        assert p.wait(timeout=600) == 0, p.stderr.read()
    for n in range(4):
        fire(proj, "SessionEnd", {"session_id": f"s{n}", "reason": "other"}, "other")
    for n in range(4):
        lines = (proj / ".graphmem" / "spool" / f"s{n}.jsonl").read_text().splitlines()
        recs = [json.loads(x) for x in lines]  # every line whole
        assert len([r for r in recs if r["kind"] == "tool"]) == 3 * 10
        assert sorted(r["input"]["file_path"] for r in recs if r.get("tool") == "Edit") == [
            f"notes/s{n}-{w}.md" for w in range(3)]
        assert sorted(r["prompt"] for r in recs if r["kind"] == "prompt") == sorted(
            f"writer {w} of s{n} asks about zebra {k}" for w in range(3) for k in range(2))
        state = digested(proj, f"s{n}")
        turns = (proj / ".graphmem" / "memory" / "episodes" / state["session"]
                 / "turns.jsonl").read_text().splitlines()
        assert sorted(json.loads(t)["content"] for t in turns) == sorted(
            f"writer {w} of s{n} asks about zebra {k}" for w in range(3) for k in range(2))
    insights = [json.loads(p.read_text()) for p in
                (proj / ".graphmem" / "memory" / "session_insights").glob("session_*.json")]
    assert sorted(sorted(i["discoveries"]["files_understood"]) for i in insights) == [
        [f"notes/s{n}-{w}.md" for w in range(3)] for n in range(4)]  # one per session, unmixed


def test_a_capture_hook_imports_nothing_heavy(proj):
    install(proj)
    cmd = handlers(proj, "PostToolUse", "Bash")[0]["command"]
    data = json.dumps({"session_id": "s-i", "cwd": str(proj), "tool_name": "Bash",
                       "tool_input": {"command": "ls"}, "tool_response": {"stdout": "x"}})
    p = subprocess.run(["sh", "-c", cmd], input=data, text=True, capture_output=True, cwd=proj,
                       env=dict(os.environ, PYTHONPROFILEIMPORTTIME="1"), timeout=30)
    assert p.returncode == 0
    loaded = {line.split("|")[-1].strip().split(".")[0] for line in p.stderr.splitlines()
              if line.startswith("import time:")}
    assert "json" in loaded  # the check sees imports at all
    assert not loaded & {"pydantic", "numpy", "onnxruntime", "rich", "graphiti_core", "sqlite3"}


# ---- Gemini CLI, through the same core ----------------------------------------------------------
def gemini(root: Path, event: str, payload: dict, tool: str | None = None) -> str:
    """Run the handlers ``.gemini/settings.json`` has for ``event`` (matchers are regexes on the
    tool name, timeouts in milliseconds) as Gemini CLI does; the context they add."""
    hooks = json.loads((root / ".gemini" / "settings.json").read_text())["hooks"]
    data = {"session_id": "g-1", "transcript_path": "/dev/null", "cwd": str(root),
            "hook_event_name": event, "timestamp": "2026-12-06T00:00:00Z", **payload}
    told = ""
    for group in hooks.get(event, []):
        if tool is not None and group.get("matcher") and not re.search(group["matcher"], tool):
            continue
        for h in group["hooks"]:
            p = subprocess.run(["sh", "-c", h["command"]], input=json.dumps(data), text=True,
                               capture_output=True, cwd=root, timeout=h["timeout"] / 1000,
                               env=dict(os.environ, GEMINI_PROJECT_DIR=str(root)))
            assert p.returncode == 0 and p.stderr == "", p.stderr
            if p.stdout.strip():
                out = json.loads(p.stdout)  # only the final JSON on stdout, as documented
                told += out["hookSpecificOutput"]["additionalContext"]
    return told


def test_gemini_cli_hooks_on_its_documented_payloads(proj, warm):
    out = run_cli("hooks", "install", "gemini-cli", "--project-dir", str(proj), "--json")
    assert out.returncode == 0, out.stderr
    settings = json.loads((proj / ".gemini" / "settings.json").read_text())["hooks"]
    assert set(settings) == {"SessionStart", "BeforeAgent", "AfterTool", "AfterAgent",
                             "PreCompress", "SessionEnd"}
    assert all(h["timeout"] == 10_000 for g in settings.values() for x in g for h in x["hooks"])
    pay = str(proj / "src" / "pay.py")
    gemini(proj, "SessionStart", {"source": "startup"})
    first = gemini(proj, "BeforeAgent", {"prompt": "Make refund() round half-even"})
    assert "`refund` is defined in src/pay.py" in first and "half-even" not in first.split(
        "\n", 1)[1]  # nothing remembered yet: only where the code it names is
    gemini(proj, "AfterTool", {"tool_name": "read_file", "tool_input": {"path": pay},
                               "tool_response": {"llmContent": PAY, "returnDisplay": ""}},
           "read_file")
    gemini(proj, "AfterTool", {"tool_name": "replace", "tool_input": {
        "file_path": pay, "old_string": "a", "new_string": "b"},
        "tool_response": {"llmContent": "Successfully modified file", "returnDisplay": ""}},
        "replace")
    gemini(proj, "AfterTool", {"tool_name": "run_shell_command",
                               "tool_input": {"command": "pytest -q"},
                               "tool_response": {"llmContent": "", "returnDisplay": "",
                                                 "error": {"message": "Exit code 1"}}},
           "run_shell_command")
    gemini(proj, "AfterTool", {"tool_name": "run_shell_command",
                               "tool_input": {"command": "pytest -q -x"},
                               "tool_response": {"llmContent": "1 passed", "returnDisplay": ""}},
           "run_shell_command")
    gemini(proj, "AfterAgent", {"prompt": "Make refund() round half-even",
                                "prompt_response": "Done.", "stop_hook_active": False})
    gemini(proj, "SessionEnd", {"reason": "exit"})
    digested(proj, "g-1")
    insight = json.loads(next((proj / ".graphmem" / "memory" / "session_insights")
                              .glob("session_001-*.json")).read_text())
    assert insight["subtasks_completed"] == ["Make refund() round half-even"]
    assert list(insight["discoveries"]["files_understood"]) == ["src/pay.py"]
    assert insight["discoveries"]["gotchas_encountered"] == [
        "`pytest -q` failed (Exit code 1); it passed as `pytest -q -x`"]
    told = gemini(proj, "AfterTool", {"session_id": "g-2", "tool_name": "read_file",
                                      "tool_input": {"path": pay},
                                      "tool_response": {"llmContent": PAY}}, "read_file")
    assert "known about src/pay.py" in told and "round half-even" in told
    assert "src/pay.py" in gemini(proj, "BeforeAgent", {"session_id": "g-2",
                                                        "prompt": "refund rounding is off again"})


def test_an_llm_summary_only_when_a_provider_is_configured(proj, monkeypatch):
    from test_consolidate import FakeOpenAI

    from graphmem import Memory

    server = FakeOpenAI(lambda body: "Asked to fix refund rounding; edited src/pay.py.")
    llm = {"GRAPHMEM_LLM_PROVIDER": "openai", "OPENAI_API_KEY": "sk-test-hooks-00000000000000",
           "OPENAI_BASE_URL": server.url}
    install(proj)
    pay = str(proj / "src" / "pay.py")
    try:
        session(proj, "s-llm", "Fix the refund rounding", [
            ("Edit", {"file_path": pay, "old_string": "a", "new_string": "b"}, None)], env=llm)
        with_llm = digested(proj, "s-llm")
        session(proj, "s-plain", "Tidy the cart totals", [
            ("Edit", {"file_path": str(proj / "src" / "cart.py")}, None)])
        plain = digested(proj, "s-plain")
    finally:
        server.close()
    assert len(server.requests) == 1  # the session with a provider, at its end, once
    sent = json.dumps(server.requests[0]["body"])
    assert "Fix the refund rounding" in sent and "src/pay.py" in sent
    for key, value in llm.items():
        monkeypatch.setenv(key, value)
    with Memory(None, proj) as m:
        assert m.get_session_summary(with_llm["session"]) == \
            "Asked to fix refund rounding; edited src/pay.py."
        assert m.get_session_summary(plain["session"]) is None


def test_the_digest_keeps_lessons_not_noise():
    """Failing checks and what made them pass are lessons; a flake, ``git status`` or a
    greeting as the task are not."""
    from graphmem.hooks.digest import _facts, insight_of, learn, learned

    def bash(cmd, error=None):
        return {"kind": "fail" if error else "tool", "tool": "Bash", "input": {"command": cmd},
                **({"error": error} if error else {})}

    facts = _facts({})
    learn(facts, [{"kind": "prompt", "prompt": "hi"},
                  {"kind": "prompt", "prompt": "Fix the flaky cart total test please"},
                  bash("git push", "Exit code 128"), bash("git status"),
                  bash("go test ./cart/...", "Exit code 1"), bash("go test ./cart/..."),
                  bash("make lint", "Exit code 2"),
                  {"kind": "tool", "tool": "Edit", "input": {"file_path": "cart/total.go"}},
                  bash("make lint")])
    assert facts["task"] == "Fix the flaky cart total test please"
    assert facts["fixes"] == ["`make lint` failed (Exit code 2); it passed after editing "
                              "cart/total.go"]  # the flaky go test is no lesson, git push none
    assert facts["passed"] == ["`go test ./cart/...`", "`make lint`"]
    insight = insight_of(facts, "s")
    assert insight["discoveries"]["files_understood"] == {
        "cart/total.go": "edited for: Fix the flaky cart total test please"}
    only_a_question = _facts({})
    learn(only_a_question, [{"kind": "prompt", "prompt": "How does `Client` work?"}])
    assert not learned(only_a_question)  # kept as a turn, no insight


def test_checks_are_told_by_their_program_and_long_quotes_are_cut_within_budget():
    from graphmem.hooks.agent_context import fit
    from graphmem.hooks.digest import is_check

    assert [is_check(c) for c in ('git commit -m "add tests"', "mkdir docs/testing",
                                  "cd cmd && go test ./...", "FOO=1 pytest -q", "git status",
                                  "mise run fmt && mise run lint 2>&1")] == [
        False, False, True, True, False, True]
    text = ("## Memory relevant to: x\n\n### Gotchas\n- " + "plan " * 400 +
            "_(source: s.json, session 3)_ [files: a.go]\n\n### Files\n- b.go: edited for: y\n")
    out = fit(text, 120)
    assert len(out) / 4 <= 120 and "_(source: s.json, session 3)_ [files: a.go]" in out
    assert "- b.go: edited for: y" in out and "plan plan" in out
    assert fit("## Memory relevant to: x\n\n### Files\n- " + "z" * 4000 + "\n", 30) == ""
    deep = [f"cmd/entire/cli/strategy/manual_commit_{n}.go" for n in ("test", "hooks", "git")]
    long = fit("### Lessons\n- " + "plan " * 100 + "_(session 53)_ [files: " + ", ".join(deep)
               + "; cmd/x.go changed since this was learned]\n", 800)
    assert all(p in long for p in deep) and long.endswith(", \u2026]\n")  # no half path
    terse = fit("### Lessons from past sessions\n- " + "plan " * 100 + "_(session 5)_ [files: a.go]"
                "\n\n### From past conversations\n- \"" + "said " * 100 + "\" (user in session s)\n",
                800).splitlines()
    assert len(terse[1]) <= 240 and terse[1].endswith("_(session 5)_ [files: a.go]")
    assert 300 < len(terse[4]) <= 360  # a quote keeps more of its words than a lesson


def test_a_prompt_sent_twice_with_a_word_changed_is_quoted_once():
    from graphmem.models import Hit
    from graphmem.rules.context import build_context

    said = ("yeah let's use sonnet, then after you commit and push create a linear issue to "
            "document the handle large transcript summarisation - just note the potential option")

    def turn(i: str, text: str, who: str = "user") -> Hit:
        return Hit(id=i, kind="turn", text=text, score=1.0, project="p", session="s",
                   metadata={"speaker": who})
    hits = [turn("a", said), turn("b", said + "s"), turn("c", said + "s", "assistant"),
            turn("d", said.replace("sonnet", "opus").replace("linear", "github"))]
    out = build_context("large transcript summarisation with sonnet", hits, 800, None)
    assert out.count("potential option") == 3, out  # a, c (another speaker), d (other words)
    assert 'options" (assistant' in out and 'options" (user' not in out and "use opus" in out


def test_a_prompt_context_names_a_lessons_session_not_its_insight_file(proj, warm):
    """A long lesson keeps its files whole and names its session, not the path of its insight
    file (70 characters a line the files need more)."""
    install(proj)
    deep = ["internal/checkout/gateway/retry_policy_handler.go",
            "internal/checkout/gateway/retry_policy_handler_test.go",
            "internal/checkout/orders/order_failure_reporting.go"]
    for path in deep:
        (proj / path).parent.mkdir(parents=True, exist_ok=True)
        (proj / path).write_text("package x\n")
    commit(proj, "gateway")
    plan = ("Make the checkout retry the payment gateway twice before it fails the order, log "
            "each gateway timeout with the order id and the attempt number, keep the retry "
            "budget under two seconds in total, and report an order that still fails to the "
            "order failure reporting so support sees it the next morning in their queue")
    steps = [("Edit", {"file_path": str(proj / p), "old_string": "a", "new_string": "b"}, None)
             for p in deep] + [("Bash", {"command": "go test ./internal/..."}, "Exit code 1"),
                               ("Bash", {"command": "go test ./internal/..."}, None)]
    session(proj, "r-1", plan, steps)
    digested(proj, "r-1")
    again = plan.replace("each gateway timeout", "every gateway timeout")
    session(proj, "r-2", again, [])
    digested(proj, "r-2")
    told = context(fire(proj, "UserPromptSubmit", {
        "session_id": "r-3", "prompt": "the payment gateway retry still fails orders on timeout"}))
    assert all(p in told for p in deep), told
    assert "session_insights/" not in told and "_(session 1)_" in told
    assert len(told) / 4 <= 800


# ---- the process: the server it asks, its deadline, its paths ----------------------------------
def test_a_hook_starts_the_server_when_none_runs_and_the_next_hook_is_answered(proj, isolated_env,
                                                                               monkeypatch):
    """No server: SessionStart still exits 0 within its installed timeout (``fire`` kills it
    past that) and starts one, detached; the next hook's context comes from it."""
    from graphmem.cli.search_client import ask, client_config, holder

    monkeypatch.setenv("GRAPHMEM_SEARCH_SERVER", "auto")
    install(proj)
    cfg = client_config(cwd=str(proj))
    assert holder(cfg) is None and not cfg.socket.exists()
    fire(proj, "SessionStart", {"session_id": "c-1", "source": "startup"}, "startup")
    try:
        deadline = time.monotonic() + 120
        while not (ask(cfg, {"op": "ping"}) or {}).get("pid"):
            assert time.monotonic() < deadline, cfg.log.read_text() if cfg.log.exists() else "-"
            time.sleep(0.2)
        pid = ask(cfg, {"op": "ping"})["pid"]
        assert os.getsid(pid) == pid  # its own session: the agent's hook process group can end
        told = context(fire(proj, "UserPromptSubmit",
                            {"session_id": "c-1", "prompt": "Where is `total` implemented?"}))
        assert "`total` is defined in src/cart.py" in told  # answered by the server it started
        assert ask(cfg, {"op": "ping"})["served"] >= 1
    finally:
        pid = (ask(cfg, {"op": "ping"}) or {}).get("pid")
        if pid:
            os.kill(pid, signal.SIGTERM)


def test_a_server_that_never_answers_costs_the_hook_its_deadline_not_the_agent(proj, isolated_env,
                                                                                monkeypatch):
    """A socket that accepts and never replies (a wedged server holding its lock): the prompt
    hook gives up at its own deadline, under the installed timeout, exits 0 with one log line,
    and the prompt is still captured."""
    import fcntl
    import socket

    from graphmem.cli import hook_command
    from graphmem.cli.search_client import client_config

    monkeypatch.setenv("GRAPHMEM_SEARCH_SERVER", "auto")
    install(proj)
    cfg = client_config(cwd=str(proj))
    lock = os.open(cfg.lock, os.O_RDWR | os.O_CREAT, 0o600)
    fcntl.flock(lock, fcntl.LOCK_EX)
    os.write(lock, f"{os.getpid()}\n".encode())
    wedged = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    cfg.socket.unlink(missing_ok=True)  # one an earlier run at the same home path left
    try:
        wedged.bind(str(cfg.socket))
        wedged.listen(8)
        t0 = time.monotonic()
        outs = fire(proj, "UserPromptSubmit", {"session_id": "w-1", "prompt": "refund rounding"})
        took = time.monotonic() - t0
        timeout = handlers(proj, "UserPromptSubmit")[0]["timeout"]
        assert hook_command.DEADLINES["prompt"] <= took < timeout
        assert outs[0].stdout == "" and outs[0].stderr.count("\n") == 1
        assert "gave up at its deadline" in outs[0].stderr
        spool = (proj / ".graphmem" / "spool" / "w-1.jsonl").read_text()
        assert json.loads(spool)["prompt"] == "refund rounding"
    finally:
        wedged.close()
        cfg.socket.unlink(missing_ok=True)  # the socket file outlives its socket
        os.close(lock)


@pytest.mark.parametrize("path, expected", [
    ("{p}/src/pay.py", "src/pay.py"),
    ("{p}/src/../src/pay.py", "src/pay.py"),
    ("{p}", "."),
    ("{p}-other/src/pay.py", "{p}-other/src/pay.py"),  # a sibling sharing the name's start
    ("/etc/hosts", "/etc/hosts"),
    ("src/pay.py", "src/pay.py"),  # relative: as given
    ("{link}/src/pay.py", "src/pay.py"),  # through a link to the project
])
def test_a_captured_path_is_made_relative_only_inside_the_project(proj, path, expected):
    from graphmem.cli.hook_command import relative

    link = proj.parent / "link-to-shop"
    link.symlink_to(proj)
    root = os.path.realpath(proj)
    fill = {"p": root, "link": str(link)}
    assert relative(path.format(**fill), root) == expected.format(**fill)
    assert relative(f"{root}/src/pay.py", "/") == f"{root}/src/pay.py".lstrip("/")


@pytest.mark.serial  # changes a module's mtime: every warm server steps aside
def test_after_an_upgrade_the_hook_replaces_the_outdated_server_without_an_error(proj, warm):
    """A server whose graphmem files changed on disk (an upgrade) answers ``wrong_server`` and
    exits: the hook starts one with the new code in its place, quietly (no error line)."""
    import graphmem.errors
    from graphmem.cli.search_client import ask

    install(proj)
    old = ask(warm, {"op": "ping"})["pid"]
    module = graphmem.errors.__file__
    st = os.stat(module)
    new = None
    try:
        os.utime(module, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
        outs = fire(proj, "SessionStart", {"session_id": "u-1", "source": "startup"}, "startup")
        assert outs and outs[0].stderr == ""
        deadline = time.monotonic() + 120
        while new in (None, old):
            assert time.monotonic() < deadline, "no new server"
            time.sleep(0.2)
            new = (ask(warm, {"op": "ping"}) or {}).get("pid")
    finally:
        os.utime(module, ns=(st.st_atime_ns, st.st_mtime_ns))  # the new one is outdated now
        if new and new != old:
            os.kill(new, signal.SIGTERM)
            for _ in range(200):  # gone before the session's leftover check
                try:
                    if Path(f"/proc/{new}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z":
                        break
                except OSError:
                    break
                time.sleep(0.05)
