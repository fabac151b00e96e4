"""bench/_hook_harness.py plays Claude Code's side of the hooks contract: settings read and merged,
matchers, one process per handler with the event on stdin, exit codes, JSON output, timeouts;
and the naive capture hook bench/agent_hooks.py compares graphmem with captures and injects."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "bench"))
from _hook_harness import ClaudeSession, ConfigError, HookRunner, matches

BENCH = Path(__file__).resolve().parent.parent / "bench"


def settings(project: Path, hooks: dict, name: str = "settings.json", **extra) -> None:
    (project / ".claude").mkdir(exist_ok=True)
    (project / ".claude" / name).write_text(json.dumps({"hooks": hooks, **extra}))


def command(cmd: str, **extra) -> list[dict]:
    return [{"hooks": [{"type": "command", "command": cmd, **extra}]}]


def script(tmp_path: Path, name: str, body: str) -> str:
    p = tmp_path / name
    p.write_text("import json, sys\nevent = json.load(sys.stdin)\n" + body)
    return f"{sys.executable} {p}"


def test_matchers_follow_the_documented_rule():
    assert matches(None, "Read") and matches("*", "Read") and matches("", "Bash")
    assert matches("Edit|Write", "Write") and matches("Edit, Write", "Edit")
    assert not matches("Edit|Write", "MultiEdit")  # a name list is exact
    assert matches("Multi.*", "MultiEdit") and matches("mcp__.*", "mcp__x__y")
    assert not matches("^Edit$", "MultiEdit")


def test_settings_merge_and_each_handler_runs_with_the_event_on_stdin(tmp_path):
    seen = tmp_path / "seen.jsonl"
    record = script(tmp_path, "record.py", f"open({str(seen)!r}, 'a').write(json.dumps(event) + '\\n')\n"
                                            "print('plain context from the hook')\n")
    answer = script(tmp_path, "answer.py",
                    "print(json.dumps({'hookSpecificOutput': {'hookEventName': event['hook_event_name'],"
                    " 'additionalContext': 'json context for ' + event['prompt']}}))\n")
    settings(tmp_path, {"UserPromptSubmit": command(record)})
    settings(tmp_path, {"UserPromptSubmit": command(answer)}, "settings.local.json")
    runner = HookRunner(tmp_path)
    cs = ClaudeSession(runner, "s1", tmp_path / "transcripts")
    res = cs.prompt("fix the parser")
    assert sorted(res.context) == ["json context for fix the parser", "plain context from the hook"]
    event = json.loads(seen.read_text())
    assert event["hook_event_name"] == "UserPromptSubmit" and event["prompt"] == "fix the parser"
    assert event["cwd"] == str(tmp_path) and event["session_id"] == cs.id
    assert event["permission_mode"] == "default" and event["transcript_path"] == str(cs.transcript)
    assert json.loads(cs.transcript.read_text())["message"]["content"] == "fix the parser"
    assert runner.failures == [] and len(runner.walls["UserPromptSubmit"]) == 2


def test_tool_events_match_on_the_tool_and_get_absolute_paths(tmp_path):
    seen = tmp_path / "seen.jsonl"
    record = script(tmp_path, "record.py", f"open({str(seen)!r}, 'a').write(json.dumps(event) + '\\n')\n")
    settings(tmp_path, {"PreToolUse": [{"matcher": "Edit|Write", "hooks": [
        {"type": "command", "command": record}]}], "PostToolUseFailure": command(record)})
    cs = ClaudeSession(HookRunner(tmp_path), "s2", tmp_path / "transcripts")
    cs.tool({"action": "Read", "status": "ok", "detail": {"path": "src/a.py"}})
    cs.tool({"action": "Edit", "status": "ok", "detail": {"path": "src/a.py"}})
    cs.tool({"action": "Bash", "status": "error", "detail": {"command": "pytest -x"}})
    events = [json.loads(x) for x in seen.read_text().splitlines()]
    assert [(e["hook_event_name"], e["tool_name"]) for e in events] == [
        ("PreToolUse", "Edit"), ("PostToolUseFailure", "Bash")]
    assert events[0]["tool_input"]["file_path"] == str(tmp_path / "src/a.py")
    assert events[1]["error"] == "Exit code 1"


def test_exit_codes_bad_json_and_timeouts_are_judged_as_claude_code_does(tmp_path):
    wrong = script(tmp_path, "wrong.py", "print(json.dumps({'hookSpecificOutput': "
                   "{'hookEventName': 'Stop', 'additionalContext': 'misrouted'}}))\n")
    settings(tmp_path, {
        "UserPromptSubmit": command("echo 'held back' >&2; echo ignored; exit 2"),
        "SessionStart": command(wrong) + command("echo partial; exit 1")
                        + command("sleep 120", timeout=0.5),
        "SessionEnd": command("exit 2"),
        "PreToolUse": command("exit 2")})
    runner = HookRunner(tmp_path)
    cs = ClaudeSession(runner, "s3", tmp_path / "transcripts")
    start = cs.start()
    assert start.context == []
    whys = sorted(f["why"] for f in runner.failures)
    assert len(whys) == 3 and whys[0].startswith("exit 1") and "hookEventName" in whys[1]
    # killed at its timeout, not waited for: a hang guard two orders of magnitude wide
    assert whys[2] == "timed out after 0.5 s" and start.wait_ms < 60_000
    prompt = cs.prompt("do it")
    assert prompt.blocked and prompt.context == [] and not cs.transcript.exists()
    cs.tool({"action": "Edit", "status": "ok", "detail": {"path": "a.py"}})
    assert runner.counts["PreToolUse"]["denied"] == 1 and "PostToolUse" not in runner.counts
    cs.end()
    assert [f["event"] for f in runner.failures].count("SessionEnd") == 1


def test_disable_all_hooks_and_a_bad_settings_file(tmp_path):
    settings(tmp_path, {"UserPromptSubmit": command("echo hi")}, disableAllHooks=True)
    assert HookRunner(tmp_path).fire("UserPromptSubmit", {"prompt": "x"}).runs == []
    (tmp_path / ".claude" / "settings.local.json").write_text("{not json")
    with pytest.raises(ConfigError, match="settings.local.json: not JSON"):
        HookRunner(tmp_path)
    (tmp_path / ".claude" / "settings.local.json").write_text(json.dumps(
        {"hooks": {"Stop": [{"matcher": "*"}]}}))
    with pytest.raises(ConfigError, match=r"hooks.Stop\[0\] needs a 'hooks' list"):
        HookRunner(tmp_path)


def test_the_naive_hook_captures_and_injects_bm25_items_within_its_budget(tmp_path):
    hook = f"{sys.executable} {BENCH / '_naive_capture_hook.py'}"
    settings(tmp_path, {e: command(hook) for e in ("UserPromptSubmit", "PostToolUse")})
    runner = HookRunner(tmp_path, env={"PATH": "/usr/bin:/bin", "NAIVE_BUDGET": "60"})
    cs = ClaudeSession(runner, "s4", tmp_path / "transcripts")
    assert cs.prompt("the invoice parser drops unicode names").text == ""
    cs.tool({"action": "Edit", "status": "ok", "detail": {"path": "billing/invoice_parser.py"}})
    cs.tool({"action": "Bash", "status": "ok", "detail": {"command": "make deploy"}})
    for n in range(20):
        cs.prompt(f"unrelated chatter number {n} about the weather")
    ctx = cs.prompt("why does the invoice parser fail?").text
    assert "billing/invoice_parser.py" in ctx and "the invoice parser drops unicode names" in ctx
    assert "weather" not in ctx and "make deploy" not in ctx
    assert len(ctx) / 4 <= 60 and runner.failures == []


def test_settle_waits_for_the_workers_a_hook_detached(tmp_path):
    settings(tmp_path, {"Stop": command("setsid sleep 5 >/dev/null 2>&1 < /dev/null &")})
    runner = HookRunner(tmp_path)
    runner.fire("Stop", {"hook_event_name": "Stop"})
    assert len(runner.background()) == 1  # fire returned while its worker still runs
    runner.settle(60)
    assert runner.background() == []  # settle waited for it


def test_old_path_first_reads_the_answer_to_the_question_not_an_unrelated_briefing_line():
    from agent_hooks import old_first

    task = {"type": "locate", "text": "Where is `Hooks.start` implemented?",
            "current_answer": "cli/hooks.go", "stale_answers": ["cli/handlers.go"]}
    unrelated = "## briefing\n- `make lint` failed; it passed again [files: cli/handlers.go]\n"
    answer = "- `start` is defined in cli/hooks.go (lines 3-9)\n"
    assert old_first(task, unrelated, answer) == 0.0  # the briefing says nothing about `start`
    about_it = "- `Hooks.start` lives in cli/handlers.go\n"
    assert old_first(task, about_it, answer) == 1.0  # it does here, and comes first
    assert old_first(task, "", "- start() in cli/handlers.go; see cli/hooks.go\n") == 1.0
    assert old_first(task, "", "- cli/handlers.go is now cli/hooks.go: `start`\n") == 0.0
    assert old_first(task, "", "- `start` moved from cli/handlers.go to cli/hooks.go\n") == 0.0
    assert old_first(task, "- `restart` is in cli/handlers.go\n", "") == 0.0  # another name
    assert old_first(task, "", "") == 0.0
