"""Crash-safe file writes: whole files by atomic replace, log-style files by whole-line appends."""

from __future__ import annotations

import json
import os
import tempfile
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ..errors import StorageError
from .safe import open_fd, open_file


def fsync_dir(folder: Path) -> None:
    """Make a rename or a new file in ``folder`` durable."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def atomic_write_bytes(path: Path, data: bytes, sync: bool = True) -> None:
    """Write ``data`` to a uniquely named temp file beside ``path``, fsync it, then replace ``path``.

    A reader sees either the old file or the new one, never a torn one; a crash leaves at most a
    stray ``.<name>.*.tmp`` file, which readers ignore and ``graphmem doctor --fix`` removes once it
    is an hour old. ``sync=False`` (``files.fsync``): nothing synced, so only a crash of the
    process is survived, not a power cut.
    """
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            if sync:
                os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    if sync:
        fsync_dir(path.parent)


def atomic_write_text(path: Path, text: str, sync: bool = True) -> None:
    """Atomically write UTF-8 text."""
    atomic_write_bytes(path, text.encode("utf-8"), sync)


def atomic_write_json(path: Path, data: Any, *, sort_keys: bool = False, sync: bool = True) -> None:
    """Atomically write JSON with the reference's formatting (indent 2)."""
    atomic_write_text(path, json.dumps(data, indent=2, sort_keys=sort_keys, ensure_ascii=False),
                      sync)


def write_all(fd: int, data: bytes) -> None:
    """Write every byte of ``data`` to ``fd``: a short write (a full disk, a file size limit) is
    continued, and one that cannot go on raises ``OSError`` (never a silent success)."""
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        if n <= 0:  # regular files do not return 0 for a non-empty write; never loop on it
            raise OSError(28, "no space left: nothing written")
        view = view[n:]


def append_line(path: Path, line: str, *, sync: bool = True) -> None:
    """Append one complete line (or several, as one text) and fsync it (``sync=False`` for
    derived files that ``reindex`` writes again).

    Used for append-only files (bullets, JSON Lines). The caller holds the folder lock. The line
    is written whole or not at all: a write that stops short (a full disk, a file size limit)
    cuts what it wrote and raises ``StorageError``, so no torn line is left for the next append's
    ``repair_tail`` to cut. After a power cut a torn last line is still possible; readers drop a
    final line that lacks its newline (``repair_tail`` truncates it on the next write).
    """
    data = (line.rstrip("\n") + "\n").encode("utf-8")
    fd = open_fd(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT)  # never appends through a link
    try:
        before = os.fstat(fd).st_size  # the caller holds the lock: nobody else appends
        try:
            write_all(fd, data)
            if sync:
                os.fdatasync(fd)
        except OSError as exc:
            try:
                os.ftruncate(fd, before)  # a failed append leaves no partial line behind
            except OSError:
                pass
            raise StorageError(f"cannot append to {path}: {exc}") from None
    finally:
        os.close(fd)


def aside_path(path: Path, tag: str = "") -> Path:
    """Where a damaged file's bytes are kept beside it: ``<name>.corrupt[-<tag>]-<UTC time>``
    (``graphmem doctor`` lists them; ``clear`` counts them as graphmem's)."""
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S%fZ")
    return path.with_name(f"{path.name}.corrupt-{tag + '-' if tag else ''}{stamp}")


def repair_tail(path: Path, keep_aside: bool = False) -> bytes | None:
    """Cut a torn final line (no trailing newline): the one repair of every append-only file.
    Returns the bytes cut, or None when the file ends whole (or is absent or empty).

    ``keep_aside``: the cut bytes are first saved beside the file as
    ``<name>.corrupt-torn-<time>`` (which ``graphmem doctor`` lists). The caller holds the
    folder lock. A link in ``path``'s place is refused (``StorageError``): its target is never cut.
    """
    try:
        with open_file(path, "rb+") as f:
            size = f.seek(0, os.SEEK_END)
            if size == 0:
                return None
            f.seek(size - 1)
            if f.read(1) == b"\n":
                return None
            cut = 0  # walk back to the previous newline in chunks
            pos = size
            while pos > 0:
                step = min(1 << 16, pos)
                f.seek(pos - step)
                idx = f.read(step).rfind(b"\n")
                if idx >= 0:
                    cut = pos - step + idx + 1
                    break
                pos -= step
            f.seek(cut)
            torn = f.read()
            if keep_aside:
                side = open_fd(aside_path(path, "torn"), os.O_WRONLY | os.O_CREAT | os.O_EXCL)
                with os.fdopen(side, "wb") as out:
                    out.write(torn)
            f.truncate(cut)
            f.flush()
            os.fsync(f.fileno())
            return torn
    except FileNotFoundError:
        return None
