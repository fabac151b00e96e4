"""Stored text made safe to print on a terminal: escape sequences and control characters removed.

What graphmem stores came from agents and tools; a gotcha holding ``ESC ] 0 ; title BEL`` or
``ESC [ 2 J`` would retitle or clear the terminal of whoever runs ``graphmem gotchas``. Every
human-readable CLI output of stored text goes through ``safe_display`` (``--json`` output is the
exact data, with control characters escaped by JSON). ``console_for`` sets up rich for another
process's environment.
"""

from __future__ import annotations

import re
from typing import Any, Mapping

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


# What rich reads from the environment to decide width and colours (see ``console_for``).
RICH_ENV = ("COLUMNS", "LINES", "NO_COLOR", "FORCE_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE",
            "COLORTERM", "TERM")


def console_for(env: Mapping[str, str], file: Any) -> Any:
    """A rich ``Console`` writing to ``file`` as rich sets one up in a process whose environment
    is ``env`` (``RICH_ENV``) and whose streams are not terminals: the warm search server renders
    for such a CLI. Only rich's public arguments; rich's own rules, applied to ``env``."""
    from rich.console import Console

    def number(name: str) -> int | None:
        value = env.get(name, "")
        return int(value) if value.isdigit() else None

    tty = env.get("TTY_COMPATIBLE", "")
    terminal = tty == "1" if tty in ("0", "1") else env.get("FORCE_COLOR", "") != ""
    term = env.get("TERM", "").strip().lower()
    dumb = terminal and term in ("dumb", "unknown")
    colors = None
    if terminal and not dumb:
        colors = ("truecolor" if env.get("COLORTERM", "").strip().lower() in ("truecolor", "24bit")
                  else {"kitty": "256", "256color": "256"}.get(term.rpartition("-")[2], "standard"))
    width, height = number("COLUMNS"), number("LINES")
    if dumb and (width is None or height is None):
        width, height = 80, 25  # rich's size for a dumb terminal unless both are set
    interactive = {"0": False, "1": True}.get(env.get("TTY_INTERACTIVE", ""), terminal and not dumb)
    return Console(file=file, force_terminal=terminal, force_jupyter=False,
                   force_interactive=interactive, color_system=colors, legacy_windows=False,
                   no_color=env.get("NO_COLOR", "") != "", width=width or 80, height=height or 25)
