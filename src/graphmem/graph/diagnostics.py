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
