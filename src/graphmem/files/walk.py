"""The memory folders of a project: one walk finds its spec folders and the items they hold."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..identity import Project
    from ..models import MemoryItem

_SKIP_DIRS = {".git", "node_modules", ".venv", "venv", "__pycache__", ".tox", ".mypy_cache",
              "dist", "build", ".pytest_cache"}
_LAYOUT = ("codebase_map.json", "patterns.md", "gotchas.md", "session_insights")


def _memory_folders(project_dir: Path, holds) -> list[Path]:
    """The spec folders (parents of a ``memory/``) under ``project_dir`` whose memory folder
    ``holds(root, dirs)``; hidden graphmem folders (a demo, a home) and tool folders are
    skipped, but not the project's own memory folder, ``<project_dir>/.graphmem``."""
    found = []
    top = os.fspath(project_dir)
    for root, dirs, _files in os.walk(project_dir):
        dirs[:] = sorted(d for d in dirs if d not in _SKIP_DIRS and (
            not d.startswith(".graphmem") or d == ".graphmem" and root == top))
        if os.path.basename(root) == "memory" and holds(root, dirs):
            found.append(Path(root).parent)
            dirs[:] = []
    return found


def spec_folders(project_dir: Path) -> list[Path]:
    """Every spec folder under ``project_dir``: the parent of a ``memory/`` in the reference layout."""
    return _memory_folders(project_dir, lambda root, _dirs: any(
        os.path.exists(os.path.join(root, name)) for name in _LAYOUT))


def episode_specs(project_dir: Path) -> list[Path]:
    """Spec folders under ``project_dir`` that hold episodic sessions (``memory/episodes``)."""
    return _memory_folders(project_dir, lambda _root, dirs: "episodes" in dirs)


def project_items(project: "Project") -> tuple[list["MemoryItem"], list[Path]]:
    """Every item in a project's files (spec files, then session turns, steps and summaries),
    and its spec folders."""
    from .episodes import EpisodeStore
    from .spec_store import SpecStore

    if not project.root.is_dir():
        return [], []
    specs = spec_folders(project.root)
    items: list["MemoryItem"] = []
    for spec in specs:
        items.extend(SpecStore(spec, project).items())
    for spec in episode_specs(project.root):
        items.extend(EpisodeStore(spec).items(project))
    return items, specs


def spec_items(project: "Project", spec_dir: Path) -> list["MemoryItem"]:
    """Every searchable item held in one spec's files: insights, map, bullets and sessions."""
    from .episodes import EpisodeStore
    from .spec_store import SpecStore

    return [*SpecStore(spec_dir, project).items(), *EpisodeStore(spec_dir).items(project)]
