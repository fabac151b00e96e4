"""The section ``graphmem agents-md`` writes into AGENTS.md, CLAUDE.md or a ``.mdc`` rule.

The memories are the session briefing's (``hooks/agent_context.brief``): the project's gotchas
and patterns found by the same search, current only (retired and superseded ones never come
back from it), rendered by ``context.build_context`` (whose lines mark changed code, and which
leaves out memories whose code is gone). For a clean diff the chosen memories are listed in a
stable order (kind, then text), and the section is cut to ``max_bytes`` line by line. It sits
between ``BEGIN`` and ``END``; the rest of the file is never touched. A new ``.mdc`` file gets
front matter that applies it always.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from graphmem.errors import ValidationError
from graphmem.files.atomic import atomic_write_text
from graphmem.models import normalise

BEGIN = "<!-- graphmem:begin -->"
END = "<!-- graphmem:end -->"
DEFAULT_BYTES = 2048
MIN_BYTES = 256
KINDS = ("gotcha", "pattern")
CANDIDATES = 40  # memories the search offers before the budget cuts
QUERY = "gotchas pitfalls conventions patterns of this project"  # the briefing's own query
TITLE = "## Project memory (graphmem)\n"
NOTE = "_Written by `graphmem agents-md`: current, verified memories; edits here are replaced._\n"
MDC_HEAD = ("---\ndescription: This project's current, verified memory (graphmem)\nglobs:\n"
            "alwaysApply: true\n---\n")
_SOURCE = re.compile(r" _\(source: [^)]*\)_")


def render(hits: list[Any], root: Path, max_bytes: int = DEFAULT_BYTES) -> str:
    """The section's body (without markers): current memories in a stable order, stale ones
    marked, at most ``max_bytes`` bytes with the markers."""
    from .context import build_context

    kind_rank = {k: i for i, k in enumerate(KINDS)}
    hits = sorted((h.replaced(score=1.0) for h in hits if h.kind in kind_rank),
                  key=lambda h: (kind_rank[h.kind], normalise(h.text), h.id))
    room = max_bytes - len(f"{BEGIN}\n{TITLE}{NOTE}{END}\n".encode())
    body = build_context(QUERY, hits, 200_000, root) if hits else ""
    lines = [_SOURCE.sub("", line) for line in body.split("\n", 1)[1].splitlines()] if body else []
    out: list[str] = []
    used = 0
    for line in lines:
        if line.startswith("_") and "left out" in line:
            continue  # a count of hidden memories says nothing to another agent
        cost = len(line.encode()) + 1
        if line.startswith("### ") or not line:
            out.append(line)
            used += cost
            continue
        if used + cost > room:
            continue
        out.append(line)
        used += cost
    text = "\n".join(_drop_empty_sections(out)).strip("\n")
    return TITLE + NOTE + (("\n" + text + "\n") if text else "\n_Nothing current is known yet._\n")


def _drop_empty_sections(lines: list[str]) -> list[str]:
    out: list[str] = []
    for i, line in enumerate(lines):
        if line.startswith("### "):
            rest = lines[i + 1:]
            nxt = next((x for x in rest if x.strip()), "")
            if not nxt.startswith("- "):
                continue
        out.append(line)
    return out


def splice(text: str, body: str, source: str) -> str:
    """``text`` with its marked section replaced by ``body`` (appended when it has none);
    ``ValidationError`` when its markers are not one begin followed by one end."""
    section = f"{BEGIN}\n{body}{END}\n"
    begins, ends = text.count(BEGIN), text.count(END)
    if begins == 0 and ends == 0:
        sep = "" if not text else ("\n" if text.endswith("\n") else "\n\n")
        return text + sep + section
    if begins != 1 or ends != 1 or text.index(BEGIN) > text.index(END):
        raise ValidationError(f"holds {begins} '{BEGIN}' and {ends} '{END}' markers: it needs "
                              "one of each, in that order (fix the file, nothing was written)",
                              field=source)
    head, rest = text.split(BEGIN, 1)
    tail = rest.split(END, 1)[1]
    return head + section.rstrip("\n") + tail


def write_section(path: Path, body: str) -> bool:
    """Write ``body`` into ``path``'s marked section (atomic); whether the file changed."""
    try:
        old = path.read_text(encoding="utf-8") if path.exists() else None
    except UnicodeDecodeError:
        raise ValidationError("is not UTF-8 text: graphmem writes its section only into a text "
                              "file", field=str(path)) from None
    base = old if old is not None else (MDC_HEAD if path.suffix == ".mdc" else "")
    new = splice(base, body, str(path))
    if new == old:
        return False
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, new)
    return True
