"""Session insight files in every shape agents write, mapped to graphmem's kinds.

Tolerant on read: graphmem validates strictly what it writes (``models.py``), but a
``session_NNN.json`` may come from any agent version. Two shapes are known:

- the reference's: ``discoveries.files_understood`` (path -> purpose), ``patterns_found`` and
  ``gotchas_encountered`` (strings), and lists of strings in ``what_worked``, ``what_failed``,
  ``recommendations_for_next_session``, ``subtasks_completed``;
- today's Auto-Claude: ``discoveries.file_insights`` (objects with ``file_path``, ``purpose``,
  ``change_type``, ``key_elements`` ...), ``patterns_discovered`` (``pattern``, ``description``,
  ``significance``), ``gotchas_discovered`` (``gotcha``, ``description``, ``risk``,
  ``mitigation``), ``recommendations`` (``priority``, ``category``, ``recommendation``,
  ``rationale``), ``approach_outcome``, ``changed_files``, ``subtask_id``, ``success``.

Either may sit at the top level or inside ``discoveries``, and sessions mix them. Text in any field
graphmem does not know is still returned as an ``insight`` entry, so a future agent version loses
nothing. A field of an unexpected type is read for its text, never an error.

``retry_key`` is the identity under which near-identical entries of many sessions (a retry loop:
the same subtask failing the same way) collapse into one memory with a count.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Iterator

from graphmem.models import normalise

MAX_DEPTH = 8  # nesting read for text; deeper values are ignored (a list 100,000 deep costs nothing)
MAX_TEXT = 4000  # characters of one entry
META_KEYS = {"session_number", "timestamp", "subtask_id", "success", "session_id"}
FILE_KEYS = {"files_understood", "file_insights"}
BULLET_KEYS = {"patterns_found": "pattern", "patterns_discovered": "pattern",
               "gotchas_encountered": "gotcha", "gotchas_discovered": "gotcha"}
PATH_KEYS = ("file_path", "path", "file", "filename")
PURPOSE_KEYS = ("purpose", "description", "summary")
LEAD_KEYS = {"pattern": ("pattern", "name", "title"), "gotcha": ("gotcha", "issue", "name", "title"),
             "insight": ("recommendation", "summary", "text", "title")}
# Numbers that vary between rounds of a loop: times, dates, counts ("attempt 37", "3 tests").
# Digits inside a name ("subtask-12", "py311", "v2") are part of it and stay.
_TIMES = re.compile(r"\d{4}-\d{2}-\d{2}(?:[t ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:z|[+-]\d{2}:?\d{2})?)?")
_NUMBERS = re.compile(r"(?<![\w-])\d+(?:[.,:]\d+)*(?![\w-])")


@dataclass(frozen=True)
class Entry:
    """One thing a session learned, in graphmem's kinds."""

    kind: str  # "insight" | "file" | "pattern" | "gotcha"
    field: str  # where it was found, e.g. "discoveries.gotchas_discovered"
    text: str
    path: str | None = None  # file entries: the file, and its purpose alone
    purpose: str | None = None


def retry_key(text: str, subtask: str | None = None) -> str:
    """Text as compared across sessions: normalised, end punctuation dropped. Within one subtask
    (the same subtask failing the same way) numbers and times are masked too, so "attempt 37"
    and "attempt 38" are one memory; without a subtask "Lesson 1" and "Lesson 2" stay apart."""
    key = normalise(text).rstrip(" .!;:,")
    if subtask is None:
        return key
    return f"{normalise(subtask)}\x1f{_NUMBERS.sub('#', _TIMES.sub('#', key))}"


# ---- text of any JSON value -----------------------------------------------------------------
def _label(key: str) -> str:
    return key.replace("_", " ").strip().capitalize()


def text_of(value: Any, depth: int = 0) -> str:
    """The text held in a JSON value: strings as they are, objects as ``Key: value`` sentences."""
    if depth > MAX_DEPTH or value is None or isinstance(value, bool):
        return ""
    if isinstance(value, str):
        return " ".join(value.split())
    if isinstance(value, (int, float)):
        return str(value) if depth else ""  # a bare number at the top is no lesson
    if isinstance(value, list):
        return ", ".join(t for t in (text_of(v, depth + 1) for v in value) if t)
    if isinstance(value, dict):
        parts = []
        for k, v in value.items():
            t = text_of(v, depth + 1)
            if t and isinstance(k, str):
                parts.append(f"{_label(k)}: {t}")
        return ". ".join(parts)
    return ""


def _cap(text: str) -> str:
    return text if len(text) <= MAX_TEXT else text[:MAX_TEXT - 1] + "…"


def describe(obj: dict, lead: tuple[str, ...]) -> str:
    """An object as one line: its lead field, its description, then ``Key: value`` for the rest."""
    head = next((k for k in lead if isinstance(obj.get(k), str) and obj[k].strip()), None)
    parts = [text_of(obj[head])] if head else []
    desc = text_of(obj.get("description")) if head != "description" else ""
    if desc:
        parts[-1:] = [f"{parts[-1]} — {desc}"] if parts else [desc]
    for k, v in obj.items():
        if k in (head, "description"):
            continue
        t = text_of(v, 1)
        if t and isinstance(k, str):
            parts.append(f"{_label(k)}: {t}")
    return _cap(". ".join(p.rstrip(". ") for p in parts if p))


def _items(value: Any) -> list[Any]:
    """A list's elements; anything else is one element."""
    return value if isinstance(value, list) else [value]


# ---- the mapping ----------------------------------------------------------------------------
def _file_entries(key: str, value: Any) -> Iterator[Entry]:
    where = f"discoveries.{key}"
    pairs: list[tuple[Any, Any]]
    if isinstance(value, dict):  # path -> purpose (or path -> object)
        pairs = list(value.items())
    else:
        pairs = [(next((o.get(k) for k in PATH_KEYS if isinstance(o.get(k), str)), None), o)
                 if isinstance(o, dict) else (None, o) for o in _items(value)]
    for path, info in pairs:
        if not isinstance(path, str) or not path.strip() or "\x00" in path:
            text = text_of(info, 1)
            if text:
                yield Entry("insight", where, _cap(text))
            continue
        if isinstance(info, dict):
            rest = {k: v for k, v in info.items() if k not in PATH_KEYS
                    and not (isinstance(v, (int, float)) and not isinstance(v, bool))}
            purpose = next((text_of(rest.pop(k)) for k in PURPOSE_KEYS
                            if isinstance(rest.get(k), str) and rest[k].strip()), "")
            details = text_of(rest, 1)
            if not purpose:
                purpose, details = details, ""
        else:
            purpose, details = text_of(info, 1), ""
        if not purpose:
            continue
        text = f"{path}: {purpose}" + (f" ({details})" if details else "")
        yield Entry("file", where, _cap(text), path=path, purpose=_cap(purpose))


def _level(data: dict, prefix: str) -> Iterator[Entry]:
    for key, value in data.items():
        if not isinstance(key, str) or key in META_KEYS:
            continue
        where = f"{prefix}{key}"
        if key == "discoveries" and not prefix and isinstance(value, dict):
            yield from _level(value, "discoveries.")
        elif key in FILE_KEYS:
            yield from _file_entries(key, value)
        elif key == "changed_files":
            text = text_of(value)
            if text:
                yield Entry("insight", where, _cap(f"Changed files: {text}"))
        elif key == "approach_outcome" and isinstance(value, dict):
            text = describe(value, ("status",))
            if text:
                yield Entry("insight", where, f"Approach outcome: {text}")
        else:
            kind = BULLET_KEYS.get(key, "insight")
            for element in _items(value):
                text = describe(element, LEAD_KEYS[kind]) if isinstance(element, dict) \
                    else _cap(text_of(element))  # a bare number is no lesson
                if text:
                    yield Entry(kind, where, text)


def entries(data: Any) -> list[Entry]:
    """Everything one session file learned, in file order (a non-object yields nothing)."""
    return list(_level(data, "")) if isinstance(data, dict) else []


def session_facts(data: dict) -> dict[str, Any]:
    """The session's own facts that qualify each of its entries: its subtask and outcome."""
    out: dict[str, Any] = {}
    if isinstance(data.get("subtask_id"), (str, int)) and not isinstance(data.get("subtask_id"), bool):
        out["subtask"] = str(data["subtask_id"])
    if isinstance(data.get("success"), bool):
        out["success"] = data["success"]
    return out


REFERENCE_KEYS = {"session_number", "timestamp", "subtasks_completed", "discoveries", "what_worked",
                  "what_failed", "recommendations_for_next_session"}
REFERENCE_DISCOVERIES = {"files_understood", "patterns_found", "gotchas_encountered"}


def newer_shape(data: dict) -> bool:
    """Whether a session holds keys beyond the reference's. The reference keeps a session's file
    purposes, patterns and gotchas in the session file only (its map and bullet files do not
    count them), so graphmem does the same for such a session; a session of a newer agent has no
    other record of them, so they count in the map, the patterns and the gotchas."""
    disc = data.get("discoveries")
    return bool(set(data) - REFERENCE_KEYS) or (isinstance(disc, dict)
                                                and bool(set(disc) - REFERENCE_DISCOVERIES))


def as_reference(data: dict, found: list[Entry]) -> dict:
    """``data`` with the reference's discovery keys filled in from a newer shape, for readers that
    know only those keys. Nothing is added to a session in the reference's shape."""
    newer = [e for e in found if e.kind in ("file", "pattern", "gotcha")
             and e.field.rsplit(".", 1)[-1] not in REFERENCE_DISCOVERIES]
    if not newer:
        return data
    out = dict(data)
    disc = dict(out["discoveries"]) if isinstance(out.get("discoveries"), dict) else {}
    files = dict(disc["files_understood"]) if isinstance(disc.get("files_understood"), dict) else {}
    for e in newer:
        if e.kind == "file":
            files.setdefault(e.path, e.purpose)
    disc["files_understood"] = files
    for kind, key in (("pattern", "patterns_found"), ("gotcha", "gotchas_encountered")):
        have = list(disc[key]) if isinstance(disc.get(key), list) else []
        have += [e.text for e in newer if e.kind == kind and e.text not in have]
        disc[key] = have
    if isinstance(out.get("discoveries"), dict) or "discoveries" not in out:
        out["discoveries"] = disc
    return out
