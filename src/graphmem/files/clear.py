"""``graphmem clear``: delete the files graphmem writes in a memory folder, and nothing else.

Only graphmem's own names go: the reference layout (``codebase_map.json``, ``patterns.md``,
``gotchas.md``, ``session_insights/session_NNN.json``), the episode files, the graph outbox,
``memory_summary.md`` and the code-memory logs (``anchors.jsonl``, ``validity.jsonl``,
``anchor_states.json``), plus the quarantined (``<name>.corrupt-*``) and temporary
(``.<name>.*.tmp``) copies of those. Files of other names, folders of other names and every link
are kept (links are named in a warning): nothing is deleted through a link, and a link in place
of the memory folder itself is refused by the caller before we get here. Lock files stay: another
process may be waiting on one.
"""

from __future__ import annotations

import logging
import os
import re
from pathlib import Path

from .safe import real_dir

log = logging.getLogger("graphmem.files")

MEMORY_FILES = re.compile(r"codebase_map\.json|patterns\.md|gotchas\.md|graph_outbox\.jsonl|"
                          r"memory_summary\.md|anchors\.jsonl|validity\.jsonl|"
                          r"anchor_states\.json")  # a cleared memory's ids must not come back retired
INSIGHT_FILES = re.compile(r"session_\d+\.json")
EPISODE_FILES = re.compile(r"session\.json|turns\.jsonl|steps\.jsonl")
# a session's folder, one being deleted (episodes.py), one an import was writing when it died
# (episode_transfer.py)
SESSION_FOLDER = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.\-]{0,127}|\.deleted-.+|\.importing-.+")
_QUARANTINED = re.compile(r"(.+)\.corrupt-[^/]+")
_TEMPORARY = re.compile(r"\.(.+)\.[^./]+\.tmp")  # atomic.atomic_write_bytes's temp names


def is_ours(name: str, names: re.Pattern) -> bool:
    """A file graphmem writes: one of ``names``, or a quarantined or temporary copy of one."""
    if names.fullmatch(name):
        return True
    m = _QUARANTINED.fullmatch(name) or _TEMPORARY.fullmatch(name)
    return bool(m and names.fullmatch(m.group(1)))


def clear_memory_folder(memory_dir: Path) -> list[Path]:
    """Delete graphmem's files under ``memory_dir`` (a real folder); returns the links kept."""
    links: list[Path] = []
    _remove_files(memory_dir, MEMORY_FILES, links)
    insights = memory_dir / "session_insights"
    if _real_child(insights, links):
        _remove_files(insights, INSIGHT_FILES, links)
        _rmdir_if_empty(insights)
    episodes = memory_dir / "episodes"
    if _real_child(episodes, links):
        for entry in sorted(os.scandir(episodes), key=lambda e: e.name):
            folder = Path(entry.path)
            if entry.name == ".locks" or not SESSION_FOLDER.fullmatch(entry.name):
                continue
            if _real_child(folder, links):
                _remove_files(folder, EPISODE_FILES, links)
                _rmdir_if_empty(folder)
    if links:
        log.warning("graphmem clear kept these links (graphmem never deletes through a link): %s",
                    ", ".join(map(str, links)))
    return links


def _real_child(path: Path, links: list[Path]) -> bool:
    """Whether ``path`` is a real folder; a link there is noted and left alone."""
    if os.path.islink(path):
        links.append(path)
        return False
    return os.path.isdir(path) and real_dir(path)


def _remove_files(folder: Path, names: re.Pattern, links: list[Path]) -> None:
    for entry in os.scandir(folder):
        if not is_ours(entry.name, names):
            continue
        if entry.is_symlink():
            links.append(Path(entry.path))
        elif entry.is_file(follow_symlinks=False):
            os.unlink(entry.path)  # unlink removes the name, never what a name points to


def _rmdir_if_empty(folder: Path) -> None:
    try:
        os.rmdir(folder)
    except OSError:  # foreign files (or a link) left inside: the folder stays with them
        pass
