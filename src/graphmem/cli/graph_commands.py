"""``graphmem db start|stop|status`` and ``graphmem sync``: the graph server and the outbox."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from graphmem.cli.app import _console, _emit, _memory, _spec_args, command, status


def _db_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("action", choices=("start", "stop", "status"),
                   help="start the embedded FalkorDB (and use it: with the default graph `auto`, "
                   "writes and searches use it from then on; it stops after GRAPHMEM_GRAPH_IDLE "
                   "seconds without a query and is started again when needed), stop it (and stop "
                   "using it), or show its state")
    p.add_argument("--json", action="store_true", help="machine-readable JSON output")


def _cmd_db(args: argparse.Namespace) -> int:
    from graphmem.errors import ConfigError
    from graphmem.graph import server
    from graphmem.settings import Settings

    settings = Settings.load()
    external = server.external_endpoint(settings) is not None
    if args.action == "start":
        if external:
            server.ensure_endpoint(settings)  # checks that it answers; nothing is started
        else:
            embedded = server.EmbeddedServer(settings)
            embedded.ensure()
            embedded.want(True)  # `auto` uses it now, and restarts it after an idle stop
    elif args.action == "stop":
        if external:
            raise ConfigError("the graph server is external (GRAPHMEM_FALKORDB_URL or "
                              "GRAPHITI_FALKORDB_HOST); graphmem does not stop it")
        embedded = server.EmbeddedServer(settings)
        embedded.want(False)  # first: no process restarts it once it is stopped
        stopped = embedded.stop()
        if not args.json:
            print("FalkorDB stopped." if stopped else "FalkorDB was not running.")
            return 0
    data = server.status(settings)

    def show(d: dict) -> None:
        c = _console()
        c.print(f"FalkorDB: {'[green]running[/]' if d['running'] else '[red]not running[/]'}"
                + (" (external)" if d.get("external") else ""))
        for key in ("pid", "endpoint", "socket", "data_dir", "data_bytes", "redis_version",
                    "falkordb_version", "error"):
            if d.get(key) is not None:
                c.print(f"  {key}: {d[key]}", markup=False, highlight=False)
        from graphmem.graph.diagnostics import lifecycle

        if not d.get("external"):
            c.print(f"  lifecycle: {lifecycle(d, settings)}", markup=False, highlight=False)
        if d.get("graphs") is not None:
            c.print(f"  graphs ({len(d['graphs'])}): {', '.join(d['graphs'])}", markup=False,
                    highlight=False)
    return _emit(args, data, show)


command("db", "start, stop or show the embedded FalkorDB graph server")(_cmd_db)(_db_args)


def _outbox_specs(project_dir: Path | None) -> list[tuple[Path, Path]]:
    """(spec, project) of every spec folder with a queued graph outbox: in ``project_dir``, or in
    every project the home's index has registered (the projects ``reindex`` and writes know)."""
    from graphmem.files.outbox import OUTBOX_NAME
    from graphmem.index.db import db_path
    from graphmem.files.walk import spec_folders
    from graphmem.index.local_index import LocalIndex
    from graphmem.settings import Settings

    if project_dir is not None:
        projects = [project_dir.resolve()]
    else:
        home = Settings.load().home
        if not db_path(home).exists():  # nothing written in this home yet: nothing queued
            return []
        index = LocalIndex(home)
        try:
            projects = [Path(p["root"]) for p in index.projects() if p["root"]]
        finally:
            index.close()
    return [(spec, project) for project in projects if project.is_dir()
            for spec in spec_folders(project) if (spec / "memory" / OUTBOX_NAME).exists()]


def _sync_all(args: argparse.Namespace) -> dict:
    """Replay every queued outbox of the home (or of ``--project-dir``)."""
    from graphmem.facade.memory import Memory
    from graphmem.models import check_folders

    check_folders(project=args.project_dir)
    specs = []
    with status("replaying graph outboxes"):
        for spec, project in _outbox_specs(args.project_dir):
            with Memory(spec, project) as m:
                specs.append(dict(m.sync(), spec_dir=str(spec)))
    return {"specs": specs, "replayed": sum(s["replayed"] for s in specs),
            "remaining": sum(s["remaining"] for s in specs),
            "graph": "; ".join(sorted({s["graph"] for s in specs})) or "nothing queued"}


def _cmd_sync(args: argparse.Namespace) -> int:
    if args.spec_dir is None:
        data = _sync_all(args)
    else:
        with _memory(args) as m, status("replaying the graph outbox"):
            data = m.sync()

    def show(d: dict) -> None:
        for s in d.get("specs", []):
            print(f"{s['spec_dir']}: replayed {s['replayed']} item(s); {s['remaining']} still "
                  f"queued (graph: {s['graph']})")
        print(f"graph: {d['graph']}; replayed {d['replayed']} item(s); "
              f"{d['remaining']} still queued")
        if d.get("pulled"):
            print(f"from teammates: took in {d['pulled']['items']} item(s), dropped "
                  f"{d['pulled']['deleted']} deleted")
    _emit(args, data, show)
    broken = sorted({s["graph"] for s in data.get("specs", [data])
                     if s["graph"].startswith(("unavailable", "failed"))})
    for why in broken:  # exit 0 only when everything was synced
        print(f"graphmem: sync did not finish: graph {why}", file=sys.stderr)
    return 0 if data["remaining"] == 0 and not broken else 1


def _sync_args(p: argparse.ArgumentParser) -> None:
    _spec_args(p, required=False)


command("sync", "replay the graph outbox of a spec, of --project-dir, or (neither given) of "
        "every project in the home (writes queued while the graph was down)")(
    _cmd_sync)(_sync_args)
