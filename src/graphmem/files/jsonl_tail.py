"""An append-only JSON Lines file read incrementally (``anchors.jsonl``, ``validity.jsonl``).

Each ``refresh`` reads only the lines appended since the last one, and starts over when the file
was replaced (another inode) or cut. A line still being written (no newline yet) is read next
time; a line that is not a JSON object, or too deeply nested to parse, is skipped
(``skipped``), and so is a record ``take`` refuses (it returns False) or cannot use: one bad line
costs only itself. ``bad`` keeps the first few skipped lines' numbers and starts (``graphmem
doctor`` lists them). The file is never read through a link.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import TypeVar

from .safe import file_stat, open_file

T = TypeVar("T", bound="JsonlTail")

_lock = threading.Lock()
MAX_BAD = 20  # skipped lines remembered for doctor (their count is kept whole)
_tails: dict[tuple[type, str], "JsonlTail"] = {}


class JsonlTail:
    """Subclasses say what starting over clears (``reset``) and what one record adds (``take``)."""

    ino: int | None  # the file's inode when last read (None: not read, or missing)

    def __init__(self, path: Path):
        self.path, self.offset, self.ino = Path(path), 0, None
        self._start_over()

    def _start_over(self) -> None:
        self.line_no, self.bad_count = 0, 0
        self.bad: list[tuple[int, str]] = []  # (line number, its start), the first MAX_BAD
        self.reset()

    def reset(self) -> None:
        raise NotImplementedError

    def take(self, rec: dict) -> bool | None:
        """Add one record; False when it is not in the file's shape (it is then skipped)."""
        raise NotImplementedError

    def skipped(self, line: bytes) -> None:
        """A line that is not a JSON object, or a record not in shape (subclasses may warn)."""

    def _bad(self, line: bytes) -> None:
        self.bad_count += 1
        if len(self.bad) < MAX_BAD:
            self.bad.append((self.line_no, line[:80].decode("utf-8", "replace")))
        self.skipped(line)

    def refresh(self: T) -> T:
        st = file_stat(self.path)  # a link in its place is a StorageError
        if st is None or st.st_ino != self.ino or st.st_size < self.offset:
            self.ino, self.offset = (st.st_ino if st else None), 0
            self._start_over()
        if st is None or st.st_size == self.offset:
            return self
        with open_file(self.path) as fh:
            fh.seek(self.offset)
            data = fh.read(st.st_size - self.offset)
        end = data.rfind(b"\n") + 1
        for line in data[:end].split(b"\n")[:-1]:
            self.line_no += 1
            try:
                rec = json.loads(line)
            except (ValueError, RecursionError):  # RecursionError: nested too deeply
                rec = None
            if isinstance(rec, dict):
                try:
                    ok = self.take(rec) is not False
                except (TypeError, ValueError, KeyError, AttributeError, RecursionError):
                    ok = False  # a shape ``take`` did not foresee: the line alone is lost
                if not ok:
                    self._bad(line)
            elif line.strip():
                self._bad(line)
        self.offset += end
        return self


def tail(cls: type[T], path: Path) -> T:
    """The process's one reader of ``path`` as ``cls``, refreshed."""
    with _lock:
        got = _tails.get((cls, str(path)))
        if got is None:
            got = _tails[(cls, str(path))] = cls(path)
        return got.refresh()  # type: ignore[return-value]
