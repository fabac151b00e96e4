"""What today's Auto-Claude agent tools write into ``memory/`` beside the reference layout.

Read only; graphmem never writes these shapes, and never rewrites them:

- ``record_gotcha`` appends to ``gotchas.md`` a block per gotcha, under its own header::

      ## [2026-01-27 10:00]
      The gotcha, maybe on several lines

      _Context: where it bit_

  ``blocks`` returns each as a ``Block``; its ``text`` is the gotcha with ``(Context: ...)``, the
  text the same tool sends to its graph, so the two are one memory.
- ``record_discovery`` keeps ``codebase_map.json`` as ``{"discovered_files": {path:
  {"description", "category", "discovered_at"}}, "last_updated": ...}``. ``map_files`` reads
  that and the reference's ``{path: purpose, "_metadata": {...}}`` (mixed too) into path ->
  purpose, and never takes a metadata key (``last_updated``, ``_metadata``, a value that is no
  text) for a file.
- its recovery manager keeps ``attempt_history.json`` as ``{"subtasks": {id: {"attempts":
  [{"session", "timestamp", "approach", "success", "error"}], "status"}}, "stuck_subtasks": [...],
  "metadata": {...}}``. ``attempts`` returns one ``Attempt`` per subtask and approach (a retry loop
  repeating an approach is one, with its count); ``build_commits.json`` holds commit hashes, no
  lesson, and is left alone.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

_HEADER = re.compile(r"^## \[([^\]\n]*)\][ \t]*$", re.M)
_CONTEXT = re.compile(r"\n?_Context: (.*)_\s*$", re.S)
CONTAINERS = ("discovered_files",)  # keys whose object holds path -> entry
METADATA = {"last_updated", "created_at", "updated_at"}  # and every key starting with "_"
PURPOSE_KEYS = ("description", "purpose", "summary")


@dataclass(frozen=True)
class Block:
    """One ``## [when]`` entry of a notes file."""

    when: str
    body: str
    context: str

    @property
    def text(self) -> str:
        """The entry as one line: the body, then ``(Context: ...)`` when it has one."""
        body = " ".join(self.body.split())
        return f"{body} (Context: {' '.join(self.context.split())})" if self.context else body


def blocks(text: str) -> list[Block]:
    """Every ``## [when]`` entry of ``text`` (``- `` bullet lines inside one stay bullets and
    are not part of its body); an entry with no text is skipped."""
    out = []
    heads = list(_HEADER.finditer(text))
    for i, head in enumerate(heads):
        end = heads[i + 1].start() if i + 1 < len(heads) else len(text)
        raw = text[head.end():end]
        lines = [ln for ln in raw.split("\n") if not ln.strip().startswith("- ")]
        body = "\n".join(lines).strip()
        context = ""
        m = _CONTEXT.search(body)
        if m:
            context, body = m.group(1).strip(), body[:m.start()].strip()
        if body:
            out.append(Block(head.group(1).strip(), body, context))
    return out


def _purpose(entry: Any) -> str | None:
    """The purpose an entry of the map holds: a text, or an object's description."""
    if isinstance(entry, str):
        return entry
    if isinstance(entry, dict):
        text = next((entry[k] for k in PURPOSE_KEYS if isinstance(entry.get(k), str)
                     and entry[k].strip()), None)
        if text is None:
            return None
        category = entry.get("category")
        if isinstance(category, str) and category.strip() and category != "general":
            return f"[{category.strip()}] {text}"
        return text
    return None


def map_files(data: dict) -> dict[str, str]:
    """path -> purpose of a ``codebase_map.json`` in either writer's shape; the reference's
    top-level entries win over ``discovered_files`` ones for the same path."""
    files: dict[str, str] = {}
    for key in CONTAINERS:
        inner = data.get(key)
        if isinstance(inner, dict):
            for path, entry in inner.items():
                purpose = _purpose(entry)
                if isinstance(path, str) and path.strip() and purpose is not None:
                    files[path] = purpose
    for key, value in data.items():
        if key in CONTAINERS or key in METADATA or key.startswith("_"):
            continue
        purpose = _purpose(value)
        if purpose is not None:
            files[key] = purpose
    return files


@dataclass(frozen=True)
class Attempt:
    """The attempts at one subtask with one approach (normalised), newest outcome last."""

    subtask: str
    approach: str
    count: int
    success: bool
    error: str
    sessions: tuple[int, ...]
    last: str  # the latest attempt's timestamp, as written

    @property
    def text(self) -> str:
        """``Subtask S: tried APPROACH (N times) - failed: ERROR`` / ``- succeeded``."""
        times = f" ({self.count} times)" if self.count > 1 else ""
        outcome = "succeeded" if self.success else "failed" + (f": {self.error}" if self.error else "")
        return f"Subtask {self.subtask}: tried {self.approach}{times} - {outcome}"


def attempts(data: dict) -> list[Attempt]:
    """The attempts of an ``attempt_history.json`` (anything else in it is ignored)."""
    subtasks = data.get("subtasks")
    out: list[Attempt] = []
    for sid, info in subtasks.items() if isinstance(subtasks, dict) else ():
        tries = info.get("attempts") if isinstance(info, dict) else None
        groups: dict[str, list[dict]] = {}
        for a in tries if isinstance(tries, list) else ():
            if isinstance(a, dict) and isinstance(a.get("approach"), str) and a["approach"].strip():
                groups.setdefault(" ".join(a["approach"].casefold().split()), []).append(a)
        for group in groups.values():
            last = group[-1]
            out.append(Attempt(str(sid), " ".join(last["approach"].split()), len(group),
                               last.get("success") is True,
                               " ".join(str(last.get("error") or "").split())[:1000],
                               tuple(a["session"] for a in group if isinstance(a.get("session"), int)),
                               str(last.get("timestamp") or "")))
    return out
