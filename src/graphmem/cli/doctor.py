"""``graphmem doctor``: one report of what is healthy and what is not, in plain words.

Each subsystem describes its own health as ``graphmem.health`` rows; this module alone decides
which rows a report holds and gathers what they describe (the one place that opens a
``Memory`` for them). ``CHECKS`` lists the sections, in report order.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from graphmem.health import drift_row, row


class DoctorContext:
    """What a check may look at."""

    def __init__(self, spec_dir: Path | None, project_dir: Path | None, check: bool):
        self.spec_dir = spec_dir
        self.project_dir = project_dir
        self.check = check


def _files(sections: dict, settings: Any, ctx: DoctorContext) -> None:
    """The spec's memory folder: present, its contents, corrupt and stray temporary files."""
    rows = sections.setdefault("files", [])
    if ctx.spec_dir is None:
        rows.append(row("spec", "ok", "no --spec-dir given; file checks skipped"))
        return
    from graphmem.errors import StorageError
    from graphmem.files import SpecStore
    from graphmem.files.safe import real_dir

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
               f"{len(store.notes('pattern'))} patterns, {len(store.notes('gotcha'))} gotchas")
    rows.append(row("contents", "ok", summary))
    corrupt = store.corrupt_files()
    if corrupt:
        for path in corrupt:
            rows.append(row("corrupt file", "warn", f"{path} (moved aside; inspect or delete it)"))
    else:
        rows.append(row("corrupt files", "ok", "none"))
    _bad_lines(rows, ctx.spec_dir)
    kept = store.kept_as_written()
    if kept:
        rows.append(row("kept as written", "warn", f"{len(kept)} session file(s) hold what "
                        "graphmem cannot interpret; kept as the agent wrote them and searchable "
                        "as text: " + "; ".join(f"{p.name} ({why})" for p, why in kept[:5])))
    stray = sorted(store.memory_dir.rglob(".*.tmp"))
    if stray:
        rows.append(row("temp files", "warn", f"{len(stray)} left by interrupted writes: "
                        + ", ".join(p.name for p in stray[:5])))


def _bad_lines(rows: list, spec_dir: Path) -> None:
    """The malformed lines of the spec's anchors and validity logs (readers skip them)."""
    from ..code.anchor_file import book
    from ..errors import StorageError
    from ..files.validity_log import validity_log
    from ..health import bad_lines_row

    for read in (book, validity_log):
        try:
            got = read(spec_dir)
        except StorageError as exc:  # a link in the file's place
            rows.append(row("append-only log", "error", str(exc)))
            continue
        if got.ino is not None:
            rows.append(bad_lines_row(got.path, got.bad_count, got.bad))


def _project(sections: dict, settings: Any, ctx: DoctorContext) -> None:
    """The project the folders belong to, the key that names it, and a broken worktree link."""
    if ctx.spec_dir is None and ctx.project_dir is None:
        return
    from graphmem.identity import broken_link, resolve_project

    project = resolve_project(ctx.spec_dir, ctx.project_dir, project_id=settings.project_id)
    rows = sections.setdefault("project", [])
    missing = broken_link(project.root)
    origin = ORIGINS[project.origin] if missing is None or project.former_key else \
        "missing folder .git points to"
    rows.append(row("key", "ok", f"{project.key} (from the {origin}); root {project.root}"))
    if missing is not None:
        rows.append(row("git link", "warn", _broken_link_advice(project, missing)))


ORIGINS = {"setting": "GRAPHMEM_PROJECT_ID setting", "file": ".graphmem/project.toml id",
           "remote": "origin remote", "worktree": "repository's main work tree path",
           "path": "folder's path (no repository, no id file)"}


def _broken_link_advice(project: Any, missing: Path) -> str:
    """What a ``.git`` file pointing to a missing folder means, and how to fix it."""
    from graphmem.identity import pruned_repository

    root = project.root
    said = f"{root}/.git points to {missing}, which does not exist: git sees no repository here " \
           "(freshness has no history)"
    repo = pruned_repository(missing)
    if repo is not None:  # keyed by its repository still (``identity.git_common_dir``)
        main = Path(repo).parent if Path(repo).name == ".git" else Path(repo)
        return (f"{said}. Its repository ({main}) no longer lists this worktree: make a new "
                f"one with `git -C {main} worktree add <folder> <branch>` and move your changes "
                f"there, or delete {root}/.git to use this folder without git. Its memories keep "
                f"the repository's key ({project.key}).")
    return (f"{said}, and the project is keyed by that missing path ({project.key}), not by its "
            "repository. Its repository moved: run `git -C <repository's new folder> worktree "
            f"repair {root}`, then `graphmem reindex --project-dir {root}`: its memories (in the "
            "spec folders' files) are indexed under the repository's key.")


def _providers(sections: dict, settings: Any, ctx: DoctorContext) -> None:
    """Configured providers, masked keys, validate() problems (``graphmem.providers.doctor_check``)."""
    from graphmem.providers.doctor_check import check

    sections.setdefault("providers", []).extend(r.as_dict() for r in check(settings, ctx.check))


def _index(sections: dict, settings: Any, ctx: DoctorContext) -> None:
    """The local index: database health, copies moved aside, journal entries waiting, and drift
    (files vs index) for the given spec or project."""
    from graphmem.index import db
    from graphmem.index.journal import Journal

    rows = sections.setdefault("index", [])
    home = Path(settings.home)
    fix = "`graphmem doctor --fix`"
    damage = db.check(home)
    if damage is not None:
        rows.append(row("database", "error", f"{db.db_path(home)} is damaged ({damage}); the next "
                        f"write or search moves it aside and rebuilds it from the files, or {fix}"))
    elif not db.db_path(home).exists():
        rows.append(row("database", "ok", f"{db.db_path(home)} not created yet"))
    for copy in db.corrupt_copies(home):
        rows.append(row("damaged copy", "warn", f"{copy} was moved aside and the index rebuilt from "
                        "the files; delete it once you no longer need it"))
    pending = len(Journal(home).names())
    rows.append(row("journal", "ok" if pending == 0 else "warn",
                    "no index write waiting" if pending == 0 else
                    f"{pending} write(s) not in the index yet; the next graphmem command replays "
                    f"them from the files, or {fix}"))
    if damage is not None or not db.db_path(home).exists():
        return
    from graphmem.index.local_index import LocalIndex

    index = LocalIndex(home)
    try:
        st = index.stats()
        rows.insert(0, row("database", "ok", f"{db.db_path(home)}: {st['items']} item(s), "
                           f"{st['vectors']} vector(s), {st['projects']} project(s)"))
        from graphmem.identity import resolve_project
        from graphmem.facade.repair import index_drift, project_of

        project = spec = None
        if ctx.spec_dir is not None:
            project = resolve_project(ctx.spec_dir, ctx.project_dir, project_id=settings.project_id)
            spec = str(Path(ctx.spec_dir).resolve())
        elif ctx.project_dir is not None:
            project = project_of(settings, ctx.project_dir)
        if project is None:
            return
        d = index_drift(index, project, spec)
        rows.append(drift_row("index", d["files"], d["index"], len(d["missing"]), len(d["extra"])))
    finally:
        index.close()


def _graph(sections: dict, settings: Any, ctx: DoctorContext) -> None:
    """The graph server, its client, the spec's outbox, and (server running) the embedder its
    graph records and the drift between the files and the graph (``graphmem.graph.diagnostics``)."""
    from graphmem.graph import server
    from graphmem.graph import diagnostics as health

    rows = sections.setdefault("graph", [])
    mode = settings.graph.mode
    running = False
    if mode == "off":
        rows.append(row("graph", "ok", "off (set GRAPHMEM_GRAPH=on or auto to enable)"))
    else:
        st = server.status(settings)
        running = st["running"]
        rows.append(health.server_row(st))
        if st["external"]:
            from graphmem.facade.team import author, host, writer

            rows.append(row("team", "ok", f"shared server: items written here record "
                            f"{author(settings, ctx.project_dir)} on {host(settings)} "
                            "(GRAPHMEM_AUTHOR, GRAPHMEM_HOST), written by this home as "
                            f"{writer(settings)}; searches take in teammates' writes"))
        rows.append(health.client_row())
    if ctx.spec_dir is None:
        return
    from graphmem.files.outbox import Outbox
    from graphmem.files.spec_store import SpecStore

    rows.append(health.outbox_row(Outbox(SpecStore(ctx.spec_dir, ctx.project_dir).memory_dir).size()))
    if mode == "off" or not running:
        return
    from graphmem._sync import run
    from graphmem.facade.memory import Memory

    with Memory(ctx.spec_dir, ctx.project_dir, settings=settings) as mem:
        d = mem.drift()
        try:
            got = run(mem.derived.graph_embedder(mem.project.key))
            graph = run(mem.derived.graph_store())
            ours = (graph.embedder.name, int(graph.embedder.dimension))
        except Exception as exc:  # reported, never fatal to the rest of the report
            rows.append(row("embedder", "warn", f"not checked: {exc}"))
        else:
            mismatch = graph.mismatch(mem.project.key, got) if got else None
            rows.append(health.embedder_row(mem.project.key, got, ours, mismatch))
    if d["graph"] == "on":
        rows.append(drift_row("graph", d["files"], d["in_graph"], len(d["missing"]),
                              len(d["extra"]), d["queued"]))


def _search_server(sections: dict, settings: Any, ctx: DoctorContext) -> None:
    """The warm search server of these settings (``graphmem.cli.search_server.health``)."""
    from graphmem.cli.search_server import health

    health(sections.setdefault("search server", []))


# The report's sections, in order; each check appends rows to its section.
CHECKS: tuple[Callable[[dict[str, list[dict]], Any, DoctorContext], None], ...] = (
    _files, _project, _providers, _index, _graph, _search_server)


def run_doctor(spec_dir: Path | None, project_dir: Path | None, check: bool = False) -> dict:
    """Run every check in ``CHECKS``; returns ``{"sections": {...}, "errors": n, "warnings": n}``.
    With a broken configuration only the file checks run (the rest need settings)."""
    from graphmem.settings import Settings

    sections: dict[str, list[dict]] = {}
    settings: Settings | None
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


def run_fix(spec_dir: Path | None, project_dir: Path | None) -> dict[str, Any]:
    """``graphmem doctor --fix``: heal a damaged index, replay the journal, make the index match
    the files and the graph match the files (outbox first), remove stale temp files; for a spec,
    a project, or (neither given) every project the index knows."""
    from graphmem import _sync
    from graphmem.errors import NotFoundError
    from graphmem.files.walk import spec_folders
    from graphmem.facade.memory import AsyncMemory
    from graphmem.facade.repair import fix_graph, fix_index, project_of, remove_stray_temps
    from graphmem.settings import Settings

    if spec_dir is not None and not Path(spec_dir).is_dir():
        raise NotFoundError(f"spec folder not found: {spec_dir}")
    if project_dir is not None and not Path(project_dir).is_dir():
        raise NotFoundError(f"project folder not found: {project_dir}")
    settings = Settings.load()

    async def run() -> dict[str, Any]:
        out: dict[str, Any] = {"index": [], "graph": [], "temp_files_removed": []}
        if spec_dir is not None:
            first = AsyncMemory(spec_dir, project_dir, settings=settings)
            targets = [(first.project, [first])]
        else:
            if project_dir is not None:
                roots = [str(Path(project_dir).resolve())]
            else:  # every project checked out here that the registry knows
                roots = [p["root"] for p in AsyncMemory(None, ".", settings=settings)
                         .derived.local.index.projects() if p["root"] and not p["legacy"]]
            projects = [project_of(settings, r) for r in roots if Path(r).is_dir()]
            targets = [(p, [AsyncMemory(s, p.root, settings=settings)
                            for s in spec_folders(p.root)]) for p in projects]
        for project, mems in targets:
            one = mems[0] if spec_dir is not None else None
            owner = one or AsyncMemory(None, project.root, settings=settings)
            try:
                counts = await fix_index(owner.derived.local, project,
                                         str(one.spec_dir) if one else None)
                out["index"].append(dict(counts, project=str(project.root), key=project.key,
                                         spec=str(one.spec_dir) if one else None))
                for mem in mems:
                    out["graph"].append(dict(await fix_graph(mem), spec=str(mem.spec_dir)))
                    out["temp_files_removed"] += [str(p) for p in
                                                  remove_stray_temps(mem.files.memory_dir)]
            finally:
                for mem in {id(m): m for m in [owner, *mems]}.values():
                    await mem.aclose()
        return out

    return _sync.run(run())
