"""An export's session files placed in another memory folder: the name each gets, which are
already there, and the ids their learnings had there mapped to the ids they get here.

The rule (the README states it): a session whose content is already here, under any name, is
not written again (its content compared without ``session_number``, so an export of this folder
re-imported where it came from adds nothing). Otherwise, in a project's own memory (committed,
``session_names.py``) it keeps its number under a name that carries its writer: the source's
own tag when its name has one, else six hex digits of the source project, spec and file name;
that name already holding other content here (or a link, or a file it cannot read) is kept as it
is and the session is skipped. In a spec folder (``session_NNN.json``, numbers only) it takes the
next free number, in export order, its ``session_number`` set to it. No session file here is
ever overwritten or merged into.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any

from .insight_items import entry_id
from .insight_shapes import entries, session_facts
from .session_names import NAME, session_name


@dataclass
class Incoming:
    """One exported session file, redacted, before it is placed."""

    where: str  # "<export> line N"
    project: str  # the key of the project it came from
    spec: str | None  # its spec folder there
    number: int  # the number of its file name there
    source: str  # its file there, relative to that project
    data: dict  # as it will be written here (redacted)


@dataclass
class Placed:
    """Where an incoming session goes: a new file here, or one already here."""

    incoming: Incoming
    name: str  # the file name here
    data: dict  # what that file holds (renumbered in a spec folder)
    new: bool  # to be written
    why: str = ""  # why it is not written (empty when it is)


def content_key(data: dict) -> str:
    """A session's content as compared across folders: all but its ``session_number``."""
    return json.dumps({k: v for k, v in data.items() if k != "session_number"}, sort_keys=True,
                      ensure_ascii=False, default=str)


def source_tag(inc: Incoming) -> str:
    """The writer tag a source session file gets here: its own when it has one."""
    name = inc.source.rsplit("/", 1)[-1]
    m = NAME.fullmatch(name)
    if m and m.group(2):
        return m.group(2)
    raw = "\0".join((inc.project, inc.spec or "", name))
    return hashlib.sha256(raw.encode("utf-8", "replace")).hexdigest()[:6]


def place(incoming: list[Incoming], here: dict[str, dict], committed: bool, next_number: int,
          taken: frozenset[str] = frozenset()) -> list[Placed]:
    """Where each incoming session goes, given the session files here (name -> content, updated
    with the new ones), the next free session number here, and the names here that could not be
    read (a link, a damaged file: never written over either)."""
    seen = {content_key(d): name for name, d in here.items()}
    out: list[Placed] = []
    for inc in incoming:
        key = content_key(inc.data)
        if key in seen:
            out.append(Placed(inc, seen[key], here.get(seen[key], inc.data), False,
                              f"already here as {seen[key]}"))
            continue
        if committed:
            name, data = session_name(inc.number, source_tag(inc)), inc.data
            if name in here or name in taken:
                out.append(Placed(inc, name, here.get(name, {}), False, f"{name} here holds "
                                  "other content: kept as it is (an import never overwrites a "
                                  "session)"))
                continue
        else:
            name, data = session_name(next_number), {**inc.data, "session_number": next_number}
            next_number += 1
        here[name] = data
        seen[key] = name
        out.append(Placed(inc, name, data, True))
    return out


def id_map(src: tuple[str, str], raw: dict, dst: tuple[str, str], placed: dict) -> dict[str, str]:
    """``exported id -> id here`` of the learnings of one session: ``raw`` as exported (read
    under ``src`` = (project key, spec) there), ``placed`` as held here (under ``dst``)."""
    out: dict[str, str] = {}
    there, here = entries(raw), entries(placed)
    sub_there, sub_here = session_facts(raw).get("subtask"), session_facts(placed).get("subtask")
    for a, b in zip(there, here):
        if (a.kind, a.field) == (b.kind, b.field):
            out[entry_id(*src, a, sub_there)] = entry_id(*dst, b, sub_here)
    return out


def number_problem(value: Any) -> str | None:
    """What is wrong with a session number, None when it is one (1 to 999,999)."""
    if isinstance(value, bool) or not isinstance(value, int):
        return f"must be an integer, got {type(value).__name__}"
    if not 1 <= value <= 999_999:
        return f"must be 1 to 999999, got {value}"
    return None
