"""The hooks when no search server runs (its idle exit, a reboot, an upgrade): SessionStart tells
the briefing kept on disk (``hooks/brief_cache.py``) while it is current and starts the server in
the background; the prompt and file hooks answer nothing rather than wait for it. Real hook
processes through the installed command, the event's JSON on stdin, as Claude Code runs them."""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

import pytest

from conftest import _home_under, run_cli
from test_agent_hooks import context, digested, fire, install, proj, session  # noqa: F401
from test_code_freshness import PAY, commit, git

GOTCHA = "`pytest tests/test_pay.py` failed (Exit code 1); it passed as `pytest tests/test_pay.py -p no:randomly`"
HELD = "The zebra importer must run after the currency table loads"
START = {"source": "startup"}


@pytest.fixture
def auto(monkeypatch, isolated_env):
    """Servers started by need (the default); the test's servers stopped after it, also those
    its hooks started in the background under other settings."""
    monkeypatch.setenv("GRAPHMEM_SEARCH_SERVER", "auto")
    yield isolated_env
    procs = [p for p in Path("/proc").iterdir() if p.name.isdigit()]
    for proc in procs:
        try:
            cmd = (proc / "cmdline").read_bytes()
        except OSError:
            continue
        if b"search-server" in cmd and _home_under(proc, isolated_env):
            try:
                os.kill(int(proc.name), signal.SIGTERM)
            except OSError:
                pass


def cfg_of(root: Path, env: dict | None = None):
    from graphmem.cli.search_client import client_config

    return client_config(env=dict(os.environ, **(env or {})), cwd=str(root))


def start_server(root: Path):
    """A warm search server for the project's settings, answering."""
    from graphmem.cli.search_client import ask, spawn

    cfg = cfg_of(root)
    spawn(cfg)
    deadline = time.monotonic() + 120
    while not (ask(cfg, {"op": "ping"}) or {}).get("pid"):
        assert time.monotonic() < deadline, cfg.log.read_text() if cfg.log.exists() else "no log"
        time.sleep(0.2)
    return cfg


def stop_server(root: Path, env: dict | None = None) -> None:
    """No server for the project's settings: the one holding the lock stopped, even loading."""
    from graphmem.cli.search_client import holder

    cfg = cfg_of(root, env)
    deadline = time.monotonic() + 60
    while (pid := holder(cfg)) is not None:
        assert time.monotonic() < deadline, "the server did not stop"
        if pid > 0:
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        time.sleep(0.05)


def wait_for_server(root: Path) -> int:
    """The pid of the server answering for the project's settings (waited for)."""
    from graphmem.cli.search_client import ask

    cfg = cfg_of(root)
    deadline = time.monotonic() + 120
    while not (pid := (ask(cfg, {"op": "ping"}) or {}).get("pid")):
        assert time.monotonic() < deadline, cfg.log.read_text() if cfg.log.exists() else "no log"
        time.sleep(0.2)
    return pid


def cache_file(root: Path) -> Path:
    return root / ".graphmem" / "spool" / "briefing.json"


def remember(root: Path, n: int, gotchas: list[str], hold: bool = False) -> None:
    from graphmem import Memory

    with Memory(None, root) as mem:
        mem.save_session_insights(n, {"subtasks_completed": ["Make refund() round half-even"],
                                      "discoveries": {"files_understood": {
                                          "src/pay.py": "edited for: refund rounding"},
                                          "gotchas_encountered": gotchas}}, hold=hold)


def kept_by_a_warm_start(root: Path, sid: str = "w-1") -> str:
    """Ask a warm server for the briefing (a SessionStart); the cache it left, checked to hold
    just what the hook told, and the server stopped."""
    start_server(root)
    told = context(fire(root, "SessionStart", {"session_id": sid, **START}, "startup"))
    stop_server(root)
    assert cache_file(root).exists(), "no briefing kept"
    kept = json.loads(cache_file(root).read_text())
    assert kept["text"] == told and kept["key"] == cfg_of(root).key
    return told


def mark_cache(root: Path, text: str) -> None:
    """Replace the kept briefing's text, its stamp left as it is: what a cold start tells then
    can only come from the file."""
    data = json.loads(cache_file(root).read_text())
    data["text"] = text
    cache_file(root).write_text(json.dumps(data))


def cold_start(root: Path, sid: str, env: dict | None = None):
    outs = fire(root, "SessionStart", {"session_id": sid, **START}, "startup", env)
    assert len(outs) == 1 and outs[0].returncode == 0
    return outs[0]


def test_a_cold_session_start_tells_the_kept_briefing_and_starts_the_server(proj, auto):
    from graphmem.cli.search_client import ask

    install(proj)
    remember(proj, 1, [GOTCHA])
    told = kept_by_a_warm_start(proj)
    assert "round half-even" in told and "pytest tests/test_pay.py -p no:randomly" in told
    cfg = cfg_of(proj)
    assert not (ask(cfg, {"op": "ping"}) or {}).get("pid")  # nothing answers now

    mark_cache(proj, "## graphmem: kept briefing MARK-1\n")
    out = cold_start(proj, "c-1")
    assert json.loads(out.stdout)["hookSpecificOutput"]["additionalContext"] == (
        "## graphmem: kept briefing MARK-1\n")
    assert out.stderr == ""
    pid = wait_for_server(proj)  # started by the hook, in the background, after it exited
    assert os.getsid(pid) == pid
    # warm again: the server's answer, which keeps the briefing once more (the mark is gone)
    again = context(fire(proj, "SessionStart", {"session_id": "c-2", **START}, "startup"))
    assert again == told and json.loads(cache_file(proj).read_text())["text"] == told


@pytest.mark.parametrize("change", ["memory", "edit", "rename", "settings", "elsewhere"])
def test_a_kept_briefing_is_told_only_while_what_it_was_made_from_is_unchanged(proj, auto,
                                                                               change):
    """Stale: a memory written, a file it names edited (not committed) or renamed (committed),
    other settings. Still current: a commit touching no file it names."""
    install(proj)
    remember(proj, 1, [GOTCHA])
    assert "src/pay.py" in kept_by_a_warm_start(proj)
    mark_cache(proj, "## graphmem: kept briefing MARK-2\n")
    env = None
    if change == "memory":
        remember(proj, 2, ["The refund rounding must use Decimal, never float arithmetic"])
    elif change == "edit":
        (proj / "src" / "pay.py").write_text(PAY.replace("order.total", "round(order.total)"))
    elif change == "rename":
        git(proj, "mv", "src/pay.py", "src/payments.py")
        commit(proj, "rename")
    elif change == "settings":
        env = {"GRAPHMEM_REVIEW": "hold"}  # another setting: another server's key
    else:
        (proj / "src" / "cart.py").write_text("def total(items):\n    return sum(items) or 0\n")
        commit(proj, "cart")
    out = cold_start(proj, "c-1", env)
    assert out.stderr == ""
    if change == "elsewhere":
        assert context([out]) == "## graphmem: kept briefing MARK-2\n"
        return
    assert "MARK-2" not in out.stdout
    if change != "memory":
        stop_server(proj, env)  # the one the hook started in the background
        return
    wait_for_server(proj)  # the server the hook started keeps the new briefing
    told = context(fire(proj, "SessionStart", {"session_id": "c-2", **START}, "startup"))
    assert "Decimal" in told and json.loads(cache_file(proj).read_text())["text"] == told


def test_memories_pending_review_are_never_kept_nor_told_cold(proj, auto):
    install(proj)
    remember(proj, 1, [GOTCHA])
    remember(proj, 2, [HELD], hold=True)
    told = kept_by_a_warm_start(proj)
    assert "pytest tests/test_pay.py" in told and "zebra" not in told
    assert "zebra" not in cache_file(proj).read_text()
    out = cold_start(proj, "c-1")
    assert context([out]) == told  # the kept one: the pending memory is not in it

    accepted = run_cli("review", "accept", "--all", "--project-dir", str(proj))
    assert accepted.returncode == 0, accepted.stderr
    out = cold_start(proj, "c-2")  # the review changed the validity log: not the kept one
    assert context([out]) != told
    wait_for_server(proj)
    now = context(fire(proj, "SessionStart", {"session_id": "c-3", **START}, "startup"))
    assert "zebra" in now and json.loads(cache_file(proj).read_text())["text"] == now


def test_the_digest_worker_keeps_the_briefing_of_the_session_it_digested(proj, auto):
    """With ``GRAPHMEM_REVIEW=hold`` the digested session's memories are pending: the briefing
    the worker keeps is current, under the hooks' key, and names none of them."""
    install(proj)
    hold = {"GRAPHMEM_REVIEW": "hold"}
    remember(proj, 1, [GOTCHA])
    pay = str(proj / "src" / "pay.py")
    session(proj, "s-held", "Teach the zebra importer to read the currency table first", [
        ("Edit", {"file_path": pay, "old_string": "a", "new_string": "b"}, None),
        ("Bash", {"command": "make check-zebra"}, "Exit code 2"),
        ("Bash", {"command": "make check-zebra V=1"}, None)], env=hold)
    digested(proj, "s-held")
    from graphmem.cli.search_client import client_config
    from graphmem.hooks.brief_cache import load

    cfg = client_config(env=dict(os.environ, **hold), cwd=str(proj))
    deadline = time.monotonic() + 60
    while (text := load(str(proj), cfg.key, cfg.home)) is None:  # kept by the worker, current
        assert time.monotonic() < deadline, (proj / ".graphmem" / "spool" / "digest.log").read_text()
        time.sleep(0.2)
    assert "pytest tests/test_pay.py" in text and "zebra" not in text
    stop_server(proj)  # the hooks' session started one for the hold settings
    pending = run_cli("review", "--project-dir", str(proj), "--json", env=hold)
    assert "zebra" in pending.stdout  # the session's memories are there, pending
    out = cold_start(proj, "c-1", hold)
    assert context([out]) == text and "zebra" not in out.stdout
    stop_server(proj, hold)  # the one the hook started in the background


def test_a_broken_cache_is_ignored_with_one_line(proj, auto):
    """Not JSON, not an object, another version, bytes: exit 0, one ``graphmem hook`` line on
    stderr naming the file, nothing told from it (no server may start here: it failed lately)."""
    install(proj)
    cfg = cfg_of(proj)
    cfg.err.write_text("failed on purpose\n")  # ``spawn`` waits SPAWN_BACKOFF after a failure
    cache_file(proj).parent.mkdir(parents=True, exist_ok=True)
    for raw in (b"not json", b"[1, 2]", json.dumps({"version": 99, "text": "MARK-3"}).encode(),
                b"\xff\xfe\x00garbage"):
        cache_file(proj).write_bytes(raw)
        out = cold_start(proj, "b-1")
        assert out.stdout == "" and "MARK-3" not in out.stderr
        lines = out.stderr.splitlines()
        assert len(lines) == 1 and lines[0].startswith("graphmem hook"), out.stderr
        assert "briefing.json" in lines[0]
    cfg.err.unlink()  # a server again: its briefing replaces the garbage, whole
    told = kept_by_a_warm_start(proj)
    assert context([cold_start(proj, "b-2")]) == told


def test_cold_prompt_and_file_hooks_answer_nothing_at_once_and_start_the_server(proj, auto):
    """No server: the prompt hook captures the prompt, answers nothing and exits before the
    server it started can answer (it does not wait for it); the next prompt is answered."""
    from graphmem.cli.search_client import ask

    install(proj)
    cfg = cfg_of(proj)
    prompt = {"session_id": "p-1", "prompt": "Where is `total` implemented?"}
    outs = fire(proj, "UserPromptSubmit", prompt)
    assert outs[0].stdout == "" and outs[0].stderr == ""
    assert not (ask(cfg, {"op": "ping"}) or {}).get("pid")  # not waited for ...
    spool = (proj / ".graphmem" / "spool" / "p-1.jsonl").read_text()
    assert json.loads(spool)["prompt"] == prompt["prompt"]
    wait_for_server(proj)  # ... but started
    told = context(fire(proj, "UserPromptSubmit", prompt))
    assert "`total` is defined in src/cart.py" in told

    stop_server(proj)
    read = {"session_id": "p-1", "tool_name": "Read",
            "tool_input": {"file_path": str(proj / "src" / "cart.py")}}
    outs = fire(proj, "PreToolUse", read, "Read")
    assert outs[0].stdout == "" and outs[0].stderr == ""
    assert not (ask(cfg, {"op": "ping"}) or {}).get("pid")
    wait_for_server(proj)
    stop_server(proj)


@pytest.mark.serial  # changes a module's mtime: every warm server steps aside
def test_after_an_upgrade_a_kept_briefing_is_told_and_a_new_server_replaces_the_old(proj, auto):
    """The warm server's graphmem changed on disk: it answers ``wrong_server`` and exits; the
    SessionStart tells the kept briefing at once, and the server it starts (``--replace``)
    waits for the old one's lock, then answers."""
    import graphmem.errors
    from graphmem.cli.search_client import ask

    install(proj)
    remember(proj, 1, [GOTCHA])
    kept_by_a_warm_start(proj)
    mark_cache(proj, "## graphmem: kept briefing MARK-4\n")
    cfg = start_server(proj)
    old = ask(cfg, {"op": "ping"})["pid"]
    module = graphmem.errors.__file__
    st = os.stat(module)
    try:
        os.utime(module, ns=(st.st_atime_ns, st.st_mtime_ns + 1_000_000_000))
        out = cold_start(proj, "u-1")
        assert context([out]) == "## graphmem: kept briefing MARK-4\n" and out.stderr == ""
        deadline = time.monotonic() + 120
        new = None
        while new in (None, old):
            assert time.monotonic() < deadline, cfg.log.read_text() if cfg.log.exists() else "-"
            time.sleep(0.2)
            new = (ask(cfg, {"op": "ping"}) or {}).get("pid")
        assert "--replace" in Path(f"/proc/{new}/cmdline").read_bytes().decode(errors="replace")
    finally:
        os.utime(module, ns=(st.st_atime_ns, st.st_mtime_ns))  # the new one is outdated now
        stop_server(proj)
