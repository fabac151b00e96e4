"""Agent hooks measured as Claude Code runs them: real Claude Code sessions replayed as hook events.

Installs a system's hooks into a project (a git repository that evolves as in bench/codemem.py),
then replays ../shared/data/codemem/entire-cli: each session is SessionStart, then per turn
UserPromptSubmit with the prompt, PreToolUse/PostToolUse (or PostToolUseFailure) for its share of
the recorded tool steps, Stop, and SessionEnd; the session's tree changes are committed before its
last Stop. Every hook runs as Claude Code runs it (bench/_hook_harness.py: settings read from
.claude/settings.json, one process per handler, the event's JSON on stdin, timeouts, exit codes).
No API call besides the hooks. After each task's point, a probe session opens with the task as its
first prompt (SessionStart, UserPromptSubmit, SessionEnd) and what the hooks injected is scored:
FileRecall (the task's files named), tokens, gone paths shown unmarked (StaleLeakText's rule),
and for locate tasks ("Where is X implemented?") the current path and an old path first. "First"
is read in the answer to the question: the prompt's context and the briefing's lines that name
the symbol (the briefing is composed before any prompt; its other lines say nothing about where
X is, and the file X left often still exists); a move note ("a.go is now b.go") is a marked
mention. ``stalefirst_all`` keeps the stricter reading (an old path anywhere in briefing and
context before the current one). Tokens are reported per probe (briefing + first prompt: a
one-prompt session) and, over the replayed sessions, everything the hooks injected (briefing,
prompts' context, file notes) per prompt: the briefing is injected once a session.
Also per event: hook wait p50/p95 as processes, failures. Systems: ``graphmem`` (``graphmem hooks
install claude-code``) and ``naive`` (bench/_naive_capture_hook.py: every prompt and tool use
captured, BM25's top items injected on each prompt at the same budget).

Where the replay departs from a real project (see also ../shared/notes/claude-code-hooks.md): the
data does not say which turn ran which step, so a session's steps are spread evenly over its turns;
the project's own .claude/settings.json is left out of the tree (the data holds it as a blob id and
the installed hooks own it); probe prompts stay in the hooks' memory, as a user's would; before each
session and probe the bench waits for the work the hooks detached (``--settle``), as the time
between real sessions would. The naive hook reproduces issue 32's reference figures for FileRecall
(.133 here, .144 there) and tokens (781, 792), not its "where is X" current path (.14, .28): on
the full replay's injections 4 of 29 locate probes name the current path; counting the current
file's name alone gives 7/29 (.24), the current or the old path 7/29, the file's name or the old
path 9/29 (.31); captures replayed in-process (no "prompt:" prefix, Read steps with the
file's symbols, failures left out, steps twice, probes left out, a probe one session later, a
plain tokenizer) gave .00-.14, none .28.

    .venv/bin/python bench/agent_hooks.py [--hooks naive,graphmem] [--quick | --sessions N --tasks K]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _codemem_replay import gone_mentions, load_dataset, normalise, start
from _common import need, pct, table, write_json
from _hook_harness import ClaudeSession, HookRunner
from codemem import current_above, spread

HERE = Path(__file__).resolve().parent
DATA = Path(os.environ.get("GRAPHMEM_CODEMEM_DATA") or "/work/shared/data/codemem")
OWNED = (".claude/settings.json", ".claude/settings.local.json")  # the hooks' own, in the replay
EVENT_ORDER = ("SessionStart", "UserPromptSubmit", "PreToolUse", "PostToolUse",
               "PostToolUseFailure", "PostToolBatch", "SubagentStart", "SubagentStop", "Stop",
               "SessionEnd", "PreCompact")


def install(system: str, project: Path, env: dict, budget: int) -> None:
    """Install ``system``'s hooks into ``project``'s .claude/settings.json."""
    if system == "naive":
        hook = f"{sys.executable} {HERE / '_naive_capture_hook.py'}"
        capture = f"{sys.executable} -S {HERE / '_naive_capture_hook.py'}"
        entry = lambda cmd: [{"hooks": [{"type": "command", "command": cmd,  # noqa: E731
                                         "timeout": 30}]}]
        settings = {"hooks": {"UserPromptSubmit": entry(hook), "PostToolUse": entry(capture),
                              "PostToolUseFailure": entry(capture)}}
        env["NAIVE_BUDGET"] = str(budget)
        (project / ".claude").mkdir(exist_ok=True)
        (project / ".claude" / "settings.json").write_text(json.dumps(settings, indent=2))
        return
    graphmem = shutil.which("graphmem", path=env["PATH"]) or "graphmem"
    p = subprocess.run([graphmem, "hooks", "install", "claude-code", "--project-dir", str(project)],
                       env=env, capture_output=True, text=True, cwd=project)
    if p.returncode != 0:
        raise SystemExit(f"graphmem hooks install claude-code failed ({p.returncode}): "
                         f"{p.stderr.strip() or p.stdout.strip()}")


def without_owned(data: dict) -> dict:
    """The data without the project's own Claude Code settings files: the recorded tree holds
    them as blob ids, not JSON, and in the replay the installed hooks own them."""
    for block in (data["tree0"], data["symbols0"]):
        for p in OWNED:
            block.pop(p, None)
    for s in data["sessions"]:
        for p in OWNED:
            (s.get("tree_changes") or {}).pop(p, None)
    for t in data["tasks"]:
        if t.get("files"):
            t["files"] = [f for f in t["files"] if f not in OWNED]
    return data


def exclude_new(repo) -> None:
    """Keep what the hooks write in the project (top-level folders the data never had) out of
    the replay's commits, as a user's .gitignore would."""
    tops = {p.split("/", 1)[0] for p in repo.ever} | {".git"}
    path = repo.root / ".git" / "info" / "exclude"
    have = set(path.read_text().split())
    new = [f"/{n}" + ("/" if (repo.root / n).is_dir() else "") for n in os.listdir(repo.root)
           if n not in tops]
    new = [n for n in new if n not in have and n.rstrip("/").lstrip("/") + "/" not in have]
    if new:
        with path.open("a") as f:
            f.write("".join(n + "\n" for n in new))


def turn_steps(s: dict) -> list[tuple[str | None, list[dict]]]:
    """The session's turns, each with its share of the recorded steps (the data does not say
    which turn ran which step: they are spread evenly, in order)."""
    turns = [t["content"] for t in s.get("turns") or [] if t.get("role") == "user"]
    steps = list(s.get("steps") or [])
    if not turns:
        return [(None, steps)] if steps else []
    n = len(turns)
    return [(t, steps[k * len(steps) // n:(k + 1) * len(steps) // n]) for k, t in enumerate(turns)]


def replay_session(runner: HookRunner, repo, s: dict, transcripts: Path, prompt_tokens: list,
                   spent: dict) -> None:
    """One recorded session as Claude Code's hook events; its tree changes committed before its
    last Stop. ``spent`` adds up what every hook injected (tokens by event) and the prompts, and
    the prompts whose context names none of the files the session then touched (``nofile``)."""
    plan = turn_steps(s)
    if not plan:
        repo.apply(s)
        repo.commit(s["id"], s["time"])
        return
    cs = ClaudeSession(runner, s["id"], transcripts)
    cs.start("startup")
    touched = set((s.get("tree_changes") or {})) | {
        (st.get("detail") or {}).get("path") for st in s.get("steps") or []} - {None}
    for k, (prompt, steps) in enumerate(plan):
        if prompt is not None:
            told = cs.prompt(prompt).text
            prompt_tokens.append(len(told) / 4)
            spent["prompts"] = spent.get("prompts", 0) + 1
            if told.strip():
                spent["told"] = spent.get("told", 0) + 1
                spent["nofile"] = spent.get("nofile", 0) + (not any(f in told for f in touched))
        for st in steps:
            cs.tool(st)
        if k == len(plan) - 1:
            exclude_new(repo)
            repo.apply(s)
            repo.commit(s["id"], s["time"])
        cs.stop()
    cs.end("other")
    for r in cs.results:
        if r.text:
            spent[r.event] = spent.get(r.event, 0.0) + len(r.text) / 4


def probe(runner: HookRunner, task: dict, transcripts: Path) -> dict:
    """A session opened with the task as its first prompt: what SessionStart and the prompt's
    hooks injected."""
    cs = ClaudeSession(runner, f"probe:{task['id']}", transcripts)
    t0 = cs.start("startup")
    t1 = cs.prompt(task["text"])
    cs.end("other")
    return {"start": t0.text, "prompt": t1.text}


def score(task: dict, injected: dict, repo) -> dict:
    """One probe's metrics (the README of the codemem data defines the rules reused here)."""
    ctx = "\n".join(x for x in (injected["start"], injected["prompt"]) if x)
    out: dict = {"id": task["id"], "type": task["type"], "tokens": len(ctx) / 4,
                 "tokens_start": len(injected["start"]) / 4,
                 "tokens_prompt": len(injected["prompt"]) / 4, "empty": float(not ctx.strip())}
    if task.get("files"):
        out["filerecall"] = sum(1 for f in task["files"] if f in ctx) / len(task["files"])
        out["nofile"] = float(bool(injected["prompt"].strip())
                              and not any(f in injected["prompt"] for f in task["files"]))
    out["path_mentions"], out["gone_unmarked"] = gone_mentions(ctx, repo)
    cur = task.get("current_answer")
    if task["type"] == "locate" and cur:
        out["currenthit"] = float(cur in ctx)
        pos = ctx.find(cur)
        olds = [ctx.find(a) for a in task.get("stale_answers") or [] if a in ctx]
        out["stalefirst_all"] = float(bool(olds) and (pos < 0 or min(olds) < pos))
        out["stalefirst"] = old_first(task, injected["start"], injected["prompt"])
        out.update({k: v for k, v in current_above(task, ctx, [], []).items() if k.endswith("ctx")})
    return out


SYMBOL = re.compile(r"`([^`]+)`")


def old_first(task: dict, start: str, prompt: str) -> float:
    """1 when the injection tells the agent an old path of the asked symbol before its current
    one. Read are the prompt's context (composed for the question) and the briefing's lines that
    name the symbol (composed before the question, the briefing answers nothing else about it:
    an unrelated memory naming the old file, which often still exists, is no answer); an old
    path inside a move note ("a.go is now b.go", "moved from a.go") is a marked mention."""
    cur, olds = task.get("current_answer"), task.get("stale_answers") or []
    m = SYMBOL.search(task.get("text") or "")
    names = {m.group(1), m.group(1).rsplit(".", 1)[-1]} if m else set()
    about = [x for x in start.splitlines()
             if any(re.search(rf"(?<![\w.]){re.escape(n)}(?!\w)", x) for n in names)]
    text = "\n".join(about + [prompt])
    for old in olds:
        text = text.replace(f"{old} is now", "").replace(f"moved from {old}", "")
    first_cur = text.find(cur) if cur else -1
    first_old = min((text.find(o) for o in olds if o in text), default=-1)
    return float(first_old >= 0 and (first_cur < 0 or first_old < first_cur))


def average(rows: list[dict]) -> dict:
    """Means over the tasks that have each metric; gone-unmarked pooled over path mentions."""
    keys = sorted({k for r in rows for k in r if isinstance(r[k], float)})
    out = {k: sum(r[k] for r in rows if k in r) / max(1, sum(1 for r in rows if k in r))
           for k in keys}
    mentions = sum(r["path_mentions"] for r in rows)
    out["gone_unmarked_share"] = sum(r["gone_unmarked"] for r in rows) / mentions if mentions \
        else 0.0
    out["path_mentions"] = mentions
    out["n"] = len(rows)
    for k in ("filerecall", "currenthit"):
        out[f"{k}_n"] = sum(1 for r in rows if k in r)
    return out


def amortised(spent: dict) -> dict:
    """What the hooks injected over the replayed sessions, per prompt: every event's tokens (the
    briefing once a session, the prompts' context, the notes on files) over the prompts; and the
    prompts given context that names none of the files their session touched."""
    prompts = max(1, spent.get("prompts", 0))
    events = {k: v for k, v in spent.items() if k not in ("prompts", "told", "nofile")}
    return {"per_prompt": sum(events.values()) / prompts,
            "by_event": {k: v / prompts for k, v in sorted(events.items())},
            "prompts": spent.get("prompts", 0), "told": spent.get("told", 0),
            "told_nofile": spent.get("nofile", 0)}


def findable(project: Path, env: dict, prompts: list[str], template: list[str]) -> dict:
    """How many of ``prompts`` a search command finds afterwards (its output names the prompt's
    first 60 characters, whitespace and case folded)."""
    found, misses = 0, []
    for text in prompts:
        cmd = [a.replace("{project}", str(project)).replace("{query}", text) for a in template]
        p = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=project, timeout=120)
        needle = normalise(text)[:60]
        try:
            hay = normalise(" ".join(_strings(json.loads(p.stdout))))
        except ValueError:
            hay = normalise(p.stdout)
        if needle and needle in hay:
            found += 1
        else:
            misses.append({"prompt": text[:120], "exit": p.returncode, "stderr": p.stderr[-300:]})
    return {"found": found, "sampled": len(prompts), "misses": misses}


def _strings(value) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v)]
    return []


def run_system(system: str, data: dict, tasks: list[dict], first: int, args, tmp: Path) -> dict:
    """Install ``system``, replay, probe every task at its point; the system's result block."""
    base = tmp / system
    root = base / "project"
    by_after, last, repo, spec = start(root, data, tasks)
    shutil.rmtree(root / ".auto-claude")  # start's spec folder: hooks work without one
    with (root / ".git" / "info" / "exclude").open("a") as f:
        f.write("".join(f"/{p}\n" for p in OWNED) + "/.naive-capture/\n")
    env = dict(os.environ, GRAPHMEM_HOME=str(base / "home"), GRAPHITI_TELEMETRY_ENABLED="false",
               GRAPHMEM_SEARCH_SERVER_IDLE=os.environ.get("GRAPHMEM_SEARCH_SERVER_IDLE", "30"),
               PATH=os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]),
               TMPDIR=str(base))
    install(system, root, env, args.budget)
    runner = HookRunner(root, env=env, max_timeout=args.max_timeout)
    notes = runner.validate()
    transcripts = base / "claude" / "projects"
    rows, prompt_tokens, prompts, settled, spent = [], [], [], 0.0, {}
    dump = open(args.injections + f".{system}.jsonl", "w") if args.injections else None
    t_start = time.perf_counter()
    sessions = data["sessions"]
    for i, s in enumerate(sessions[:last + 1]):
        if i < first:
            repo.apply(s)
            repo.commit(s["id"], s["time"])
        else:
            settled += runner.settle(args.settle)
            replay_session(runner, repo, s, transcripts, prompt_tokens, spent)
            prompts.extend(t["content"] for t in s.get("turns") or [] if t.get("role") == "user")
        for task in by_after.get(i, []):
            settled += runner.settle(args.settle)
            injected = probe(runner, task, transcripts)
            rows.append(score(task, injected, repo))
            if dump:
                dump.write(json.dumps({"task": task["id"], "type": task["type"],
                                       "files": task.get("files"),
                                       "current": task.get("current_answer"), **injected}) + "\n")
        if i >= first and (i - first) % 25 == 0 or i == last:
            print(f"{system}: session {i}/{last}, {len(rows)}/{len(tasks)} tasks, "
                  f"{len(runner.failures)} failures, {time.perf_counter() - t_start:.0f} s",
                  flush=True)
    replay_s = time.perf_counter() - t_start
    if dump:
        dump.close()
    result = {"replay_s": replay_s, "settle_s": settled, "notes": notes,
              "left_running": len(runner.background()), "sessions_replayed": last + 1 - first,
              "events": runner.report(), "failures": runner.failures[:50],
              "failures_n": len(runner.failures),
              "replay_prompt_tokens": {"mean": sum(prompt_tokens) / max(1, len(prompt_tokens)),
                                       "p95": pct(prompt_tokens, 95), "n": len(prompt_tokens)},
              "replay_injected": amortised(spent),
              "overall": average(rows), "by_type": {}, "tasks": rows}
    for typ in sorted({r["type"] for r in rows}):
        result["by_type"][typ] = average([r for r in rows if r["type"] == typ])
    if system == "graphmem" and args.findable and prompts:
        sample = random.Random(32).sample(prompts, min(args.findable, len(prompts)))
        result["findable"] = findable(root, env, sample, args.search_cmd.split())
    if args.keep:
        shutil.copytree(base, Path(args.keep) / system, dirs_exist_ok=True, symlinks=True,
                        ignore=lambda d, names: [n for n in names if n.endswith(".sock")])
    return result


def report(results: dict) -> None:
    """The quality table (systems side by side) and the per-event latency table."""
    cols = ["filerecall", "tokens", "tokens_prompt", "tokens_start", "empty", "nofile",
            "currenthit", "stalefirst", "stalefirst_all", "gone_unmarked_share"]
    rows = []
    for system, res in results.items():
        for typ, m in [("overall", res["overall"]), *res["by_type"].items()]:
            rows.append([system, typ, m["n"], *(m.get(c, float("nan")) for c in cols)])
    table("probe sessions: what the hooks injected for each task's first prompt (tokens = chars/4; "
          "nofile: the prompt's context names none of the task's files; stalefirst: an old path "
          "of the asked symbol before its current one, in the prompt's context and the briefing's "
          "lines naming the symbol; stalefirst_all: anywhere in briefing + context; "
          "gone_unmarked_share pooled over path mentions)", ["hooks", "type", "n", *cols], rows)
    lat = []
    for system, res in results.items():
        for event in sorted(res["events"], key=lambda e: EVENT_ORDER.index(e)
                            if e in EVENT_ORDER else 99):
            e = res["events"][event]
            if not e["handlers"]:
                continue
            target = 150 if event in ("SessionStart", "UserPromptSubmit") else 100
            lat.append([system, event, e["fired"], e["handlers"], e["wait_p50"], e["wait_p95"],
                        f"<= {target}", e["async_n"], e["async_p95"], e["blocked"], e["denied"],
                        e["failures"]])
    table("hook processes per event: wait = the agent held (ms, handlers in parallel; issue 32's "
          "target on p95); async = background handlers' wall (ms)",
          ["hooks", "event", "fired", "handlers", "wait p50", "wait p95", "target", "async n",
           "async p95", "blocked", "denied", "failures"], lat)
    for system, res in results.items():
        rp, f, inj = res["replay_prompt_tokens"], res.get("findable"), res.get("replay_injected")
        print(f"{system}: replay {res['replay_s']:.0f} s over {res['sessions_replayed']} sessions "
              f"(waiting for background work {res['settle_s']:.0f} s of it); "
              f"tokens per replayed prompt mean {rp['mean']:.0f} (p95 {rp['p95']:.0f}, "
              f"{rp['n']} prompts); failures {res['failures_n']}"
              + (f"; findable by search {f['found']}/{f['sampled']}" if f else ""))
        if inj:
            parts = ", ".join(f"{k} {v:.0f}" for k, v in inj["by_event"].items())
            print(f"  injected per replayed prompt, all events: {inj['per_prompt']:.0f} tokens "
                  f"({parts}); {inj['told']}/{inj['prompts']} prompts given context, "
                  f"{inj['told_nofile']} of them naming none of their session's files")
        for n in res["notes"]:
            print(f"  note: {n}")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--hooks", default="naive,graphmem", help="systems to measure, in order")
    ap.add_argument("--dataset", default="entire-cli")
    ap.add_argument("--tasks", type=int, default=None, help="at most K tasks, spread evenly")
    ap.add_argument("--types", default=None, help="only tasks of these types (e.g. locate)")
    ap.add_argument("--until", type=int, default=None,
                    help="stop after this session index (only tasks up to it)")
    ap.add_argument("--sessions", type=int, default=None,
                    help="replay the hook events of only the last N sessions up to the last "
                         "task (earlier ones only evolve the repository)")
    ap.add_argument("--quick", action="store_true",
                    help="a small run: --until 330 --sessions 80 --tasks 15")
    ap.add_argument("--settle", type=float, default=30.0,
                    help="before each session and probe, wait up to S s for the hooks' background "
                         "work (detached workers), as the time between real sessions would")
    ap.add_argument("--budget", type=int, default=800, help="the naive hook's token budget")
    ap.add_argument("--max-timeout", type=float, default=60.0, help="harness cap on a hook (s)")
    ap.add_argument("--findable", type=int, default=30,
                    help="prompts sampled for the findable-by-search check (graphmem; 0: off)")
    ap.add_argument("--search-cmd", default="graphmem search --project-dir {project} --json "
                    "--limit 10 {query}", help="the findable check's command ({project}, {query})")
    ap.add_argument("--injections", default=None,
                    help="write each probe's injected text to PREFIX.<hooks>.jsonl")
    ap.add_argument("--keep", default=None, help="copy each system's project and home here")
    ap.add_argument("--out", default="agent_hooks")
    ap.add_argument("--report", default=None, metavar="A.json,B.json",
                    help="print the tables of saved results side by side (runs nothing)")
    args = ap.parse_args()
    if args.report:
        merged: dict = {}
        for path in args.report.split(","):
            merged.update(json.loads(Path(path).read_text())["systems"])
        report(merged)
        return 0
    if args.quick:
        args.until = args.until or 330
        args.sessions = args.sessions or 80
        args.tasks = args.tasks or 15
    need(DATA / args.dataset, "the codemem datasets", "GRAPHMEM_CODEMEM_DATA")
    data = without_owned(load_dataset(DATA / args.dataset))
    n = len(data["sessions"])
    until = min(n - 1, args.until if args.until is not None else n - 1)
    types = set(args.types.split(",")) if args.types else None
    pool = [t for t in data["tasks"] if t["after"] <= until and (not types or t["type"] in types)]
    last = max((t["after"] for t in pool), default=until)
    first = max(0, last + 1 - args.sessions) if args.sessions else 0
    tasks = spread([t for t in pool if t["after"] >= first], args.tasks)
    results: dict = {}
    with tempfile.TemporaryDirectory(prefix="agent-hooks-") as tmp:
        for system in args.hooks.split(","):
            results[system] = run_system(system, data, tasks, first, args, Path(tmp))
    report(results)
    write_json(args.out, {"data": str(DATA / args.dataset), "tasks_n": len(tasks),
                          "first_session": first, "last_session": last, "budget": args.budget,
                          "load_average": os.getloadavg(), "systems": results})
    return 0


if __name__ == "__main__":
    sys.exit(main())
