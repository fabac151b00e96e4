"""Where one ``Memory`` reads and writes: its project, and the spec folder it writes.

A ``Memory`` opened with a spec folder reads and writes that folder. Opened with only a project
folder it is *project-wide*: its writes go to the project's own memory folder,
``<project>/.graphmem/memory/`` (the reference layout, committable with the code), and its reads
(search, context, about, consolidate) cover every spec folder of the project, that one included.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from graphmem.files.spec_store import SpecStore
    from graphmem.identity import Project

PROJECT_MEMORY = ".graphmem"  # <project>/.graphmem/memory/: the project's own memory folder


def project_memory_dir(root: str | Path) -> Path:
    """The folder that holds a project's own ``memory/`` (its spec folder, without a spec)."""
    return Path(root) / PROJECT_MEMORY


@dataclass(frozen=True)
class Scope:
    """A project and the spec folder it writes (the project's own one when none was given)."""

    project: "Project"
    given_spec: Path | None = None
    sync: bool = True  # fsync the spec's file writes (``files.fsync``)

    @property
    def root(self) -> Path:
        """The project's root on this machine."""
        return self.project.root

    @property
    def project_wide(self) -> bool:
        """Opened with only a project folder: reads cover every spec folder of the project."""
        return self.given_spec is None

    @cached_property
    def spec_dir(self) -> Path:
        """The spec folder this scope writes: the one given, else ``<project>/.graphmem``."""
        return self.given_spec if self.given_spec is not None else project_memory_dir(self.root)

    @cached_property
    def spec_key(self) -> str:
        """How items name the spec: its folder relative to the project root."""
        return self.project.rel(self.spec_dir)

    @property
    def memory_dir(self) -> Path:
        """The spec's ``memory/`` folder."""
        return self.spec_dir / "memory"

    def require_spec(self, what: str = "this operation") -> Path:
        """The spec folder this scope writes (the project's own one for a project-wide scope)."""
        return self.spec_dir

    @cached_property
    def files(self) -> "SpecStore":
        """The spec's file store (the truth)."""
        from graphmem.files.spec_store import SpecStore

        return SpecStore(self.spec_dir, self.project, self.sync)
