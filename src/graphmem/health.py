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


def drift_row(store: str, files: int, held: int, missing: int, extra: int,
              queued: int | None = None) -> dict[str, str]:
    """The ``drift`` line of a derived store (the index, the graph) against the files: how many
    items each holds, how many are missing (``queued``: of those, waiting in the outbox) and how
    many the files no longer hold."""
    detail = f"{files} item(s) in files, {held} in the {store}"
    if missing:
        detail += f", {missing} missing" + (f" ({queued} queued)" if queued is not None else "")
    if extra:
        detail += f", {extra} no longer in files"
    if missing or extra:
        detail += " (`graphmem doctor --fix`)"
    return row("drift", "ok" if missing == extra == 0 else "warn", detail)


def bad_lines_row(path: object, count: int, bad: list[tuple[int, str]]) -> dict[str, str]:
    """The line of an append-only JSON Lines file (``anchors.jsonl``, ``validity.jsonl``) whose
    malformed lines readers skip: how many, and where the first ones are."""
    name = getattr(path, "name", str(path))
    if not count:
        return row(name, "ok", "every line readable")
    where = "; ".join(f"line {n}: {text[:60]!r}" for n, text in bad[:3])
    return row(name, "warn", f"{path}: {count} malformed line(s) skipped by every reader ({where}"
               f"{'; ...' if count > 3 else ''}); fix or delete them by hand")
