"""An append-only JSON Lines file read incrementally (``anchors.jsonl``, ``validity.jsonl``).

Each ``refresh`` reads only the lines appended since the last one, and starts over when the file
was replaced (another inode) or cut. A line still being written (no newline yet) is read next
time; a line that is not a JSON object is skipped (``skipped``). The file is never read through
a link.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import TypeVar

from .safe import file_stat, open_file

T = TypeVar("T", bound="JsonlTail")

_lock = threading.Lock()
_tails: dict[tuple[type, str], "JsonlTail"] = {}


class JsonlTail:
    """Subclasses say what starting over clears (``reset``) and what one record adds (``take``)."""

    ino: int | None  # the file's inode when last read (None: not read, or missing)

    def __init__(self, path: Path):
        self.path, self.offset, self.ino = Path(path), 0, None
        self.reset()

    def reset(self) -> None:
        raise NotImplementedError

    def take(self, rec: dict) -> None:
        raise NotImplementedError

    def skipped(self, line: bytes) -> None:
        """A line that is not a JSON object (subclasses may warn)."""

    def refresh(self: T) -> T:
        st = file_stat(self.path)  # a link in its place is a StorageError
        if st is None or st.st_ino != self.ino or st.st_size < self.offset:
            self.ino, self.offset = (st.st_ino if st else None), 0
            self.reset()
        if st is None or st.st_size == self.offset:
            return self
        with open_file(self.path) as fh:
            fh.seek(self.offset)
            data = fh.read(st.st_size - self.offset)
        end = data.rfind(b"\n") + 1
        for line in data[:end].splitlines():
            try:
                rec = json.loads(line)
            except ValueError:
                rec = None
            if isinstance(rec, dict):
                self.take(rec)
            elif line.strip():
                self.skipped(line)
        self.offset += end
        return self


def tail(cls: type[T], path: Path) -> T:
    """The process's one reader of ``path`` as ``cls``, refreshed."""
    with _lock:
        got = _tails.get((cls, str(path)))
        if got is None:
            got = _tails[(cls, str(path))] = cls(path)
        return got.refresh()  # type: ignore[return-value]
