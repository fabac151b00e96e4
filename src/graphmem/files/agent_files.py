"""Other agents' memory, read into graphmem's kinds: what ``graphmem import`` takes in.

Read only; graphmem never rewrites these files (``agents_md.py`` writes its own marked section).
Each reader turns one file into ``Found`` notes (a kind, one line of text, the file it came from)
and ``Skipped`` parts (with the reason). The rule for markdown rules files (CLAUDE.md, AGENTS.md,
GEMINI.md, ``.cursor/rules/*.mdc``, Claude Code's auto-memory, ``.serena/memories``):

- every bullet or numbered item, and every paragraph of prose, is one note; a heading is not,
  but a note under a sub-heading is prefixed with it ("Testing: run pytest -q");
- a note that warns (``don't``, ``do not``, ``never``, ``avoid``, ``careful``, ``must not``,
  ``beware``, ``caution``, ``warning``, ``pitfall``, ``gotcha``) is a **gotcha**; every other
  rule (``use``, ``prefer``, ``always``, ... or none) is a **pattern**;
- a bullet that starts with a path and says what it is (``- `src/api/` — the HTTP handlers``)
  is a **file** entry of the codebase map; paths named anywhere else stay in the note's text,
  where graphmem's anchors find them (Cursor's ``[x](mdc:path)`` links become ``path``);
- code blocks, tables, HTML comments and front matter are skipped; an ``.mdc`` file's
  ``globs`` and ``description`` open each of its notes ("In `web/**/*.ts` (API routes): ...").

claude-mem's export (``{"observations": [...], ...}``, its ``scripts/export-memories.ts``) gives
one note per observation (``title``, ``subtitle``, ``narrative``, its ``facts`` and files; the
fields of its ``ObservationInput``), a gotcha when its ``type`` is ``bugfix``; mem0's ``get_all``
answer (``{"results": [{"memory": ...}]}`` or a bare list) one note per memory.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import ValidationError

RULE_FILES = ("CLAUDE.md", "AGENTS.md", "GEMINI.md", "CLAUDE.local.md")
MAX_NOTE = 1_000  # characters of one note; a longer paragraph is skipped, not cut
MAX_FILE = 2_000_000  # bytes of one file read
_WARN = re.compile(r"\b(don'?t|do not|never|avoid|careful|must not|mustn'?t|beware|caution|"
                   r"warning|pitfall|gotcha|not allowed)\b", re.I)
_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
_ITEM = re.compile(r"^(\s*)(?:[-*+]|\d{1,3}[.)])\s+(.*)$")
_FENCE = re.compile(r"^\s*(```|~~~)")
_INDEX_LINE = re.compile(r"^(?:[^:]*: )?\[[^\]]*\]\([^)\s]+\.md\)\s*(?:[:—–-]|$)")
_MDC_LINK = re.compile(r"\[([^\]]*)\]\(mdc:([^)\s]+)\)")
_PATH = r"(?:\.{0,2}/)?[\w.-][\w.@-]*(?:/[\w.@*-]*)+"  # a path with a folder: src/api/, ./web/x.ts
_PATH_HEAD = re.compile(r"^(?:`(" + _PATH + r"|[\w.@-]+\.[A-Za-z]{1,8})`|(" + _PATH + r"))\s*"
                        r"(?:[:—–]|-{1,2}|→|->)\s+(.+)$")  # a bare file name only in backticks


@dataclass(frozen=True)
class Found:
    """One note taken from a foreign file: its kind, its text (one line), where it came from."""

    kind: str  # "gotcha", "pattern" or "file"
    text: str
    source: str  # the file, as given
    origin: str  # the format: "rules", "cursor", "auto-memory", "serena", "claude-mem", "mem0"
    path: str = ""  # for a "file" note: the path it describes


@dataclass
class Read:
    """What one file gave: its notes, and what was left out with the reason."""

    found: list[Found] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)  # (where, why)


def kind_of(text: str) -> str:
    """``gotcha`` when ``text`` warns (the README's rule), else ``pattern``."""
    return "gotcha" if _WARN.search(text) else "pattern"


def _link(m: re.Match) -> str:
    label, path = m.group(1).strip("` "), m.group(2)
    return path if not label or path.rstrip("/").endswith(label) else f"{label} ({path})"


def _one_line(text: str) -> str:
    return " ".join(_MDC_LINK.sub(_link, text).replace("**", "").split())


def markdown_notes(text: str, source: str, origin: str, prefix: str = "") -> Read:
    """The notes of a markdown rules file (the module's rule), ``prefix`` opening each."""
    out = Read()
    heading = ""
    depth = 0
    para: list[str] = []
    item: list[str] | None = None
    in_code = in_comment = False

    def add(lines: list[str], is_item: bool, line_no: int) -> None:
        body = _one_line(" ".join(lines))
        if not body or body in ("---",):
            return
        where = f"{source}:{line_no}"
        if len(body) > MAX_NOTE:
            out.skipped.append((where, f"a note of {len(body)} characters (over {MAX_NOTE})"))
            return
        m = _PATH_HEAD.match(body) if is_item else None
        named = (m.group(1) or m.group(2)) if m else ""
        if m and not named.startswith(("http", "www.")):
            out.found.append(Found("file", _one_line(m.group(3)), source, origin,
                                   path=named.removeprefix("./") or named))
            return
        note = f"{heading}: {body}" if heading and depth > 1 and len(body) < 400 else body
        out.found.append(Found(kind_of(body), f"{prefix}{note}", source, origin))

    start = 0
    lines = text.splitlines()
    for n, raw in enumerate(lines, 1):
        line = raw.rstrip()
        if in_comment:
            in_comment = "-->" not in line
            continue
        if _FENCE.match(line):
            if not in_code:
                out.skipped.append((f"{source}:{n}", "a code block"))
            in_code = not in_code
            continue
        if in_code:
            continue
        if line.lstrip().startswith("<!--"):
            in_comment = "-->" not in line
            continue
        h = _HEADING.match(line)
        m = _ITEM.match(line)
        flush = h or m or not line.strip() or line.lstrip().startswith("|")
        if flush:
            if item is not None:
                add(item, True, start)
                item = None
            if para:
                add(para, False, start)
                para = []
        if h:
            depth, heading = len(h.group(1)), _one_line(h.group(2))
        elif m:
            item, start = [m.group(2)], n
        elif line.lstrip().startswith("|"):
            if not lines[n - 2].lstrip().startswith("|") if n > 1 else True:
                out.skipped.append((f"{source}:{n}", "a table"))
        elif line.strip():
            if item is not None and raw[:1] in (" ", "\t"):
                item.append(line.strip())  # a continuation of the bullet
            else:
                if not para:
                    start = n
                para.append(line.strip())
    if item is not None:
        add(item, True, start)
    if para:
        add(para, False, start)
    return out


def front_matter(text: str, source: str) -> tuple[dict[str, str], str]:
    """A ``---`` front matter block as key -> value (flat ``key: value`` lines) and the body;
    ``ValidationError`` naming the file and line when it opens but is not closed, or holds a
    line that is not ``key: value``."""
    if not text.startswith("---"):
        return {}, text
    lines = text.split("\n")
    meta: dict[str, str] = {}
    for n, line in enumerate(lines[1:], 2):
        if line.strip() == "---":
            return meta, "\n".join(lines[n:])
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        if line[:1] in (" ", "\t", "-") and meta:  # a YAML list item under the last key
            last = next(reversed(meta))
            meta[last] = ", ".join(x for x in (meta[last], line.strip().lstrip("- ").strip()) if x)
            continue
        key, sep, value = line.partition(":")
        if not sep or not re.fullmatch(r"[\w.-]+", key.strip()):
            raise ValidationError(f"line {n} of the front matter is not 'key: value': "
                                  f"{line[:80]!r}", field=source)
        meta[key.strip()] = value.strip().strip("'\"")
    raise ValidationError("its front matter opens with '---' but is never closed", field=source)


def _globs(value: str) -> list[str]:
    """A rule's ``globs`` value (``a, b``, ``[a, b]``, quoted or not) as its patterns; a comma
    inside ``{...}`` belongs to its pattern (``**/*.{ts,tsx}``)."""
    out, part, depth = [], "", 0
    for c in value.strip().strip("[]"):
        depth += (c == "{") - (c == "}" and depth > 0)
        if depth == 0 and (c == "," or c.isspace()):
            out.append(part)
            part = ""
        else:
            part += c
    out.append(part)
    return [g.strip().strip("'\"") for g in out if g.strip().strip("'\"")]


def cursor_rule(text: str, source: str) -> Read:
    """A ``.cursor/rules/*.mdc`` file: its globs and description open each of its notes."""
    meta, body = front_matter(text, source)
    globs = _globs(meta.get("globs", ""))
    desc = _one_line(meta.get("description", ""))
    where = f"In {', '.join(f'`{g}`' for g in globs)}" if globs else ""
    about = desc if 0 < len(desc) <= 120 else ""
    prefix = (f"{where} ({about}): " if where and about else f"{where or about}: "
              if where or about else "")
    read = markdown_notes(body, source, "cursor", prefix)
    if desc and not read.found:
        prefix = f"{where}: " if where else ""
        read.found.append(Found(kind_of(desc), prefix + desc, source, "cursor"))
    return read


def auto_memory(text: str, source: str, origin: str) -> Read:
    """A Claude Code auto-memory or Serena memory file: markdown, maybe with front matter
    (``name``, ``description``, ``type``) whose description is kept when the body says nothing."""
    try:
        meta, body = front_matter(text, source)
    except ValidationError:
        meta, body = {}, text  # a memory file's front matter is optional and informal
    read = markdown_notes(body, source, origin)
    index = [f for f in read.found if _INDEX_LINE.match(f.text)]
    if index:  # MEMORY.md's lines pointing at topic files: the topic files are read instead
        read.found = [f for f in read.found if f not in index]
        read.skipped.append((source, f"{len(index)} index lines pointing at topic files"))
    desc = _one_line(meta.get("description", ""))
    if desc and not read.found:
        read.found.append(Found(kind_of(desc), desc, source, origin))
    return read


def claude_mem(data: dict, source: str) -> Read:
    """claude-mem's export: one note per observation (see the module docstring)."""
    out = Read()
    for i, ob in enumerate(data.get("observations") or []):
        where = f"{source}: observations[{i}]"
        if not isinstance(ob, dict):
            out.skipped.append((where, "not an object"))
            continue
        parts = [str(ob[k]) for k in ("title", "subtitle", "narrative", "text") if isinstance(ob.get(k), str)
                 and ob[k].strip()]
        facts = ob.get("facts")
        if isinstance(facts, str):
            try:
                facts = json.loads(facts)
            except ValueError:
                facts = [facts]
        if isinstance(facts, list):
            parts += [str(f) for f in facts if isinstance(f, str)]
        files = [f for k in ("files_modified", "files_read") for f in _list(ob.get(k))]
        if files:
            parts.append("Files: " + ", ".join(dict.fromkeys(files)))
        body = _one_line(". ".join(p.rstrip(". ") for p in parts))
        if not body:
            out.skipped.append((where, "no title, narrative or facts"))
        elif len(body) > MAX_NOTE * 4:
            out.skipped.append((where, f"a note of {len(body)} characters (over {MAX_NOTE * 4})"))
        else:
            kind = "gotcha" if str(ob.get("type", "")).lower() == "bugfix" else kind_of(body)
            out.found.append(Found(kind, body, source, "claude-mem"))
    for key in ("sessions", "summaries", "prompts"):
        if data.get(key):
            out.skipped.append((f"{source}: {key}", f"{len(data[key])} {key}: session records, "
                                "not memories"))
    return out


def _list(value: object) -> list[str]:
    if isinstance(value, str):
        text = value
        try:
            value = json.loads(text)
        except ValueError:
            return [text] if text else []
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []


def mem0(rows: list, source: str) -> Read:
    """mem0's ``get_all`` rows: one note per ``memory``."""
    out = Read()
    for i, row in enumerate(rows):
        text = row.get("memory") if isinstance(row, dict) else None
        if not isinstance(text, str) or not text.strip():
            out.skipped.append((f"{source}: [{i}]", "no 'memory' text"))
        else:
            out.found.append(Found(kind_of(text), _one_line(text), source, "mem0"))
    return out


def json_export(data: object, source: str) -> Read | None:
    """claude-mem or mem0 JSON, or None when ``data`` is neither."""
    if isinstance(data, dict) and isinstance(data.get("observations"), list):
        return claude_mem(data, source)
    rows = data.get("results", data.get("memories")) if isinstance(data, dict) else data
    if isinstance(rows, list) and any(isinstance(r, dict) and "memory" in r for r in rows):
        return mem0(rows, source)
    return None


def origin_of(path: Path) -> str | None:
    """The format of a markdown file by its name and folder, or None when it is not one."""
    parts = path.parts
    if path.suffix == ".mdc":
        return "cursor"
    if path.suffix != ".md":
        return None
    if ".serena" in parts and "memories" in parts:
        return "serena"
    if path.name in RULE_FILES:
        return "rules"
    if "memory" in parts and (path.name == "MEMORY.md" or (path.parent / "MEMORY.md").exists()
                              or ".claude" in str(path)):
        return "auto-memory"
    return None


def read_text(path: Path, limit: int = MAX_FILE) -> str:
    """A file's text; ``ValidationError`` naming it when it is binary, not UTF-8 or over
    ``limit`` bytes."""
    try:
        size = path.stat().st_size
        if size > limit:
            raise ValidationError(f"is {size} bytes, over {limit}", field=str(path))
        raw = path.read_bytes()
    except OSError as exc:
        raise ValidationError(f"cannot be read: {exc.strerror or exc}", field=str(path)) from None
    if b"\x00" in raw:
        raise ValidationError("is a binary file, not text", field=str(path))
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ValidationError(f"is not UTF-8 text (byte {exc.start})", field=str(path)) from None


def read_foreign(path: Path, origin: str, source: str) -> Read:
    """The notes of one file of a known ``origin`` (``origin_of``, or "json")."""
    text = read_text(path)
    if origin == "cursor":
        return cursor_rule(text, source)
    if origin in ("auto-memory", "serena"):
        return auto_memory(text, source, origin)
    if origin == "json":
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise ValidationError(f"is not JSON: {exc}", field=source) from None
        read = json_export(data, source)
        if read is None:
            raise ValidationError("is JSON of no known shape (graphmem reads claude-mem's "
                                  "export and mem0's get_all)", field=source)
        return read
    meta_free = front_matter(text, source)[1] if text.startswith("---") else text
    return markdown_notes(meta_free, source, origin)
