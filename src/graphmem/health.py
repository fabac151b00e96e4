"""One line of a health report: what every subsystem returns and only ``doctor`` assembles.

A leaf module (no graphmem imports), so the index, the graph and the providers can describe their
health without importing the doctor command that renders it.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Literal

Status = Literal["ok", "warn", "error"]


@dataclass(frozen=True)
class Row:
    """A checked item, its status and what was found, in plain words."""

    name: str
    status: Status
    detail: str

    def as_dict(self) -> dict[str, str]:
        """The row as the doctor's JSON report shows it."""
        return asdict(self)


def row(name: str, status: Status, detail: str) -> dict[str, str]:
    """One report line as the doctor's JSON shows it (``Row(...).as_dict()``)."""
    return Row(name, status, detail).as_dict()
