"""The ``graphmem`` command line: parse, call the façade, format. Heavy imports stay lazy."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, Callable

COMMANDS: dict[str, tuple[Callable[[argparse.Namespace], int], Callable[[argparse.ArgumentParser], None], str]] = {}


def command(name: str, help: str):
    """Register a sub-command: ``fn(args) -> exit code`` plus a function adding its arguments."""

    def wrap(fn):
        def decorate(add_args):
            COMMANDS[name] = (fn, add_args, help)
            return fn
        return decorate
    return wrap


def _spec_args(p: argparse.ArgumentParser, required: bool = False) -> None:
    p.add_argument("--spec-dir", type=Path, required=required,
                   help="spec folder (e.g. auto-claude/specs/001-feature; default: the "
                        "project's own memory, <project>/.graphmem/memory)")
    p.add_argument("--project-dir", type=Path, default=None,
                   help="project root (default: the git work tree or .graphmem/project.toml "
                        "folder enclosing the spec, else two levels above it)")
    p.add_argument("--json", action="store_true", help="machine-readable JSON output")


def _memory(args: argparse.Namespace):
    from graphmem.facade.memory import Memory
    from graphmem.models import check_folders

    check_folders(spec=args.spec_dir, project=args.project_dir)
    return Memory(args.spec_dir, args.project_dir or (None if args.spec_dir else Path.cwd()))


def escape(text: str) -> str:
    """Stored text inside rich markup, shown as written (``[/]`` in a gotcha is not a tag)."""
    from rich.markup import escape as rich_escape

    return rich_escape(text)


def _console(stderr: bool = False):
    """A rich console; when its stream is not a terminal, long lines (paths) are never wrapped."""
    from rich.console import Console

    stream = sys.stderr if stderr else sys.stdout
    return Console(stderr=stderr, soft_wrap=not stream.isatty())


def print_table(console, table) -> None:
    """Print a rich table; piped, it takes the width of its content, so no cell is cut or folded."""
    if console.is_terminal:
        console.print(table)
        return
    from rich.console import Console
    from rich.measure import Measurement

    width = Measurement.get(console, console.options.update_width(1_000_000), table).maximum
    Console(file=console.file, soft_wrap=True, width=max(width, 20), color_system=None,
            highlight=False).print(table)


def status(text: str):
    """A spinner on stderr while slow work runs, only when stderr is a terminal (stdout stays
    clean for pipes); elsewhere a no-op context."""
    import contextlib

    if not sys.stderr.isatty():
        return contextlib.nullcontext()
    return _console(stderr=True).status(text)


def deprecated_alias(p: argparse.ArgumentParser, old: str, new: str, dest: str, **kw) -> None:
    """Accept ``old`` (hidden from help) as ``new`` for one more release, with a warning."""

    class Alias(argparse.Action):
        def __call__(self, parser, namespace, values, option_string=None):
            print(f"graphmem: warning: {old} is deprecated; use {new}", file=sys.stderr)
            setattr(namespace, self.dest, True if self.nargs == 0 else values)

    p.add_argument(old, dest=dest, action=Alias, help=argparse.SUPPRESS, **kw)


def _emit(args: argparse.Namespace, data: Any, human: Callable[[Any], None]) -> int:
    """Print ``data`` as JSON (``--json``, exact), or with ``human`` after stripping terminal
    escape sequences and control characters from every stored string (``display.py``)."""
    if getattr(args, "json", False):
        print(json.dumps(data, indent=2, default=str, ensure_ascii=False))
    else:
        from graphmem.cli.display import safe_data

        human(safe_data(data))
    return 0


# ---- file store commands --------------------------------------------------------------------
def _cmd_summary(args):
    with _memory(args) as m:
        data, where = m.summary(), m.spec_dir

    def show(s):
        c = _console()
        c.rule("[bold]Memory summary")
        c.print(f"Spec: [cyan]{escape(where.name)}[/]")
        c.print(f"Sessions: {s['total_sessions']}  Files mapped: {s['total_files_mapped']}  "
                f"Patterns: {s['total_patterns']}  Gotchas: {s['total_gotchas']}")
        for ins in s["recent_insights"]:
            c.print(f"  Session {ins.get('session_number')}: "
                    f"{len(ins.get('subtasks_completed', []))} subtasks completed")
    return _emit(args, data, show)


command("summary", "counts and recent sessions for a spec")(_cmd_summary)(_spec_args)


def _show_value(c, value: Any, indent: str) -> None:
    """One insight field: strings inline, lists as bullets, mappings as ``key: value`` lines."""
    if isinstance(value, dict):
        for key, inner in value.items():
            if isinstance(inner, (list, dict)):
                if inner:
                    c.print(f"{indent}{key}:", markup=False, highlight=False)
                    _show_value(c, inner, indent + "  ")
            else:
                c.print(f"{indent}{key}: {inner}", markup=False, highlight=False)
    elif isinstance(value, list):
        for item in value:
            if isinstance(item, (list, dict)):
                _show_value(c, item, indent + "  ")
            else:
                c.print(f"{indent}- {item}", markup=False, highlight=False)
    else:
        c.print(f"{indent}{value}", markup=False, highlight=False)


def _show_insights(sessions: list[dict]) -> None:
    c = _console()
    if not sessions:
        c.print("No session insights.")
    for ins in sessions:
        c.rule(f"[bold]Session {escape(str(ins.get('session_number', '?')))}[/] "
               f"{escape(str(ins.get('timestamp') or ''))}")
        for field, value in ins.items():
            if field in ("session_number", "timestamp") or value in (None, "", [], {}):
                continue
            c.print(f"[bold]{escape(field.replace('_', ' '))}[/]")
            _show_value(c, value, "  ")


def _cmd_insights(args):
    with _memory(args) as m:
        return _emit(args, m.load_all_insights(), _show_insights)


command("insights", "every session's insights")(_cmd_insights)(_spec_args)


def _cmd_map(args):
    with _memory(args) as m:
        data = m.load_codebase_map()

    def show(d):
        from rich.table import Table

        from rich.text import Text

        t = Table("file", "purpose")
        for path, purpose in sorted(d.items()):
            t.add_row(Text(path), Text(str(purpose)))  # stored text is never read as markup
        print_table(_console(), t)
    return _emit(args, data, show)


command("map", "the codebase map (file -> purpose)")(_cmd_map)(_spec_args)


def _bullets(title: str, method: str):
    def run(args):
        with _memory(args) as m:
            data = getattr(m, method)()

        def show(items):
            c = _console()
            c.print(f"[bold]{title}[/] ({len(items)})")
            for item in items:
                c.print(f"  - {item}", markup=False, highlight=False)
        return _emit(args, data, show)
    return run


command("patterns", "code patterns to follow")(_bullets("Code patterns", "load_patterns"))(_spec_args)
command("gotchas", "pitfalls to avoid")(_bullets("Gotchas", "load_gotchas"))(_spec_args)


def _clear_args(p):
    _spec_args(p)
    p.add_argument("--yes", action="store_true", help="do not ask for confirmation")


def _cmd_clear(args):
    m = _memory(args)
    if not args.yes:
        if not sys.stdin.isatty():
            print("graphmem: refusing to clear without confirmation; pass --yes", file=sys.stderr)
            return 2
        if input(f"Clear all memory for {m.spec_dir.name}? (yes/no): ").strip().lower() != "yes":
            _emit(args, {"cleared": False, "spec_dir": str(m.spec_dir)},
                  lambda d: print("Cancelled."))
            return 1
    with m:
        m.clear()
    return _emit(args, {"cleared": True, "spec_dir": str(m.spec_dir)},
                 lambda d: print("Memory cleared."))


command("clear", "delete a spec's memory (asks first; --yes to skip)")(_cmd_clear)(_clear_args)


def _doctor_args(p):
    _spec_args(p, required=False)
    p.add_argument("--check", action="store_true", help="make one cheap live call per provider")
    p.add_argument("--fix", action="store_true",
                   help="first repair what can be: rebuild a damaged index, make the index and the "
                        "graph match the files (of --spec-dir, --project-dir, or every project), "
                        "remove stale temp files")


def _cmd_doctor(args):
    from graphmem.cli.doctor import run_doctor

    fixed = None
    if args.fix:
        from graphmem.cli.doctor import run_fix

        with status("repairing"):
            fixed = run_fix(args.spec_dir, args.project_dir)
    with status("checking providers (loads the models)" if args.check else "checking"):
        report = run_doctor(args.spec_dir, args.project_dir, check=args.check)
    if fixed is not None:
        report["fixed"] = fixed

    def show(r):
        c = _console()
        if r.get("fixed"):
            c.rule("[bold]fixed")
            for f in r["fixed"]["index"]:
                c.print(f"index {f['spec'] or f['project']}: {f['added']} row(s) written, "
                        f"{f['removed']} dropped, {f['replayed']} journal entr(ies) replayed",
                        markup=False, highlight=False)
            for f in r["fixed"]["graph"]:
                c.print(f"graph {f['spec']}: " + ", ".join(f"{k} {v}" for k, v in f.items()
                                                           if k != "spec"),
                        markup=False, highlight=False)
            for path in r["fixed"]["temp_files_removed"]:
                c.print(f"removed {path}", markup=False, highlight=False)
        for section, rows in r["sections"].items():
            c.rule(f"[bold]{section}")
            for row in rows:
                mark = {"ok": "[green]ok[/]", "warn": "[yellow]warn[/]", "error": "[red]error[/]"}[row["status"]]
                c.print(f"{mark:>20}  {row['name']}: ", end="")
                c.print(row["detail"], markup=False, highlight=False)
    _emit(args, report, show)
    return 1 if report["errors"] else 0


command("doctor", "check settings, files, index and graph health")(_cmd_doctor)(_doctor_args)


# Commands of other areas register themselves from their own modules.
_COMMAND_MODULES = ("graphmem.cli.search_commands", "graphmem.cli.session_commands", "graphmem.cli.graph_commands",
                    "graphmem.cli.mcp_commands", "graphmem.cli.code_commands",
                    "graphmem.cli.transfer_commands", "graphmem.cli.git_commands",
                    "graphmem.cli.review_commands")


# The commands an agent runs on every tool call load only their own module (a cold start budget).
_FAST = {"search": "graphmem.cli.search_commands", "context": "graphmem.cli.search_commands"}


def _load_command_modules(argv: list[str] | None = None) -> None:
    import importlib
    import importlib.util

    first = argv[0] if argv else None
    names = [_FAST[first]] if first in _FAST else _COMMAND_MODULES
    for name in names:
        if importlib.util.find_spec(name) is not None:
            importlib.import_module(name)


# ---- entry point ----------------------------------------------------------------------------
def build_parser(argv: list[str] | None = None) -> argparse.ArgumentParser:
    """The argument parser with every registered sub-command; given the ``argv`` of a ``_FAST``
    command, only that command's module is loaded."""
    _load_command_modules(argv)
    parser = argparse.ArgumentParser(prog="graphmem", description="Memory for coding agents.")
    from graphmem import __version__

    parser.add_argument("--version", action="version", version=f"graphmem {__version__}")
    sub = parser.add_subparsers(dest="cmd", metavar="COMMAND")
    for name, (fn, add_args, help_text) in COMMANDS.items():
        p = sub.add_parser(name, help=help_text, description=help_text)
        add_args(p)
        p.set_defaults(_fn=fn)
    return parser


def _log_to_stderr() -> None:
    """graphmem's warnings as the CLI's own lines (``graphmem: warning: ...``), made safe for a
    terminal, and printed once: a library that configured the root logger does not repeat them."""
    import logging  # here, not at the top: `--version` and `--help` stay light

    class CliFormat(logging.Formatter):
        def format(self, record: logging.LogRecord) -> str:
            from graphmem.cli.display import safe_display

            return f"graphmem: {record.levelname.lower()}: {safe_display(record.getMessage())}"

    logger = logging.getLogger("graphmem")
    if not any(getattr(h, "_graphmem_cli", False) for h in logger.handlers):
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(CliFormat())
        handler._graphmem_cli = True  # type: ignore[attr-defined]
        logger.addHandler(handler)
        logger.setLevel(logging.WARNING)
        logger.propagate = False


def main(argv: list[str] | None = None) -> int:
    """Run the CLI; user errors print one line and exit non-zero, without a traceback."""
    import os

    os.environ.setdefault("GRAPHITI_TELEMETRY_ENABLED", "false")
    argv = sys.argv[1:] if argv is None else argv
    parser = build_parser(argv)
    args = parser.parse_args(argv)
    if not getattr(args, "_fn", None):
        parser.print_help()
        return 2
    from graphmem.errors import GraphmemError

    _log_to_stderr()
    try:
        return int(args._fn(args) or 0)
    except GraphmemError as exc:
        from graphmem.cli.display import safe_display

        print(f"graphmem: error: {safe_display(str(exc))}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("graphmem: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # `graphmem about x | head -3`: the reader left, nothing to say
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error at exit
        return 141  # as a shell reports a writer stopped by SIGPIPE

