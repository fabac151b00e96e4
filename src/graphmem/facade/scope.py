"""Where one ``Memory`` reads and writes: its project, and its spec folder when it has one.

A ``Memory`` opened with only a project folder may search, build contexts and reindex, but
reads and writes no spec file: ``Scope.require_spec`` is the one place that refuses it.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

from graphmem.errors import ValidationError

if TYPE_CHECKING:
    from graphmem.files.spec_store import SpecStore
    from graphmem.identity import Project


@dataclass(frozen=True)
class Scope:
    """A project and (optionally) one spec folder inside it, resolved."""

    project: "Project"
    spec_dir: Path | None = None

    @property
    def root(self) -> Path:
        """The project's root on this machine."""
        return self.project.root

    @cached_property
    def spec_key(self) -> str | None:
        """How items name the spec: its folder relative to the project root (None without one)."""
        return None if self.spec_dir is None else self.project.rel(self.spec_dir)

    @property
    def memory_dir(self) -> Path | None:
        """The spec's ``memory/`` folder (None without a spec)."""
        return None if self.spec_dir is None else self.spec_dir / "memory"

    def require_spec(self, what: str = "this operation") -> Path:
        """The spec folder; a project-only scope raises ``ValidationError`` naming ``spec_dir``."""
        if self.spec_dir is None:
            raise ValidationError(f"{what} needs a spec folder; this Memory was opened with only "
                                  "a project folder", field="spec_dir")
        return self.spec_dir

    @cached_property
    def files(self) -> "SpecStore":
        """The spec's file store (the truth)."""
        from graphmem.files.spec_store import SpecStore

        return SpecStore(self.require_spec(), self.project)
