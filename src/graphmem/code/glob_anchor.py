"""Glob anchors: a memory about every file a pattern matches, today's and tomorrow's.

A Cursor rule (``.cursor/rules/*.mdc``) applies to the files its ``globs`` match
(``src/api/**/*.ts``); imported, its notes read "In `src/api/**/*.ts`: ...". Anchoring them to
the files matched at import time would miss a file added later and, with hundreds of matches,
cap the list; so the pattern itself is the anchor: ``{"path": "src/api/**/*.ts", "glob": true}``
(no blob, no symbol). A memory names a glob the same way, in backticks, holding ``*`` or ``?``
and matching at least one file of the tree when written (a pattern of everything, ``**/*``,
anchors nothing).

- ``about("src/api/users/x.ts")`` and ``context(files=[...])`` find the memory when the path
  matches the pattern (``mention.matches``, ``freshness.anchored_to``);
- its state (``freshness.anchor_state``) is ``current`` while the pattern matches a file of the
  tree and ``gone`` when it matches none (a rule for code that no longer exists);
- the graph gets no ``ABOUT`` edge for it (a pattern is not a file).

Patterns follow Cursor's (gitignore-like) globs: ``*`` and ``?`` within one folder name, ``**``
any number of folders, ``{a,b}`` alternatives, ``[abc]`` a class; a pattern without ``/``
matches the file name in any folder (``*.tsx``); a pattern ending in ``/`` every file below.
"""

from __future__ import annotations

import functools
import re
from typing import Any, Iterable

_SPAN = re.compile(r"`([^`\s]*[*?][^`\s]*)`")
_EVERYTHING = {"*", "**", "**/*", "*.*", "**/*.*", "/**", "/**/*"}
MAX_GLOBS = 8  # globs one memory anchors to


def is_glob(text: str) -> bool:
    """Whether ``text`` is a pattern rather than a path."""
    return any(c in text for c in "*?[{")


@functools.lru_cache(maxsize=512)
def _regex(pattern: str) -> re.Pattern[str]:
    """``pattern`` as a regular expression over a project-relative path."""
    p = pattern.strip().removeprefix("./")
    anchored = "/" in p.rstrip("/")
    p = p.lstrip("/")
    if p.endswith("/"):
        p += "**"
    out, i, depth = [], 0, 0
    while i < len(p):
        c = p[i]
        if p.startswith("**/", i):
            out.append("(?:[^/]+/)*")
            i += 3
            continue
        if p.startswith("**", i):
            out.append(".*")
            i += 2
            continue
        if c == "*":
            out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
        elif c == "{":
            out.append("(?:")
            depth += 1
        elif c == "}" and depth:
            out.append(")")
            depth -= 1
        elif c == "," and depth:
            out.append("|")
        elif c == "[":
            end = p.find("]", i + 1)
            if end == -1:
                out.append(re.escape(c))
            else:
                body = p[i + 1:end].replace("\\", "\\\\")
                out.append(f"[{'^' + body[1:] if body.startswith('!') else body}]")
                i = end
        else:
            out.append(re.escape(c))
        i += 1
    out.append(")" * depth)
    body = "".join(out)
    return re.compile(body if anchored else f"(?:[^/]+/)*{body}")


def matches(pattern: str, path: str) -> bool:
    """Whether the project-relative ``path`` is one of the files ``pattern`` names."""
    try:
        return _regex(pattern).fullmatch(path.removeprefix("./")) is not None
    except re.error:
        return False


def matched(pattern: str, files: Iterable[str]) -> bool:
    """Whether ``pattern`` names at least one of ``files``."""
    try:
        rx = _regex(pattern)
    except re.error:
        return False
    return any(rx.fullmatch(f) for f in files)


def in_tree(pattern: str, snap: Any) -> bool:
    """Whether ``pattern`` names a file of the snapshot (remembered with the snapshot)."""
    memo = snap.__dict__.setdefault("_globs", {})
    got = memo.get(pattern)
    if got is None:
        got = memo[pattern] = matched(pattern, snap.files)
    return got


def find_globs(text: str, snap: Any) -> list[str]:
    """The backticked patterns of ``text`` that name at least one file of the snapshot."""
    if "`" not in text or not ("*" in text or "?" in text):
        return []
    out: list[str] = []
    for m in _SPAN.finditer(text):
        g = m.group(1).strip().removeprefix("./")
        if g in _EVERYTHING or g in out or len(g) > 300 or "\x00" in g:
            continue
        if in_tree(g, snap):
            out.append(g)
        if len(out) >= MAX_GLOBS:
            break
    return out
