"""Damaged memory files: moved aside (``quarantine``), or repaired with the damaged original kept
aside (``keep_aside``, ``salvage_utf8``), each with a warning naming both files. Side copies are
``<name>.corrupt-<time>`` (``atomic.aside_path``), which ``graphmem doctor`` lists."""

from __future__ import annotations

import logging
import os
import warnings
from pathlib import Path
from typing import Any

from .atomic import aside_path, atomic_write_bytes
from .lock import folder_lock
from .safe import read_bytes

log = logging.getLogger("graphmem.files")


class CorruptFileWarning(UserWarning):
    """A memory file could not be parsed and was moved aside."""


def quarantine(path: Path, reason: str) -> Path:
    """Move a corrupt file aside to ``<name>.corrupt-<timestamp>`` and warn with its name."""
    target = aside_path(path)
    try:
        os.replace(path, target)
    except FileNotFoundError:
        return target
    msg = f"graphmem: corrupt file {path} ({reason}) moved aside to {target.name}"
    log.warning(msg)
    warnings.warn(msg, CorruptFileWarning, stacklevel=3)
    return target


def keep_aside(path: Path, raw: bytes, reason: str) -> Path:
    """Copy a damaged file's bytes to ``<name>.corrupt-<timestamp>`` (listed by ``graphmem doctor``)
    before its readable part replaces it, and warn with both names."""
    side = aside_path(path)
    atomic_write_bytes(side, raw)
    msg = (f"graphmem: {path} was damaged ({reason}); its readable records were kept and the "
           f"damaged original saved as {side.name}")
    log.warning(msg)
    warnings.warn(msg, CorruptFileWarning, stacklevel=3)
    return side


def salvage_utf8(path: Path, parse: Any = None, lock: Any = None) -> bool:
    """Repair a file with invalid UTF-8 under ``lock`` (default: its folder's): bad bytes become
    U+FFFD, the original is kept aside. ``parse(text)`` must accept the repaired text (else
    nothing changes and False is returned). True when the file is readable UTF-8 afterwards."""
    with lock if lock is not None else folder_lock(path.parent):
        try:
            raw = read_bytes(path)
        except FileNotFoundError:
            return False
        try:
            raw.decode("utf-8")
            return True  # repaired meanwhile by another process
        except UnicodeDecodeError as exc:
            reason = f"invalid UTF-8 at byte {exc.start}"
        text = raw.decode("utf-8", "replace")
        if parse is not None:
            try:
                parse(text)
            except ValueError:
                return False
        keep_aside(path, raw, reason)
        atomic_write_bytes(path, text.encode("utf-8"))
        return True
