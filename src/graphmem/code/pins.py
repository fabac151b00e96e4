"""What ``context(files=[...])`` pins: the memories anchored to the files an agent works on.

A file pins the memories anchored to it by the name they used, and those whose code now lives
there (a file renamed there, a function moved there). A folder (``src``, or ``.`` for the whole
project) pins the same for the files under it, newest first, at most ``FOLDER_PINS`` per folder
once gone, retired and superseded ones are out, so a folder as wide as the project cannot fill
the context with pins the task may not need (pinned memories skip the relevance floor).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Iterable

from .tree import Snapshot

FOLDER_PINS = 5
FOLDER_CANDIDATES = 4 * FOLDER_PINS  # read per folder, before validity and freshness filter


def is_folder(root: str | Path, path: str) -> bool:
    """Whether ``path`` (relative to the project) names a folder of it."""
    return path == "." or os.path.isdir(os.path.join(root, path))


def under(folder: str, path: str) -> bool:
    """Whether ``path`` lies under ``folder`` (``.``: the whole project)."""
    return folder == "." or path.startswith(folder + "/")


def pinned_ids(spec_dirs: list, paths: list[str], root: str | Path, snap: Snapshot
               ) -> tuple[list[str], dict[str, str]]:
    """The ids of the items anchored to ``paths`` (files first, then each folder's newest),
    and for an id that only a folder brought, that folder (``cap_folders`` reads it)."""
    from graphmem.code.about_answer import moved_here
    from .anchors import book
    from .freshness import anchored_to

    folders = [p for p in paths if is_folder(root, p)]
    files = [p for p in paths if p not in folders]
    ids = anchored_to(spec_dirs, files) if files else []  # by the names the memories used,
    ids += [i for i in moved_here(spec_dirs, files, snap) if i not in ids]  # then by new names
    folder_of: dict[str, str] = {}
    for folder in folders:
        used = sorted({p for spec in spec_dirs for p in book(spec).now_by_path if under(folder, p)})
        there = [p for p in snap.files if under(folder, p)]
        found = _newest(spec_dirs, [*anchored_to(spec_dirs, used, FOLDER_CANDIDATES),
                                    *moved_here(spec_dirs, there, snap, FOLDER_CANDIDATES)])
        for i in found[:FOLDER_CANDIDATES]:
            if i not in ids:
                ids.append(i)
                folder_of[i] = folder
    return ids, folder_of


def unknown(spec_dirs: list, paths: list[str], root: str | Path, snap: Snapshot) -> list[str]:
    """The ``paths`` nothing is known about: no such file or folder in the project, and no
    memory anchored to that name (a typo, or a file the agent is about to create)."""
    from .anchors import book

    named = [book(spec).by_path for spec in spec_dirs]
    return [p for p in paths if p not in snap.files and not os.path.exists(os.path.join(root, p))
            and not any(p in by_path for by_path in named)]


def cap_folders(hits: Iterable, folder_of: dict[str, str]) -> list:
    """``hits`` with at most ``FOLDER_PINS`` of each folder's (in their order: newest first)."""
    taken: dict[str, int] = {}
    out = []
    for h in hits:
        folder = folder_of.get(h.id)
        if folder is not None:
            if taken.get(folder, 0) >= FOLDER_PINS:
                continue
            taken[folder] = taken.get(folder, 0) + 1
        out.append(h)
    return out


def _newest(spec_dirs: list, ids: list[str]) -> list[str]:
    """``ids`` once each, newest record first."""
    from .anchors import book

    at: dict[str, str] = {}
    for spec in spec_dirs:
        records = book(spec).records
        for i in ids:
            if i in records:
                at[i] = max(at.get(i, ""), records[i].get("at") or "")
    return sorted(dict.fromkeys(ids), key=lambda i: at.get(i, ""), reverse=True)
