"""Where the memory folders of a project are: the names that mark a spec's ``memory/`` folder,
and the one walk that finds them (``reindex``, project searches, consolidation, ``sync``)."""

from __future__ import annotations

import os
from pathlib import Path

# Folders never searched for memory: tools' caches, environments and build output.
SKIP_DIRS = frozenset({".git", "node_modules", ".venv", "venv", "__pycache__", ".tox", ".mypy_cache",
                       "dist", "build", ".pytest_cache"})
REFERENCE_LAYOUT = ("codebase_map.json", "patterns.md", "gotchas.md", "session_insights")
EPISODES = ("episodes",)  # episodic sessions (``files/episodes.py``)


def spec_folders(project_dir: Path, marks: tuple[str, ...] = REFERENCE_LAYOUT) -> list[Path]:
    """Every spec folder under ``project_dir``: the parent of a ``memory/`` folder holding one of
    ``marks`` (the reference layout by default; ``EPISODES`` for episodic sessions), in sorted
    walk order; nothing below a spec folder is searched further."""
    found = []
    for root, dirs, _files in os.walk(project_dir):
        dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS and not d.startswith(".graphmem"))
        if os.path.basename(root) == "memory" and any(
                os.path.exists(os.path.join(root, name)) for name in marks):
            found.append(Path(root).parent)
            dirs[:] = []
    return found
