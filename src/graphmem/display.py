"""Stored text made safe to print on a terminal: escape sequences and control characters removed.

What graphmem stores came from agents and tools; a gotcha holding ``ESC ] 0 ; title BEL`` or
``ESC [ 2 J`` would retitle or clear the terminal of whoever runs ``graphmem gotchas``. Every
human-readable CLI output of stored text goes through ``safe_display`` (``--json`` output is the
exact data, with control characters escaped by JSON).
"""

from __future__ import annotations

import re
from typing import Any

_SEQUENCES = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]"  # CSI: colours, cursor moves, clear screen
    r"|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?"  # OSC: window title, hyperlinks, clipboard
    r"|\x1b[PX^_][^\x1b]*(?:\x1b\\)?"  # DCS, SOS, PM, APC strings
    r"|\x1b[ -/]*[0-~]?"  # any other escape (and a lone ESC)
    r"|\x9b[0-?]*[ -/]*[@-~]"  # the 8-bit CSI
    r"|\x9d[^\x07\x9c]*[\x07\x9c]?")  # the 8-bit OSC
# Other C0 controls (tab and newline kept), DEL, C1 controls, and the bidirectional overrides and
# isolates that make a terminal show text in another order than it is stored.
_CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def safe_display(text: str) -> str:
    """``text`` without terminal escape sequences and control characters (tab, newline kept)."""
    if text.isprintable():  # the common case: nothing to remove, no regex run
        return text
    return _CONTROLS.sub("", _SEQUENCES.sub("", text.replace("\r\n", "\n")))


def safe_data(value: Any) -> Any:
    """``safe_display`` applied to every string inside ``value`` (dict keys included)."""
    if isinstance(value, str):
        return safe_display(value)
    if isinstance(value, dict):
        return {safe_data(k): safe_data(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [safe_data(v) for v in value]
    return value
