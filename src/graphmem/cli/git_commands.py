"""``graphmem merge-driver`` (what git runs to merge a memory JSON file) and ``graphmem diff``
(what a branch did to memory)."""

from __future__ import annotations

import argparse
from pathlib import Path

from graphmem.cli.app import command


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
