"""``graphmem search``, ``graphmem context`` and ``graphmem reindex``."""

from __future__ import annotations

import argparse
from pathlib import Path

from graphmem.cli.app import _console, _emit, _memory, _spec_args, command, deprecated_alias, status
from graphmem.cli.hit_view import show_hits

KINDS = ("insight", "file", "pattern", "gotcha", "turn", "step", "fact")  # models.KINDS, kept
# literal here so that building the parser does not import pydantic


def _where_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--spec-dir", type=Path, default=None,
                   help="spec folder (it names the project; search's --scope spec, its "
                        "default with --spec-dir, searches only this spec)")
    p.add_argument("--project-dir", type=Path, default=None,
                   help="project root (default: the git work tree or .graphmem/project.toml "
                        "folder enclosing the spec, else two levels above it; without "
                        "--spec-dir the current folder)")
    p.add_argument("--json", action="store_true", help="machine-readable JSON output")
    p.add_argument("--no-server", action="store_true",
                   help="work in this process: neither ask nor start the search server")


def _check_where(args: argparse.Namespace) -> None:
    from graphmem.models import check_folders

    check_folders(spec=args.spec_dir, project=args.project_dir)


def _open(args: argparse.Namespace):
    from graphmem.facade.memory import Memory

    _check_where(args)
    project = args.project_dir
    if args.spec_dir is None and project is None:
        project = Path.cwd()
    return Memory(args.spec_dir, project)


def _search_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("query", help="what to look for, in words")
    p.add_argument("--scope", default=None, choices=("spec", "project", "all"),
                   help="this spec, this project, or every project (default: spec when "
                        "--spec-dir is given, else project)")
    p.add_argument("--kind", action="append", choices=KINDS, metavar="KIND",
                   help=f"only these kinds (repeatable): {', '.join(KINDS)}")
    p.add_argument("--limit", type=int, default=10, help="how many hits (default 10)")
    p.add_argument("--rerank", action="store_true",
                   help="re-rank the top hits with the cross-encoder (slower, better)")
    p.add_argument("--include-history", action="store_true",
                   help="also show retired and superseded memories, marked")
    _where_args(p)


def _server(args: argparse.Namespace):
    """The search server config to ask (and start), or None to work in-process only."""
    if args.no_server:
        return None
    from graphmem.cli.search_client import client_config

    cfg = client_config()
    return cfg if cfg is not None and cfg.mode != "off" else None


def _ask_server(cfg, args: argparse.Namespace, request: dict) -> dict | None:
    """The server's answer (no heavy import on this path), or None to work in-process."""
    import os

    if cfg is None:
        return None
    from graphmem.cli.search_client import ask

    _check_where(args)  # the same message as in-process, with the path as the user gave it
    spec = os.path.abspath(args.spec_dir) if args.spec_dir is not None else None
    project = os.path.abspath(args.project_dir) if args.project_dir is not None else None
    if spec is None and project is None:
        project = os.getcwd()
    answer = ask(cfg, dict(request, spec_dir=spec, project_dir=project))
    if answer is not None and "error" in answer:
        from graphmem.errors import GraphmemError

        err = GraphmemError(str(answer["error"]))
        err.exit_code = int(answer.get("exit", 1))
        raise err
    return answer


def _start_server(cfg) -> None:
    """After answering in-process: start a server so that the next call is fast."""
    import sys

    if cfg is not None:
        from graphmem.cli.search_client import spawn

        sys.stdout.flush()  # the answer is out before the (short) spawn
        spawn(cfg)


def _render_remotely(args: argparse.Namespace) -> dict | None:
    """Ask the server to render the human format when no std stream is a terminal (an agent's
    tool call): rich then depends only on these variables, and importing it would cost this
    process more than the search. A terminal's size and colours are left to this process."""
    import os

    from graphmem.cli.display import RICH_ENV

    if args.json or any(os.isatty(fd) for fd in (0, 1, 2)):
        return None
    return {"env": {k: os.environ[k] for k in RICH_ENV if k in os.environ}}


def _cmd_search(args: argparse.Namespace) -> int:
    import sys

    scope = args.scope or ("spec" if args.spec_dir is not None else "project")
    cfg = _server(args)
    answer = _ask_server(cfg, args, {"op": "search", "query": args.query, "scope": scope,
                                     "kinds": args.kind, "limit": args.limit,
                                     "rerank": args.rerank, "render": _render_remotely(args),
                                     "include_history": args.include_history})
    data = answer.get("hits") if answer else None
    notes = (answer or {}).get("notes") or []
    if data is None:
        with _open(args) as m, status("searching (a first search loads the models)"):
            hits = m.search(args.query, scope=scope, kinds=args.kind, limit=args.limit,
                            rerank=args.rerank, include_history=args.include_history)
            notes = list(m.search_notes)
        data = [h.model_dump(mode="json") for h in hits]
    elif answer and isinstance(answer.get("text"), str):  # (data came from answer)
        sys.stdout.write(answer["text"])
        _tell(notes)
        return 0
    else:
        cfg = None  # a server answered: nothing to start
    code = _emit(args, data, lambda rows: show_hits(rows, _console()))
    _tell(notes)  # stdout stays the hits (a list with --json); what else to know, on stderr
    _start_server(cfg)
    return code


def _tell(notes: list) -> None:
    """A search's or context's notes (the graph did not answer, retired memories left out, a
    file nothing is known about) on stderr, one ``graphmem: note: ...`` line each."""
    import sys

    from graphmem.cli.display import safe_display

    for note in notes:
        print(f"graphmem: note: {safe_display(str(note))}", file=sys.stderr)


command("search", "search memories by meaning across a spec, project or every project")(
    _cmd_search)(_search_args)


def _context_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("task", help="the task the agent is about to do")
    p.add_argument("--max-tokens", type=int, default=1500,
                   help="token budget of the block (estimated at 4 characters a token)")
    p.add_argument("--file", action="append", dest="files", metavar="PATH",
                   help="a file or folder being worked on (repeatable): memories anchored to it "
                        "come first (a folder: its 5 newest)")
    _where_args(p)


def _cmd_context(args: argparse.Namespace) -> int:
    cfg = _server(args)
    answer = _ask_server(cfg, args, {"op": "context", "task": args.task,
                                     "max_tokens": args.max_tokens, "files": args.files})
    text = answer.get("context") if answer else None
    notes = (answer or {}).get("notes") or []
    if text is None:
        with _open(args) as m, status("searching (a first search loads the models)"):
            text = m.context(args.task, max_tokens=args.max_tokens, files=args.files)
            notes = list(m.search_notes)
    else:
        cfg = None
    if args.json:  # the notes are at the end of the text too, as every caller gets it
        _emit(args, {"context": text, "notes": notes}, print)
    else:
        from graphmem.cli.display import safe_display

        print(safe_display(text) if text else "No relevant memories.")
    _start_server(cfg)
    return 0


command("context", "markdown of relevant memories for a task, ready for a prompt")(
    _cmd_context)(_context_args)


def _retire_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("id", help="the memory's id (from `graphmem search --json`)")
    p.add_argument("--reason", required=True, help="why it is no longer true")
    _spec_args(p)


def _cmd_retire(args: argparse.Namespace) -> int:
    with _memory(args) as m:
        ev = m.retire(args.id, args.reason)
    return _emit(args, ev, lambda e: print(f"Retired {e['item']} ({e['reason']})."))


command("retire", "mark a memory as no longer true; searches leave it out")(
    _cmd_retire)(_retire_args)


def _supersede_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("id", help="the old gotcha's or pattern's id (from `graphmem search --json`)")
    p.add_argument("new_text", help="the memory that replaces it, one line")
    p.add_argument("--reason", default="", help="why the old one is no longer true")
    _spec_args(p)


def _cmd_supersede(args: argparse.Namespace) -> int:
    with _memory(args) as m:
        ev = m.supersede(args.id, args.new_text, reason=args.reason)
    return _emit(args, ev, lambda e: print(f"Superseded {e['item']} by {e['new_id']}."))


command("supersede", "replace a gotcha or pattern with a newer text, keeping the old as history")(
    _cmd_supersede)(_supersede_args)


def _reindex_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--project-dir", type=Path, default=None,
                   help="project root to rebuild from its memory folders (default: current folder)")
    p.add_argument("--json", action="store_true", help="machine-readable JSON output")
    deprecated_alias(p, "--project", "--project-dir", "project_dir", type=Path)


def _cmd_reindex(args: argparse.Namespace) -> int:
    from graphmem.facade.memory import Memory
    from graphmem.models import check_folders

    project = args.project_dir or Path.cwd()
    check_folders(project=project)
    with Memory(None, project) as m, status(f"reindexing {project} (embeds what changed)"):
        counts = m.reindex()
    return _emit(args, counts, lambda c: print(
        f"Reindexed {c['items']} items from {c['specs']} spec folder(s) of {c['project']} "
        f"(project {c['key']}; {c['embedded']} embedded, {c['removed']} removed)."))


command("reindex", "rebuild the local search index of a project from its files")(
    _cmd_reindex)(_reindex_args)


def _server_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--idle", type=float, default=None,
                   help="exit after this many seconds without a request (default: the "
                        "search_server.idle setting, GRAPHMEM_SEARCH_SERVER_IDLE, 900)")
    p.add_argument("--auto", action="store_true", help=argparse.SUPPRESS)  # started by the CLI
    p.add_argument("--replace", action="store_true", help=argparse.SUPPRESS)  # of an outdated one


def _cmd_server(args: argparse.Namespace) -> int:
    import asyncio

    from graphmem.errors import ValidationError
    from graphmem.cli.search_server import serve
    from graphmem.settings import Settings

    if args.idle is not None and not args.idle > 0:
        raise ValidationError("must be a positive number of seconds", field="--idle")
    settings = Settings.load()
    ready = None if args.auto else (
        lambda path: print(f"graphmem search server on {path}", flush=True))
    try:
        asyncio.run(serve(settings, idle=args.idle, ready=ready, auto=args.auto,
                          replace=args.replace))
    except KeyboardInterrupt:
        pass
    return 0


command("search-server", "keep the search index and models loaded so `graphmem search` and "
        "`context` answer in about 0.15 s (started by them; exits when idle)")(
    _cmd_server)(_server_args)
