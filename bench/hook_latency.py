"""What one hook process costs, per event: wall time and CPU time, as Claude Code runs it.

Installs graphmem's Claude Code hooks into a small git project (``graphmem hooks install
claude-code``, so the command line is the one a user gets), seeds its memory with one digested
session, starts the warm search server, then plays ``--rounds`` short sessions through
bench/_hook_harness.py (settings read from .claude/settings.json, one process per handler, the
event's JSON on stdin, ``sh -c`` or exec form as configured): SessionStart, two turns of
UserPromptSubmit, PreToolUse/PostToolUse on Read, Edit, Bash, Grep and a failing Bash
(PostToolUseFailure), Stop; a PreCompact; SessionEnd. Between turns and sessions it waits for the
digest worker the Stop hook detached (``settle``: the time a person takes to read and type).

Per event it prints p50/p95 of the wall time (spawn until the hook's stdout and stderr close) and
of the CPU time (user + system of the hook process and what it waited for: the detached server
and digest worker are not counted), which load on a shared machine inflates far less than wall.
Reference rows: ``python -I -S -c pass`` and ``python -c pass`` (the interpreter's floor with
and without ``site``), and the warm server's own answer time per action, asked directly (the
part of a hook's wall time that is not its process). Also the very first SessionStart and
UserPromptSubmit of the run, with no server and no briefing kept yet (SessionStart starts one
and waits for it up to 1.5 s; the prompt does not wait).
The load average is recorded with the run. The home is the default one (``platformdirs``, under
a temporary ``XDG_DATA_HOME``), as a user who set no ``GRAPHMEM_HOME`` has it.

    .venv/bin/python bench/hook_latency.py [--rounds 8] [--exe CMD]   # about 2 minutes
    .venv/bin/python bench/hook_latency.py --rounds 2 --cold 8          # plus cold rows

``--cold N`` adds N cold rounds after the warm ones: before each of SessionStart,
UserPromptSubmit and PreToolUse (Read) the search server is stopped, as after its idle exit, a
reboot or an upgrade, so the hook finds none; rows ``cold <event>`` give p50/p95 and how many
answers had context (SessionStart's briefing from the cache on disk, see README: Agent hooks).

``--exe`` replaces the installed command's program (before `` hook ``) to compare entry points, e.g.
``--exe "$PWD/.venv/bin/python -m graphmem.cli"``. Writes bench/results/hook_latency.json.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import pct, table, write_json
from _hook_harness import ClaudeSession, EventResult, HookRunner

ORDER = ("SessionStart", "UserPromptSubmit", "PreToolUse", "PostToolUse", "PostToolUseFailure",
         "Stop", "PreCompact", "SessionEnd")
TARGET = {"SessionStart": 150, "UserPromptSubmit": 150}  # ms p95; every other event: 100
FILES = {
    "src/billing/invoice.py": "def total(lines):\n    return sum(l.price * l.qty for l in lines)\n",
    "src/billing/refund.py": "def refund(invoice, amount):\n    return invoice.total - amount\n",
    "src/api/routes.py": "from billing.invoice import total\n\nROUTES = {'/total': total}\n",
    "tests/test_invoice.py": "def test_total():\n    assert True\n",
    "README.md": "# shop\nBilling service: invoices and refunds.\n",
}
PROMPTS = ["Fix the rounding bug in invoice totals when a line has a discount",
           "Where is the refund amount computed? Add a check that it never exceeds the total",
           "The /total route returns 500 on an empty invoice; make it return 0",
           "Add a test for refunds larger than the invoice"]


class TimedRunner(HookRunner):
    """A HookRunner that also records each synchronous handler's CPU time (ms) per event."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.cpus: dict[str, list[float]] = {}
        self.record = True

    def fire(self, event: str, payload: dict) -> EventResult:
        """Fire ``event``; its handlers' CPU is the change in the reaped children's usage."""
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        res = super().fire(event, payload)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpu = (after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime) * 1000
        if res.runs and self.record:
            self.cpus.setdefault(event, []).append(cpu)
        if not self.record:  # warm-up: forget its times
            self.walls.pop(event, None)
            self.waits.pop(event, None)
        return res


def make_project(root: Path) -> Path:
    """A small git repository with a few source files."""
    project = root / "shop"
    for rel, text in FILES.items():
        (project / rel).parent.mkdir(parents=True, exist_ok=True)
        (project / rel).write_text(text)
    git = ["git", "-C", str(project), "-c", "user.name=bench", "-c", "user.email=b@x"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "start"], check=True)
    return project


def graphmem_cli() -> list[str]:
    """This installation's ``graphmem`` console script."""
    exe = Path(sys.executable).parent / "graphmem"
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "graphmem.cli"]


def interpreter() -> str:
    """The Python the ``graphmem`` script runs (its ``#!`` line): the server's key names it, so
    the bench asks the hooks' server only from that interpreter."""
    script = graphmem_cli()[0]
    try:
        first = Path(script).read_text(errors="replace").splitlines()[0]
    except (OSError, IndexError):
        return sys.executable
    return first[2:].strip() if first.startswith("#!/") else sys.executable


def install(project: Path, env: dict, exe: str | None) -> list[str]:
    """Install the hooks (``--exe`` rewrites the program); the commands as written."""
    subprocess.run([*graphmem_cli(), "hooks", "install", "claude-code", "--project-dir",
                    str(project)], check=True, env=env, capture_output=True)
    path = project / ".claude" / "settings.json"
    import json

    data = json.loads(path.read_text())
    commands = []
    for groups in data["hooks"].values():
        for g in groups:
            for h in g["hooks"]:
                program, sep, rest = h.get("command", "").partition(" hook ")
                if exe and sep:
                    h["command"] = f"{exe} hook {rest}"
                commands.append(h.get("command", "") + " " + " ".join(h.get("args") or []))
    path.write_text(json.dumps(data, indent=2))
    return commands


def session(runner: HookRunner, n: int, transcripts: Path, settle: float) -> None:
    """One short session: two turns of tools, a compaction, the end."""
    s = ClaudeSession(runner, f"bench-{n}", transcripts)
    s.start()
    files = list(FILES)
    for turn in range(2):
        s.prompt(PROMPTS[(n + turn) % len(PROMPTS)])
        f1, f2 = files[(n + turn) % 4], files[(n + turn + 1) % 4]
        for step in ({"action": "Read", "detail": {"path": f1}},
                     {"action": "Grep", "detail": {"pattern": "def total"}},
                     {"action": "Edit", "detail": {"path": f2}},
                     {"action": "Bash", "detail": {"command": "pytest tests/test_invoice.py -q"},
                      "status": "error"},
                     {"action": "Bash", "detail": {"command": "pytest tests/test_invoice.py"}}):
            s.tool(step)
        s.stop()
        runner.settle(settle)
    s.fire("PreCompact", {**s._common("PreCompact"), "trigger": "auto",
                          "custom_instructions": ""})
    s.end()
    runner.settle(settle)


def floor(argv: list[str], n: int) -> tuple[list[float], list[float]]:
    """Wall and CPU (ms) of ``argv`` run ``n`` times."""
    walls, cpus = [], []
    for _ in range(n):
        r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
        t0 = time.perf_counter()
        subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True, check=True)
        walls.append((time.perf_counter() - t0) * 1000)
        r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append((r1.ru_utime + r1.ru_stime - r0.ru_utime - r0.ru_stime) * 1000)
    return walls, cpus


def server_times(project: Path, env: dict, n: int) -> dict[str, list[float]]:
    """The warm server's own answer time (ms) per hook action, asked from here: the part of a
    hook's wall time that is not its process."""
    code = ("import json, sys, time\n"
            "from graphmem.cli.search_client import ask, client_config\n"
            "project, n = sys.argv[1], int(sys.argv[2])\n"
            "cfg = client_config(cwd=project)\n"
            "reqs = {'brief': {}, 'prompt': {'prompt': %r}, 'file': {'path': %r}}\n"
            "out = {}\n"
            "for action, fields in reqs.items():\n"
            "    for _ in range(n):\n"
            "        t = time.perf_counter()\n"
            "        got = ask(cfg, {'op': 'hook', 'action': action, 'project_dir': project,"
            " **fields})\n"
            "        if got is not None and 'context' in got:  # answered, not refused\n"
            "            out.setdefault(action, []).append((time.perf_counter() - t) * 1000)\n"
            "print(json.dumps(out))\n") % (PROMPTS[1], list(FILES)[1])
    got = subprocess.run([interpreter(), "-c", code, str(project), str(n)], env=env,
                         capture_output=True, text=True)
    import json

    return json.loads(got.stdout) if got.returncode == 0 else {}


def stop_servers(env: dict) -> None:
    """Stop the search server this run's home started (by the pid in its lock file), also one
    still loading; return once none holds the lock."""
    import signal

    code = ("from graphmem.cli.search_client import client_config, holder\n"
            "c = client_config(cwd=%r)\nprint(holder(c) or '' if c else '')" % env["PWD"])
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        out = subprocess.run([interpreter(), "-c", code], env=env, capture_output=True, text=True)
        pid = out.stdout.strip()
        if not pid:
            return
        if pid.lstrip("-").isdigit() and int(pid) > 0:
            try:
                os.kill(int(pid), signal.SIGTERM)
            except ProcessLookupError:
                pass
        time.sleep(0.05)  # -1: holding the lock, its pid not written yet


def cold_rounds(project: Path, env: dict, transcripts: Path, n: int) -> TimedRunner:
    """``n`` rounds of SessionStart, UserPromptSubmit and PreToolUse (Read), each with no search
    server running (stopped just before): what a hook costs when the server is cold."""
    runner = TimedRunner(project, env=env, max_timeout=30)
    told: dict[str, list[bool]] = {}  # event -> whether each answer had context
    files = list(FILES)
    for i in range(n):
        s = ClaudeSession(runner, f"cold-{i}", transcripts)
        for event in ("SessionStart", "UserPromptSubmit", "PreToolUse"):
            stop_servers(env)
            if event == "SessionStart":
                res = s.start()
            elif event == "UserPromptSubmit":
                res = s.prompt(PROMPTS[i % len(PROMPTS)])
            else:
                res = s.fire("PreToolUse", {**s._common("PreToolUse"), "tool_name": "Read",
                                            "tool_input": {"file_path": str(project / files[i % 4])},
                                            "tool_use_id": f"toolu_cold{i}"})
            told.setdefault(event, []).append(bool(res.text.strip()))
        runner.settle(5.0)
    stop_servers(env)
    runner.told = told  # type: ignore[attr-defined]
    return runner


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rounds", type=int, default=8, help="sessions played (default 8)")
    ap.add_argument("--exe", default=None, help="the program the hook commands run")
    ap.add_argument("--settle", type=float, default=20.0,
                    help="seconds waited at most for the digest worker between turns")
    ap.add_argument("--name", default="hook_latency", help="bench/results/<name>.json")
    ap.add_argument("--cold", type=int, default=0,
                    help="rounds with the search server stopped before each answering event")
    args = ap.parse_args()
    load = os.getloadavg()
    root = Path(tempfile.mkdtemp(prefix="hook-latency-"))
    try:
        project = make_project(root)
        # the default home, as a user has it (platformdirs resolves it), in a folder of the run's
        env = {**os.environ, "XDG_DATA_HOME": str(root / "data"), "TMPDIR": str(root),
               "PWD": str(project), "GRAPHITI_TELEMETRY_ENABLED": "false"}
        for name in ("GRAPHMEM_HOOKS", "GRAPHMEM_HOME", "GRAPHMEM_SEARCH_SERVER"):
            env.pop(name, None)
        commands = install(project, env, args.exe)
        runner = TimedRunner(project, env=env, max_timeout=30)
        transcripts = root / "transcripts"
        # cold: no server yet; the hooks start one (and a first digest seeds the memory)
        runner.record = False
        cold = TimedRunner(project, env=env, max_timeout=30)
        s = ClaudeSession(cold, "cold", transcripts)
        s.start()
        s.prompt(PROMPTS[0])
        cold_rows = {e: (cold.walls[e][0], cold.cpus[e][0]) for e in cold.walls}
        session(runner, -1, transcripts, args.settle)  # warm-up: memory seeded, server loaded
        runner.record = True
        runner.walls.clear()
        runner.waits.clear()
        runner.failures.clear()
        t0 = time.perf_counter()
        for n in range(args.rounds):
            session(runner, n, transcripts, args.settle)
        played = time.perf_counter() - t0
        served = server_times(project, env, 20)
        cold_runner = cold_rounds(project, env, transcripts, args.cold) if args.cold else None
        fl = {"python -I -S -c pass": floor([sys.executable, "-I", "-S", "-c", "pass"], 20),
              "python -c pass": floor([sys.executable, "-c", "pass"], 20)}
        stop_servers(env)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    load_after = os.getloadavg()
    rows, out = [], {}
    for event in ORDER:
        w, c = runner.walls.get(event, []), runner.cpus.get(event, [])
        if not w:
            continue
        target = TARGET.get(event, 100)
        fails = sum(1 for f in runner.failures if f["event"] == event)
        out[event] = {"n": len(w), "wall_p50": pct(w, 50), "wall_p95": pct(w, 95),
                      "cpu_p50": pct(c, 50), "cpu_p95": pct(c, 95), "target_p95": target,
                      "failures": fails}
        rows.append([event, len(w), round(pct(w, 50), 1), round(pct(w, 95), 1),
                     round(pct(c, 50), 1), round(pct(c, 95), 1), target, fails])
    for name, (w, c) in fl.items():
        out[name] = {"n": len(w), "wall_p50": pct(w, 50), "wall_p95": pct(w, 95),
                     "cpu_p50": pct(c, 50), "cpu_p95": pct(c, 95)}
        rows.append([name, len(w), round(pct(w, 50), 1), round(pct(w, 95), 1),
                     round(pct(c, 50), 1), round(pct(c, 95), 1), "", ""])
    for action, w in served.items():
        out[f"server {action}"] = {"n": len(w), "wall_p50": pct(w, 50), "wall_p95": pct(w, 95)}
        rows.append([f"server alone: {action}", len(w), round(pct(w, 50), 1),
                     round(pct(w, 95), 1), "", "", "", ""])
    for event, (w, c) in cold_rows.items():
        out[f"cold {event}"] = {"n": 1, "wall": w, "cpu": c}
        rows.append([f"cold {event} (no server)", 1, round(w, 1), "", round(c, 1), "", "", ""])
    if cold_runner is not None:
        for event in ("SessionStart", "UserPromptSubmit", "PreToolUse"):
            w, c = cold_runner.walls.get(event, []), cold_runner.cpus.get(event, [])
            told = cold_runner.told.get(event, [])  # type: ignore[attr-defined]
            if not w:
                continue
            target = TARGET.get(event, 100)
            out[f"cold {event}"] = {"n": len(w), "wall_p50": pct(w, 50), "wall_p95": pct(w, 95),
                                    "cpu_p50": pct(c, 50), "cpu_p95": pct(c, 95),
                                    "target_p95": target, "with_context": sum(told)}
            rows.append([f"cold {event} ({sum(told)}/{len(told)} told)", len(w),
                         round(pct(w, 50), 1), round(pct(w, 95), 1), round(pct(c, 50), 1),
                         round(pct(c, 95), 1), target, ""])
    loads = f"load {load[0]:.2f} before, {load_after[0]:.2f} after; {played:.0f} s played"
    table(f"Hook processes ({loads}; {commands[0]})",
          ["event", "n", "wall p50", "wall p95", "cpu p50", "cpu p95", "target", "fail"], rows)
    write_json(args.name, {"load_before": load, "load_after": load_after, "commands": commands,
                           "rounds": args.rounds, "events": out,
                           "failures": runner.failures[:20]})


if __name__ == "__main__":
    main()
