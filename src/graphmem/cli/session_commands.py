"""``graphmem sessions``, ``graphmem session`` and ``graphmem consolidate``."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from graphmem.cli.app import _console, _emit, _spec_args, command, deprecated_alias, escape, print_table


def _open(args: argparse.Namespace):
    from graphmem.facade.memory import Memory
    from graphmem.models import check_folders

    check_folders(spec=args.spec_dir, project=args.project_dir)
    return Memory(args.spec_dir, args.project_dir or (None if args.spec_dir else Path.cwd()))


def _when(iso: str | None) -> str:
    return (iso or "")[:19].replace("T", " ")


def _sessions_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--workspace", default=None,
                   help="workspace folder the sessions ran in (default: the project folder)")
    p.add_argument("--limit", type=int, default=20, help="how many sessions (default 20)")
    p.add_argument("--rebuild", action="store_true",
                   help="re-read every session file of the spec into the index first")
    _spec_args(p, required=False)


def _cmd_sessions(args: argparse.Namespace) -> int:
    with _open(args) as m:
        if args.rebuild:
            m.rebuild_episode_index()
        rows = m.list_recent_sessions(args.workspace, limit=args.limit)

    def show(rows):
        from rich.table import Table
        from rich.text import Text

        t = Table("started", "status", "turns", "tokens", "first prompt")
        t.add_column("session", no_wrap=True)  # ids are copied from here
        for r in rows:
            prompt = (r["first_prompt"] or "").replace("\n", " ")
            t.add_row(_when(r["started_at"]), Text(str(r["status"])), str(r["turns"]),
                      str(r["total_tokens"]), Text(prompt[:80] + ("…" if len(prompt) > 80 else "")),
                      Text(r["session_id"]))
        if rows:
            print_table(_console(), t)
        else:
            _console().print("No sessions.")
    return _emit(args, rows, show)


command("sessions", "recent episodic sessions, each with its first prompt")(_cmd_sessions)(
    _sessions_args)


def _session_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("session_id", help="the id start_session returned (see `graphmem sessions`)")
    _spec_args(p)


def _cmd_session(args: argparse.Namespace) -> int:
    with _open(args) as m:
        data = {"session": m.get_session(args.session_id),
                "turns": m.get_session_history(args.session_id),
                "steps": m.get_session_steps(args.session_id)}

    def show(d):
        c = _console()
        s = d["session"]
        c.rule(f"[bold]{escape(s['session_id'])}[/] {escape(str(s['status']))}, "
               f"{s['total_tokens']} tokens")
        if s.get("summary"):
            c.print(s["summary"], markup=False, highlight=False)
        events = [(t["at"], f"{t['role']}: {t['content']}") for t in d["turns"]]
        events += [(x["at"], f"[step] {x['name']}: {x['status']}") for x in d["steps"]]
        for at, text in sorted(events, key=lambda e: e[0] or ""):
            c.print(f"{_when(at)}  {text}", markup=False, highlight=False)
    return _emit(args, data, show)


command("session", "one session's turns and steps")(_cmd_session)(_session_args)


def _consolidate_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--whole-project", action="store_true",
                   help="every spec folder of the project, into <project>/.graphmem/memory_summary.md")
    p.add_argument("--sessions", type=int, default=50,
                   help="how many of the most recent sessions to read (default 50)")
    p.add_argument("--concurrency", type=int, default=8,
                   help="session files read at once (default 8)")
    _spec_args(p, required=False)
    deprecated_alias(p, "--project", "--whole-project", "whole_project", nargs=0)


def _cmd_consolidate(args: argparse.Namespace) -> int:
    bar = None
    if sys.stderr.isatty() and not args.json:
        from rich.progress import Progress

        bar = Progress(transient=True, console=_console(stderr=True))
        task = bar.add_task("reading sessions", total=None)

        def advance(done: int, total: int) -> None:
            bar.update(task, completed=done, total=total)
    with _open(args) as m:
        if bar is not None:
            with bar:
                report = m.consolidate(args.sessions, args.concurrency, project=args.whole_project,
                                       progress=advance)
        else:
            report = m.consolidate(args.sessions, args.concurrency, project=args.whole_project)

    def show(r):
        c = _console()
        c.print(f"sessions scanned: {r['sessions_scanned']}  with facts: {r['sessions_with_facts']}  "
                f"active skipped: {r['active_sessions_skipped']}")
        c.print(f"candidate facts: {r['candidate_facts']}  near-duplicates merged: "
                f"{r['near_duplicates_dropped']}  facts written: {r['facts_written']} ({r['mode']})")
        if r["path"]:
            c.print(f"wrote {r['path']}", markup=False, highlight=False)
        if r["detail"]:
            c.print(r["detail"], markup=False, highlight=False)
    return _emit(args, report, show)


command("consolidate", "summarise the recent sessions' lessons into memory_summary.md")(
    _cmd_consolidate)(_consolidate_args)
