"""The graph's lines in ``graphmem doctor`` (``graphmem.health`` rows): the server, the client
library, the outbox and the embedder a graph records. ``doctor`` decides which to show and
gathers what they describe; nothing here opens a ``Memory``."""

from __future__ import annotations

from typing import Any

from ..health import row


def server_row(status: dict[str, Any]) -> dict:
    """The server line, from ``server.status``."""
    if status.get("external"):
        running = status["running"]
        return row("server", "ok" if running else "error", f"external {status['endpoint']}: "
                   + ("answering" if running else status.get("error", "not answering")))
    if not status["running"]:
        return row("server", "warn",
                   "embedded server not running (starts on first use, or `graphmem db start`)")
    return row("server", "ok", f"embedded pid {status['pid']}, {status['socket']}, FalkorDB "
               f"{status.get('falkordb_version')}, {len(status.get('graphs', []))} graph(s), "
               f"{status['data_bytes']} bytes")


def _clock(t: Any) -> str:
    import time

    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(float(t)))


def lifecycle(status: dict[str, Any], settings: Any) -> str:
    """Whether the embedded server runs, whether writes and searches use it, and when it stops
    (``server.EmbeddedServer.status``; the rules are in ``presence.py`` and ``idle_stop.py``)."""
    mode, wanted = settings.graph.mode, status.get("wanted")
    if mode == "on":
        use = "used (graph on; started on first use)"
    elif mode == "off":
        use = "not used (graph off)"
    elif wanted:
        use = "used (graph auto, `graphmem db start`; started again when needed until `graphmem db stop`)"
    else:
        use = ("used while it runs (graph auto)" if status.get("running")
               else "not used: graph auto and no server (`graphmem db start` to use one)")
    if status.get("running"):
        idle = status.get("idle_stop")
        if not idle or not idle.get("watcher_alive"):
            return f"{use}; no idle watcher: runs until `graphmem db stop`"
        return (f"{use}; stops after {idle['after']:g}s without a graph query: at "
                f"{_clock(idle['stops_at'])} unless queried (watcher pid {idle['watcher']})")
    last = status.get("last_stop")
    if isinstance(last, dict) and last.get("at"):
        why = "idle" if last.get("reason") == "idle" else "when asked"
        return f"{use}; stopped {why} at {_clock(last['at'])}"
    return use


def lifecycle_row(status: dict[str, Any], settings: Any) -> dict:
    """The embedded server's lifecycle line (``lifecycle``)."""
    return row("lifecycle", "ok", lifecycle(status, settings))


def client_row() -> dict:
    """Which reply parser the graph client runs: hiredis (C) or redis-py's own Python one, which
    makes graph searches slower (``bench/locomo.py --graph``)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        import redis.utils

        fast = bool(redis.utils.HIREDIS_AVAILABLE)
        detail = f"redis-py {version('redis')}, falkordb {version('falkordb')}"
    except (ImportError, PackageNotFoundError) as exc:
        return row("client", "error", f"the FalkorDB client is not installed: {exc}")
    if fast:
        return row("client", "ok", detail + ", replies parsed by hiredis")
    return row("client", "warn", detail + ": hiredis is missing, so every graph query's reply is "
               "parsed in Python and graph searches are slower (pip install hiredis)")


def outbox_row(queued: int) -> dict:
    """How many items of a spec wait in its outbox for the graph."""
    return row("outbox", "ok" if queued == 0 else "warn",
               "empty" if queued == 0 else f"{queued} item(s) waiting for the graph; run `graphmem sync`")


def embedder_row(project: str, got: tuple[str, int] | None, ours: tuple[str, int],
                 mismatch: Any = None) -> dict:
    """The embedder a project's graph records (``got``; None: no graph yet) against ours;
    ``mismatch``: the error that names both when they differ."""
    if got is None:
        return row("embedder", "ok", f"no graph yet for {project}; the first write records "
                   f"{ours[0]} ({ours[1]}-d)")
    if got == ours:
        return row("embedder", "ok", f"{got[0]} ({got[1]}-d), the same as here")
    return row("embedder", "error", str(mismatch))
