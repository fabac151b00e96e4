"""The names of session insight files, and who writes them.

A spec folder keeps the reference layout: ``session_NNN.json``, the number the agent gave. A
project's own memory (``<project>/.graphmem/memory``) is committed with the code, and two
branches (or two machines) that each write their next session would both write
``session_004.json``, which a merge then folds into one. There, each file name carries a short
tag of its writer, ``session_004-1f3a9c.json``: six hex digits of this machine, this checkout and
its current branch. The session number inside the file (``session_number``) stays the number
people see; files are read in (number, name) order, the same on every machine, and the next
number is one more than the highest of any writer. A file written before tags existed
(``session_004.json``) keeps its name when its writer saves that session again.
"""

from __future__ import annotations

import hashlib
import os
import re
import socket
from pathlib import Path

NAME = re.compile(r"session_(\d+)(?:-([0-9a-f]{6}))?\.json")


def session_name(number: int, tag: str | None = None) -> str:
    """``session_NNN.json``, or ``session_NNN-<tag>.json`` for a tagged writer."""
    return f"session_{number:03d}-{tag}.json" if tag else f"session_{number:03d}.json"


def session_number(name: str) -> int | None:
    """The session number of a session file's name, or None when the name is not one."""
    m = NAME.fullmatch(name)
    return int(m.group(1)) if m else None


def name_order(name: str) -> tuple[int, str]:
    """Numeric order, so session_1000 comes after session_999; one number's files by name."""
    n = session_number(name)
    if n is None:
        digits = name.removeprefix("session_").removesuffix(".json")
        n = int(digits) if digits.isdigit() else 1 << 62
    return (n, name)


def branch(root: Path) -> str:
    """The branch checked out at ``root`` (``HEAD``'s ref, read from the file: no git process),
    "detached" for a detached HEAD, "" outside git."""
    from ..identity import enclosing, linked_gitdir

    top = enclosing(Path(root))
    if top is None:
        return ""
    dot = os.path.join(top, ".git")
    gitdir = dot if os.path.isdir(dot) else linked_gitdir(top)
    try:
        with open(os.path.join(gitdir or dot, "HEAD"), encoding="utf-8", errors="replace") as f:
            head = f.read(4096).strip()
    except OSError:
        return ""
    return head.removeprefix("ref:").strip() if head.startswith("ref:") else "detached"


def writer_tag(root: Path) -> str:
    """Six hex digits naming this writer: this machine, the checkout at ``root``, its branch."""
    raw = "\0".join((socket.gethostname(), str(Path(root).resolve()), branch(root)))
    return hashlib.sha256(raw.encode("utf-8", "replace")).hexdigest()[:6]
