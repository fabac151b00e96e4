"""The agent hooks' spools read back: where a project's spools are, their whole lines after an
offset, how far the digest read each (``<session>.state.json``), and the prompts it has not
read yet, which ``Memory.search`` finds before any digest ran (``facade/pending_recall.py``).

The hooks write the spools (``hooks/spool.py``) and the digest advances the offsets
(``hooks/digest.py``); this module only reads. Standard library only, and no ``pathlib`` or
``typing``: a hook process imports it, and pays for each import.
"""

from __future__ import annotations

import json
import os

TYPE_CHECKING = False  # typing costs a hook process ~3 ms to import; mypy reads the names
if TYPE_CHECKING:
    from os import PathLike
    from typing import Any

SPOOL = os.path.join(".graphmem", "spool")
STATE = ".state.json"  # a session's digest state, beside its spool
MAX_TAIL = 4 << 20  # bytes of one session's unread tail read at most (its newest)
MAX_PENDING = 500  # prompts ``pending_prompts`` returns at most (the newest)
_OFFSETS: dict[str, tuple[tuple[int, int, int], int]] = {}  # state file -> (its stat, offset)
_READ: dict[str, int] = {}  # spool -> a size the digest had read whole (a spool only grows)


def read_from(path: str | PathLike[str], offset: int) -> tuple[list[dict], int]:
    """The whole lines of ``path`` after byte ``offset`` (a torn last line is left for later),
    and the offset after the last whole line read."""
    lines, end = _lines(path, offset)
    return [rec for _, rec in lines], end


def _read(path: str | PathLike[str], offset: int) -> bytes:
    try:
        with open(path, "rb") as fh:
            fh.seek(offset)
            data = fh.read()
    except FileNotFoundError:
        return b""
    return data[:data.rfind(b"\n") + 1]


def _lines(path: str | PathLike[str], offset: int, torn_start: bool = False
           ) -> tuple[list[tuple[int, dict]], int]:
    """(byte offset, record) of each whole JSON-object line after ``offset`` (with
    ``torn_start`` the first, partial, line skipped), and the offset after the last whole line.
    A line some other tool wrote is skipped, never fatal."""
    data = _read(path, offset)
    at, end = offset, offset + len(data)
    if torn_start:
        cut = data.find(b"\n") + 1
        data, at = data[cut:], at + cut
    out = []
    for raw in data.splitlines(keepends=True):
        try:
            rec = json.loads(raw)
        except ValueError:
            rec = None
        if isinstance(rec, dict):
            out.append((at, rec))
        at += len(raw)
    return out, end


def state_file(folder: str, session: str) -> str:
    """The digest state of the session whose spool is ``<folder>/<session>.jsonl``."""
    return os.path.join(folder, session + STATE)


def read_state(path: str) -> dict[str, Any]:
    """A session's digest state (``offset`` in its spool, what was learned so far); a missing
    or unreadable file is a session not digested yet."""
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.loads(fh.read())
    except (FileNotFoundError, ValueError):
        return {"offset": 0}
    return data if isinstance(data, dict) else {"offset": 0}


def digested_offset(folder: str, session: str) -> int:
    """How far the digest read the session's spool (bytes); remembered per state file until it
    is replaced (``save_state`` renames a new one in)."""
    path = state_file(folder, session)
    try:
        st = os.stat(path)
    except OSError:
        return 0
    key = (st.st_ino, st.st_mtime_ns, st.st_size)
    got = _OFFSETS.get(path)
    if got is not None and got[0] == key:
        return got[1]
    offset = read_state(path).get("offset", 0)
    offset = offset if isinstance(offset, int) and offset > 0 else 0
    if len(_OFFSETS) > 20_000:
        _OFFSETS.clear()
    _OFFSETS[path] = (key, offset)
    return offset


def pending_prompts(project: str | PathLike[str]) -> list[dict[str, Any]]:
    """The prompts in the project's spools that no digest has read yet, oldest first (the
    newest ``MAX_PENDING``): ``{"session", "offset", "t", "prompt"}`` each, ``offset`` the
    line's byte offset in ``<session>.jsonl``. A spool the digest had read whole when last
    asked costs one ``stat`` call."""
    folder = os.path.join(project, SPOOL)
    try:
        names = os.listdir(folder)
    except OSError:
        return []
    out: list[dict[str, Any]] = []
    for name in names:
        if not name.endswith(".jsonl") or name.startswith("."):
            continue
        path = os.path.join(folder, name)
        try:
            size = os.stat(path).st_size
        except OSError:
            continue
        if _READ.get(path) == size:
            continue
        session = name[:-len(".jsonl")]
        start = digested_offset(folder, session)
        if size <= start:
            if len(_READ) > 20_000:
                _READ.clear()
            _READ[path] = size
            continue
        torn = size - MAX_TAIL > start
        for at, rec in _lines(path, max(start, size - MAX_TAIL), torn_start=torn)[0]:
            text, t = rec.get("prompt"), rec.get("t")
            if rec.get("kind") == "prompt" and isinstance(text, str) and text.strip():
                out.append({"session": session, "offset": at, "prompt": text,
                            "t": float(t) if isinstance(t, (int, float)) else 0.0})
    out.sort(key=lambda p: (p["t"], p["session"], p["offset"]))
    return out[-MAX_PENDING:]
