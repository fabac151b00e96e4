"""Memory folders merged like code: the git attributes graphmem writes and its JSON merge driver.

A committed memory folder has three kinds of file, and each merges with plain git:

- append-only text (``gotchas.md``, ``patterns.md``, ``*.jsonl``): every line is a whole entry and
  their order does not matter, so git's built-in ``union`` driver keeps the lines of both sides;
  the readers take a repeated line once;
- JSON objects (``codebase_map.json``, ``session_insights/session_NNN.json``,
  ``anchor_states.json``, an episode's ``session.json``): ``graphmem merge-driver %O %A %B %P``
  merges them key by key (``merge3``): what one side changed wins, lists keep the items of both,
  and two branches that both created ``session_005.json`` end with one session holding both;
- everything else (``memory_summary.md``, regenerated) merges as text.

Git does not clone merge drivers, so ``graphmem hooks install`` registers ours in ``.git/config``
(``register_driver``); without it git merges those JSON files as text, and a reader meeting
conflict markers in one takes both sides (``unconflict``) instead of moving it aside.
"""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

from ..errors import NotFoundError

DRIVER = "graphmem"
ATTRIBUTES = (
    "# graphmem: memory merges with plain git (`graphmem hooks install` registers the driver)\n"
    "memory/gotchas.md merge=union\n"
    "memory/patterns.md merge=union\n"
    "memory/*.jsonl merge=union\n"
    "memory/episodes/*/*.jsonl merge=union\n"
    f"memory/codebase_map.json merge={DRIVER}\n"
    f"memory/anchor_states.json merge={DRIVER}\n"
    f"memory/session_insights/*.json merge={DRIVER}\n"
    f"memory/episodes/*/session.json merge={DRIVER}\n")
_MISSING = object()


def merge3(base: Any, ours: Any, theirs: Any) -> Any:
    """A three-way merge of JSON values that never conflicts: objects key by key, lists as the
    union of both sides less what one side removed from the base, scalars taking the side that
    changed (ours when both did; the later of two ISO times)."""
    if ours == theirs:
        return ours
    if theirs == base:
        return ours
    if ours == base:
        return theirs
    if isinstance(ours, dict) and isinstance(theirs, dict):
        b = base if isinstance(base, dict) else {}
        out: dict[str, Any] = {}
        for key in list(ours) + [k for k in theirs if k not in ours]:
            o, t, bb = ours.get(key, _MISSING), theirs.get(key, _MISSING), b.get(key, _MISSING)
            if o is _MISSING:
                if bb is _MISSING or t != bb:  # added by theirs, or changed there: kept
                    out[key] = t
            elif t is _MISSING:
                if bb is _MISSING or o != bb:
                    out[key] = o
            else:
                out[key] = merge3(None if bb is _MISSING else bb, o, t)
        return out
    if isinstance(ours, list) and isinstance(theirs, list):
        b_list = base if isinstance(base, list) else []
        gone = [x for x in b_list if x not in ours or x not in theirs]
        out_list = [x for x in ours if x not in gone]
        out_list += [x for x in theirs if x not in out_list and x not in gone]
        return out_list
    if isinstance(ours, str) and isinstance(theirs, str) and _ISO.match(ours) and _ISO.match(theirs):
        return max(ours, theirs)
    return ours


_ISO = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d")


def merge_files(base: Path, ours: Path, theirs: Path) -> bool:
    """What git's driver call does: merge the three JSON files into ``ours``. False (a conflict
    left to git) when one side is not JSON; the base may be empty (both sides added the file)."""
    try:
        b_text = base.read_text(encoding="utf-8")
        o = json.loads(ours.read_text(encoding="utf-8"))
        t = json.loads(theirs.read_text(encoding="utf-8"))
        b = json.loads(b_text) if b_text.strip() else None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError, RecursionError):
        return False
    merged = merge3(b, o, t)
    if isinstance(merged, dict) and isinstance(meta := merged.get("_metadata"), dict) \
            and "total_files" in meta:
        meta["total_files"] = len([k for k in merged if not k.startswith("_")])
    sort = ours.name == "codebase_map.json"
    ours.write_text(json.dumps(merged, indent=2, ensure_ascii=False, sort_keys=sort) + "\n",
                    encoding="utf-8")
    return True


_CONFLICT = re.compile(r"^<<<<<<< [^\n]*\n(.*?)^(?:\|\|\|\|\|\|\| [^\n]*\n.*?)?=======\n(.*?)"
                       r"^>>>>>>> [^\n]*\n", re.S | re.M)


def unconflict(text: str) -> Any | None:
    """A JSON file git left with conflict markers (no driver registered), read as the merge of
    both sides; None when it holds none or a side is not JSON."""
    if "<<<<<<< " not in text:
        return None
    ours = _CONFLICT.sub(lambda m: m.group(1), text)
    theirs = _CONFLICT.sub(lambda m: m.group(2), text)
    try:
        return merge3(None, json.loads(ours), json.loads(theirs))
    except (json.JSONDecodeError, RecursionError):
        return None


def write_attributes(folder: Path) -> Path:
    """Write ``<folder>/.gitattributes`` (graphmem's lines) unless it already holds them."""
    from .atomic import atomic_write_text

    path = folder / ".gitattributes"
    try:
        current = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        current = ""
    if ATTRIBUTES not in current:
        atomic_write_text(path, (current.rstrip("\n") + "\n\n" if current.strip() else "")
                          + ATTRIBUTES)
    return path


def register_driver(repo: Path, python: str) -> None:
    """Name graphmem's merge driver in the repository's ``.git/config`` (git does not clone it)."""
    cmd = f"{python} -m graphmem.cli merge-driver %O %A %B %P"
    for key, value in ((f"merge.{DRIVER}.name", "graphmem memory (JSON merged key by key)"),
                       (f"merge.{DRIVER}.driver", cmd)):
        try:
            out = subprocess.run(["git", "-C", str(repo), "config", key, value],
                                 capture_output=True, text=True, timeout=10)
        except (OSError, subprocess.SubprocessError) as exc:
            raise NotFoundError(f"cannot run git: {exc}") from None
        if out.returncode != 0:
            raise NotFoundError(f"git config {key} failed: {out.stderr.strip()}")


def unregister_driver(repo: Path) -> None:
    """Remove graphmem's merge driver from the repository's config (absent is fine)."""
    subprocess.run(["git", "-C", str(repo), "config", "--remove-section", f"merge.{DRIVER}"],
                   capture_output=True, text=True, timeout=10)
