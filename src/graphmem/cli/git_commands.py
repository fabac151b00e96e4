"""``graphmem merge-driver`` (what git runs to merge a memory JSON file) and ``graphmem diff``
(what a branch did to memory)."""

from __future__ import annotations

import argparse
from pathlib import Path

from graphmem.cli.app import _emit, command


def _merge_driver_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("base", type=Path, help="%%O: the common ancestor's version (may be empty)")
    p.add_argument("ours", type=Path, help="%%A: our version; the merge is written here")
    p.add_argument("theirs", type=Path, help="%%B: their version")
    p.add_argument("path", nargs="?", default="", help="%%P: the file's path in the repository")


def _cmd_merge_driver(args: argparse.Namespace) -> int:
    from graphmem.files.merge import merge_files

    return 0 if merge_files(args.base, args.ours, args.theirs) else 1


command("merge-driver", "merge a memory JSON file key by key (git runs it; registered by "
        "`graphmem hooks install`)")(_cmd_merge_driver)(_merge_driver_args)


def _diff_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("range", nargs="?", default=None,
                   help="BASE..HEAD (default HEAD~1..HEAD); BASE...HEAD starts at their merge "
                        "base (a pull request: origin/main...HEAD)")
    p.add_argument("--project-dir", type=Path, default=None,
                   help="the project (default: the current folder)")
    p.add_argument("--json", action="store_true", help="machine-readable JSON output")
    p.add_argument("--markdown", action="store_true", help="Markdown, for a pull-request comment")


def _cmd_diff(args: argparse.Namespace) -> int:
    from graphmem.code.memory_diff import to_markdown
    from graphmem.facade.memory import Memory

    with Memory(None, args.project_dir or Path.cwd()) as m:
        report = m.diff(args.range)
    if args.markdown:
        print(to_markdown(report), end="")
        return 0
    return _emit(args, report, lambda r: print(to_markdown(r), end=""))


command("diff", "what a range of commits did to memory: added, made stale, moved, gone, "
        "superseded, retired")(_cmd_diff)(_diff_args)
