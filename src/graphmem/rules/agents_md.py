"""The section ``graphmem agents-md`` writes into AGENTS.md, CLAUDE.md or a ``.mdc`` rule.

The memories are the session briefing's (``hooks/agent_context.brief``): the project's gotchas
and patterns found by the same search, current only (retired and superseded ones never come
back from it), rendered by ``context.build_context`` (whose lines mark changed code, and which
leaves out memories whose code is gone). For a clean diff the chosen memories are listed in a
stable order (kind, then text), and the section is cut to ``max_bytes`` line by line. It sits
between ``BEGIN`` and ``END``; the rest of the file is never touched. A new ``.mdc`` file gets
front matter that applies it always.

``marked_files`` finds the files a refresh may rewrite (``graphmem agents-md --refresh``, run by
the git hooks and the agent hooks' digest): only the agent files of a project that already hold
a ``BEGIN`` marker; a file without one, a link or a file that is not text is never touched.
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
LINE_CHARS = 240  # of one memory's text in the section
CANDIDATES = 40  # memories the search offers before the budget cuts
QUERY = "gotchas pitfalls conventions patterns of this project"  # the briefing's own query
TITLE = "## Project memory (graphmem)\n"
NOTE = "_Written by `graphmem agents-md`: current, verified memories; edits here are replaced._\n"
MDC_HEAD = ("---\ndescription: This project's current, verified memory (graphmem)\nglobs:\n"
            "alwaysApply: true\n---\n")
# The agent files a refresh looks at, relative to the project root (plus ``.cursor/rules/**/*.mdc``).
AGENT_FILES = ("AGENTS.md", "CLAUDE.md", "GEMINI.md", "CLAUDE.local.md", ".claude/CLAUDE.md",
               ".github/copilot-instructions.md")
_SOURCE = re.compile(r" _\(source: [^)]*\)_")


def render(hits: list[Any], root: Path, max_bytes: int = DEFAULT_BYTES) -> str:
    """The section's body (without markers): current memories in a stable order, stale ones
    marked, at most ``max_bytes`` bytes with the markers. Each kind takes its turn at the budget
    (gotcha, pattern, gotcha, ...), its memories in text order, so both kinds are shown."""
    from .context import SECTIONS, _freshness, _line

    by_kind: dict[str, list[str]] = {k: [] for k in KINDS}
    seen: set[str] = set()
    for h in sorted(hits, key=lambda h: (normalise(h.text), h.id)):
        key = normalise(h.text)
        if h.kind not in by_kind or key in seen or _freshness(h).get("state") == "gone":
            continue  # a memory whose code is gone is not handed to another agent
        seen.add(key)
        by_kind[h.kind].append(_SOURCE.sub("", _line(h.replaced(text=_short(h.text)), root)))
    frame = len(f"{BEGIN}\n{TITLE}{NOTE}\n{END}\n".encode())
    titles = {k: title for title, kinds in SECTIONS for k in kinds}
    room = max_bytes - frame - sum(len(f"\n### {titles[k]}\n".encode()) for k in KINDS)
    chosen: dict[str, list[str]] = {k: [] for k in KINDS}
    queues = [list(v) for v in by_kind.values()]
    while any(queues):
        for kind, queue in zip(KINDS, queues):
            if not queue:
                continue
            line = queue.pop(0)
            if len(line.encode()) <= room:
                chosen[kind].append(line)
                room -= len(line.encode())
    text = "".join(f"\n### {titles[k]}\n" + "".join(chosen[k]) for k in KINDS if chosen[k])
    return TITLE + NOTE + (text or "\n_Nothing current is known yet._\n")


def _short(text: str) -> str:
    """One memory's text, cut to ``LINE_CHARS`` at a word (the section is a digest)."""
    text = " ".join(text.split())
    if len(text) <= LINE_CHARS:
        return text
    return text[:LINE_CHARS].rsplit(" ", 1)[0].rstrip(",;:") + " …"


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


def marked_files(root: Path) -> list[Path]:
    """The project's agent files that carry graphmem's begin marker (links and files that are
    not UTF-8 text left out), in a stable order."""
    rules = root / ".cursor" / "rules"
    found = [root / n for n in AGENT_FILES]
    if rules.is_dir() and not rules.is_symlink():
        found += sorted(rules.glob("**/*.mdc"))
    out = []
    for path in found:
        if path.is_symlink() or not path.is_file():
            continue
        try:
            if BEGIN in path.read_text(encoding="utf-8"):
                out.append(path)
        except (OSError, UnicodeDecodeError):
            continue
    return out
