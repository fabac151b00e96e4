"""``graphmem doctor``: one report of what is healthy and what is not, in plain words."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from .health import row  # one report line (subsystems import it from graphmem.health)

# Each check appends rows to a section. Other modules register theirs here (providers, graph...).
CHECKS: list[Callable[[dict[str, list[dict]], Any, "DoctorContext"], None]] = []


class DoctorContext:
    """What a check may look at."""

    def __init__(self, spec_dir: Path | None, project_dir: Path | None, check: bool):
        self.spec_dir = spec_dir
        self.project_dir = project_dir
        self.check = check


def _files(sections: dict, settings: Any, ctx: DoctorContext) -> None:
    rows = sections.setdefault("files", [])
    if ctx.spec_dir is None:
        rows.append(row("spec", "ok", "no --spec-dir given; file checks skipped"))
        return
    from .errors import StorageError
    from .files import SpecStore
    from .files.safe import real_dir

    store = SpecStore(ctx.spec_dir, ctx.project_dir)
    try:
        present = real_dir(store.memory_dir)
    except StorageError as exc:  # a link in its place (never followed) or not a folder
        rows.append(row("memory folder", "error", str(exc)))
        return
    if not present:
        rows.append(row("memory folder", "warn", f"{store.memory_dir} does not exist yet"))
        return
    rows.append(row("memory folder", "ok", str(store.memory_dir)))
    summary = (f"{len(store.load_all_insights())} sessions, {len(store.load_codebase_map())} files, "
               f"{len(store.load_bullets('pattern'))} patterns, {len(store.load_bullets('gotcha'))} gotchas")
    rows.append(row("contents", "ok", summary))
    corrupt = store.corrupt_files()
    if corrupt:
        for path in corrupt:
            rows.append(row("corrupt file", "warn", f"{path} (moved aside; inspect or delete it)"))
    else:
        rows.append(row("corrupt files", "ok", "none"))
    stray = sorted(store.memory_dir.rglob(".*.tmp"))
    if stray:
        rows.append(row("temp files", "warn", f"{len(stray)} left by interrupted writes: "
                        + ", ".join(p.name for p in stray[:5])))


CHECKS.append(_files)


def _providers(sections: dict, settings: Any, ctx: DoctorContext) -> None:
    """Configured providers, masked keys, validate() problems (``graphmem.providers.doctor_check``)."""
    from .providers.doctor_check import check

    sections.setdefault("providers", []).extend(r.as_dict() for r in check(settings, ctx.check))


CHECKS.append(_providers)


def run_doctor(spec_dir: Path | None, project_dir: Path | None, check: bool = False) -> dict:
    """Run every registered check and return ``{"sections": {...}, "errors": n, "warnings": n}``."""
    from .settings import Settings

    sections: dict[str, list[dict]] = {}
    try:
        settings = Settings.load()
    except Exception as exc:  # a broken configuration is itself the finding
        sections["settings"] = [row("settings", "error", str(exc))]
        settings = None
    else:
        sections["settings"] = [row("home", "ok", str(settings.home)),
                                row("graph", "ok", settings.graph.mode),
                                row("redaction", "ok" if settings.redact else "warn",
                                    "on" if settings.redact else "off")]
    ctx = DoctorContext(spec_dir, project_dir, check)
    for chk in CHECKS:
        if settings is None and chk is not _files:
            continue
        try:
            chk(sections, settings, ctx)
        except Exception as exc:
            sections.setdefault("doctor", []).append(row(getattr(chk, "__name__", "check"), "error",
                                                         f"check failed: {exc}"))
    flat = [r for rows in sections.values() for r in rows]
    return {"sections": sections, "errors": sum(r["status"] == "error" for r in flat),
            "warnings": sum(r["status"] == "warn" for r in flat)}


def _index(sections: dict, settings: Any, ctx: DoctorContext) -> None:
    """Local index health, journal and drift (``graphmem.repair.doctor_check``)."""
    from .repair import doctor_check

    doctor_check(sections, settings, ctx)


CHECKS.append(_index)


def _graph(sections: dict, settings: Any, ctx: DoctorContext) -> None:
    """Graph server health, outbox size and drift (``graphmem.graph.health``)."""
    from .graph.health import check

    check(sections, settings, ctx)


CHECKS.append(_graph)


def _search_server(sections: dict, settings: Any, ctx: DoctorContext) -> None:
    """The warm search server of these settings (``graphmem.search_server.health``)."""
    from .search_server import health

    health(sections.setdefault("search server", []))


CHECKS.append(_search_server)
