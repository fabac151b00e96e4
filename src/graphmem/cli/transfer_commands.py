"""``graphmem export``, ``graphmem import`` and ``graphmem agents-md``: memory in and out."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from graphmem.cli.app import _console, _emit, _memory, _spec_args, command, escape
from graphmem.errors import ValidationError


def _export_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("-o", "--output", type=Path, default=None,
                   help="write the export to this file (default: print it)")
    _spec_args(p)


def _cmd_export(args: argparse.Namespace) -> int:
    with _memory(args) as m:
        text = m.export(args.output)
    if args.output is None:
        sys.stdout.write(text)
    else:
        lines = text.count("\n")
        print(f"Exported {lines - 1} lines to {args.output}", file=sys.stderr)
    return 0


command("export", "write all memory, history included, as graphmem's JSON Lines export")(
    _cmd_export)(_export_args)


def _import_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("paths", nargs="+", type=Path,
                   help="files or folders: CLAUDE.md, AGENTS.md, GEMINI.md, .cursor/rules, an "
                        "auto-memory or .serena/memories folder, claude-mem or mem0 JSON, an export")
    p.add_argument("--embed", choices=("now", "later"), default="now",
                   help="later: index the notes by their words at once and embed them in a "
                        "`graphmem reindex` started in the background (a large folder returns in "
                        "seconds; search by meaning finds them once it is done)")
    _spec_args(p)


def _cmd_import(args: argparse.Namespace) -> int:
    with _memory(args) as m:
        report = m.import_paths(args.paths, embed=args.embed)
        root = m.project_dir
    if args.embed == "later" and any(n for k, n in report["added"].items() if k != "validity"):
        report["reindex_pid"] = _reindex_detached(root)

    def show(r):
        c = _console()
        took = ", ".join(f"{n} {k}" for k, n in sorted(r["took"].items())) or "nothing"
        added = ", ".join(f"{n} {k}" for k, n in r["added"].items() if n) or "nothing new"
        c.print(f"Took {escape(took)}; added {escape(added)} to {escape(r['spec_dir'])}")
        for src, n in r["by_source"].items():
            c.print(f"  {escape(src)}: {n}")
        moved = [x for x in r.get("sessions") or [] if x["new"]]
        if moved:
            c.print(f"Sessions written: {len(moved)}")
            for x in moved[:20]:
                c.print(f"  {escape(x['from'])} -> {escape(x['to'])}")
            if len(moved) > 20:
                c.print(f"  ... and {len(moved) - 20} more (--json lists them all)")
        episodes = [x for x in r.get("episodes") or [] if x["new"]]
        if episodes:
            c.print(f"Episodes written: {len(episodes)} ({sum(x['turns'] for x in episodes)} "
                    f"turns, {sum(x['steps'] for x in episodes)} steps)")
        grown = [x for x in r.get("episodes") or [] if x.get("grew")]
        if grown:
            c.print(f"Episodes grown: {len(grown)} ({sum(x['new_turns'] for x in grown)} new "
                    f"turns, {sum(x['new_steps'] for x in grown)} new steps)")
        review = r.get("review") or {}
        if any(review.get(k) for k in ("pending", "proposed", "rejected")):
            c.print(f"Review as exported: {review['pending']} pending, {review['proposed']} "
                    f"proposed, {review['rejected']} rejected (`graphmem review` lists them)")
        if review.get("kept_here"):
            c.print(f"Kept this project's own review of {review['kept_here']} memories (an "
                    "import never overrides a step made here)")
        if r.get("reindex_pid"):
            c.print(f"Embedding them in the background (`graphmem reindex`, pid {r['reindex_pid']})")
        if r["skipped"]:
            c.print(f"Skipped {len(r['skipped'])}:")
            for s in r["skipped"][:50]:
                c.print(f"  {escape(s['where'])}: {escape(s['why'])}")
            if len(r["skipped"]) > 50:
                c.print(f"  ... and {len(r['skipped']) - 50} more (--json lists them all)")
    return _emit(args, report, show)


command("import", "import other agents' memory files and exports (idempotent, redacted)")(
    _cmd_import)(_import_args)


def _reindex_detached(root: Path) -> int:
    """Start ``graphmem reindex`` for ``root`` in its own session (it outlives this command and
    embeds what the import left without vectors); its pid."""
    import subprocess

    return subprocess.Popen([sys.executable, "-m", "graphmem.cli", "reindex", "--project-dir",
                             str(root)], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL, start_new_session=True).pid


def _agents_md_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--write", type=Path, default=None, metavar="FILE",
                   help="write the section into FILE (AGENTS.md, CLAUDE.md, "
                        ".cursor/rules/graphmem.mdc) between its markers; default: print it")
    p.add_argument("--max-bytes", type=int, default=2048, help="size budget (default 2048)")
    p.add_argument("--refresh", action="store_true",
                   help="re-render the section in every agent file of the project that already "
                        "carries graphmem's markers (what the git and agent hooks run; off with "
                        "GRAPHMEM_AGENTS_MD_REFRESH=false); an unchanged file is not written")
    _spec_args(p)


def _cmd_agents_md(args: argparse.Namespace) -> int:
    if args.refresh:
        if args.write is not None:
            raise ValidationError("--refresh rewrites the marked files it finds; it takes no "
                                  "--write FILE", field="--refresh")
        with _memory(args) as m:
            got = m.refresh_agents_md()
        if args.json:
            return _emit(args, got, lambda _r: None)
        for key, word in (("refreshed", "Updated"), ("unchanged", "Unchanged")):
            for rel in got[key]:
                print(f"{word}: {rel}", file=sys.stderr)
        for bad in got["failed"]:
            print(f"Not updated: {bad['path']}: {bad['why']}", file=sys.stderr)
        return 1 if got["failed"] else 0
    with _memory(args) as m:
        out = m.agents_md(args.write, max_bytes=args.max_bytes)
    if args.json:
        return _emit(args, out, lambda _r: None)
    if args.write is None:
        sys.stdout.write(out["section"])
    else:
        print(f"{'Updated' if out['changed'] else 'Unchanged'}: {args.write}", file=sys.stderr)
    return 0


command("agents-md", "render current, verified memory into AGENTS.md / CLAUDE.md / a .mdc rule")(
    _cmd_agents_md)(_agents_md_args)
