"""The per-session spool: one redacted JSON line per captured event, appended whole.

``<project>/.graphmem/spool/<session>.jsonl`` (the folder ignores itself in git). Each event is
one ``os.write`` of one line to a file opened with ``O_APPEND``, so parallel hooks of a session
(and its subagents) interleave whole lines and lose none. ``<private>...</private>`` spans are
cut before redaction; nothing else is kept of them. Standard library only, and no ``pathlib``
or ``typing`` (a hook process pays for each import): paths are strings.
"""

from __future__ import annotations

import json
import os
import re
import time

from graphmem.agent_spool import SPOOL, read_from  # noqa: F401 - read back by the digest
from graphmem.redact import redact

TYPE_CHECKING = False  # typing costs a hook process ~3 ms to import; mypy reads the names
if TYPE_CHECKING:
    from os import PathLike
    from typing import Any

MAX_FIELD = 2000  # characters kept of one captured string (a command, an error, a prompt)
MAX_LINE = 64_000  # bytes of one spool line; a bigger event keeps its first fields only
_PRIVATE = re.compile(r"<private>.*?(?:</private>|\Z)", re.S | re.I)
_SESSION = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-]{0,127}")


def spool_dir(project: str | PathLike[str]) -> str:
    """The project's spool folder (created, with a ``.gitignore`` that ignores it all)."""
    folder = os.path.join(project, SPOOL)
    if not os.path.isdir(folder):
        os.makedirs(folder, exist_ok=True)
        ignore = os.path.join(folder, ".gitignore")
        if not os.path.exists(ignore):
            with open(ignore, "w") as fh:
                fh.write("*\n")
    return folder


def session_name(session_id: Any) -> str:
    """A file name for the agent's session id (unsafe characters refused, ``ValueError``)."""
    if not isinstance(session_id, str) or not _SESSION.fullmatch(session_id):
        raise ValueError(f"session_id: must be 1-128 letters, digits, '_', '-' or '.', got "
                         f"{str(session_id)[:40]!r}")
    return session_id


def spool_path(project: str | PathLike[str], session_id: str) -> str:
    """The spool file of one session."""
    return os.path.join(spool_dir(project), f"{session_name(session_id)}.jsonl")


def scrub(value: Any, limit: int = MAX_FIELD) -> Any:
    """``value`` with private spans removed, secrets redacted and long strings cut."""
    if isinstance(value, str):
        text = _PRIVATE.sub("", value)
        return redact(text[:limit])
    if isinstance(value, dict):
        return {str(k)[:100]: scrub(v, limit) for k, v in list(value.items())[:50]}
    if isinstance(value, (list, tuple)):
        return [scrub(v, limit) for v in list(value)[:50]]
    if value is None or isinstance(value, (bool, int, float)):
        return value
    return scrub(str(value), limit)


def append(project: str | PathLike[str], session_id: str, record: dict) -> None:
    """Append one scrubbed record as one whole line (one write on an ``O_APPEND`` file)."""
    rec = scrub({"t": round(time.time(), 3), **record})
    line = json.dumps(rec, ensure_ascii=False, separators=(",", ":"))
    if len(line.encode("utf-8")) > MAX_LINE:
        rec = scrub({k: rec[k] for k in ("t", "kind", "tool") if k in rec})
        line = json.dumps({**rec, "cut": True}, ensure_ascii=False, separators=(",", ":"))
    data = (line + "\n").encode("utf-8")
    fd = os.open(spool_path(project, session_id), os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, data)
    finally:
        os.close(fd)
