"""``graphmem db start|stop|status`` and ``graphmem sync``: the graph server and the outbox."""

from __future__ import annotations

import argparse

from .cli import _console, _emit, _memory, _spec_args, command


def _db_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("action", choices=("start", "stop", "status"),
                   help="start the embedded FalkorDB, stop it, or show its state")
    p.add_argument("--json", action="store_true", help="machine-readable JSON output")


def _db_status(settings) -> dict:
    from .graph import server

    ext = server.external_endpoint(settings)
    if ext is None:
        return server.EmbeddedServer(settings).status()
    reason = server.ping(ext)
    out = {"running": reason is None, "external": True, "endpoint": ext.describe()}
    if reason is None:
        out.update(server.server_facts(ext))
    else:
        out["error"] = reason
    return out


def _cmd_db(args: argparse.Namespace) -> int:
    from .errors import ConfigError
    from .graph import server
    from .settings import Settings

    settings = Settings.load()
    external = server.external_endpoint(settings) is not None
    if args.action == "start":
        if external:
            server.ensure_endpoint(settings)  # checks that it answers; nothing is started
        else:
            server.EmbeddedServer(settings).ensure()
    elif args.action == "stop":
        if external:
            raise ConfigError("the graph server is external (GRAPHMEM_FALKORDB_URL or "
                              "GRAPHITI_FALKORDB_HOST); graphmem does not stop it")
        stopped = server.EmbeddedServer(settings).stop()
        if not args.json:
            print("FalkorDB stopped." if stopped else "FalkorDB was not running.")
            return 0
    data = _db_status(settings)

    def show(d: dict) -> None:
        c = _console()
        c.print(f"FalkorDB: {'[green]running[/]' if d['running'] else '[red]not running[/]'}"
                + (" (external)" if d.get("external") else ""))
        for key in ("pid", "endpoint", "socket", "data_dir", "data_bytes", "redis_version",
                    "falkordb_version", "error"):
            if d.get(key) is not None:
                c.print(f"  {key}: {d[key]}", markup=False, highlight=False)
        if d.get("graphs") is not None:
            c.print(f"  graphs ({len(d['graphs'])}): {', '.join(d['graphs'])}", markup=False,
                    highlight=False)
    return _emit(args, data, show)


command("db", "start, stop or show the embedded FalkorDB graph server")(_cmd_db)(_db_args)


def _cmd_sync(args: argparse.Namespace) -> int:
    with _memory(args) as m:
        data = m.sync()

    def show(d: dict) -> None:
        print(f"graph: {d['graph']}; replayed {d['replayed']} item(s); "
              f"{d['remaining']} still queued")
    _emit(args, data, show)
    return 0 if data["remaining"] == 0 else 1


command("sync", "replay a spec's graph outbox (writes queued while the graph was down)")(
    _cmd_sync)(_spec_args)
