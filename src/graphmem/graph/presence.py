"""Whether the graph takes part in a write or a search now: ``graph.mode`` resolved.

- ``on``: always; the embedded FalkorDB is started on first use.
- ``off``: never.
- ``auto`` (the default): when a FalkorDB is there to use and nobody has to start one unasked:
  a configured server (``GRAPHMEM_FALKORDB_URL``, ``GRAPHITI_FALKORDB_HOST``) that answered
  this process's one probe (a failed probe is tried again after ``graph.retry_after`` seconds;
  while the home's breaker is open the server is not probed at all); else this home's embedded
  server, once ``graphmem db start`` turned it on (``<home>/falkordb/wanted``: restarted on
  demand after an idle stop, until ``graphmem db stop``), or while one runs
  (``<home>/falkordb/server.json`` naming a live redis-server).

With no server configured and none started, ``in_use`` costs one or two ``stat`` calls (no
socket, no import of the graph's client): that is what a write and a search pay by default.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from ..settings import Settings

WANTED = "wanted"  # <home>/falkordb/wanted: `graphmem db start` turned the embedded server on
STATE = "server.json"  # written by ``server.EmbeddedServer`` while its server runs

_probes: dict[str, tuple[bool, float]] = {}  # external endpoint -> (answered, when probed)


def root(settings: Settings) -> Path:
    """The embedded server's folder in the home."""
    return Path(settings.home) / "falkordb"


def wanted(settings: Settings) -> bool:
    """Whether ``graphmem db start`` turned this home's embedded server on (and no ``db stop``
    since)."""
    return os.path.exists(root(settings) / WANTED)


def in_use(settings: Settings) -> bool:
    """Whether writes and searches use the graph now (see the module's docstring)."""
    mode = settings.graph.mode
    if mode != "auto":
        return mode == "on"
    g = settings.graph
    if g.falkordb_url or g.falkordb_host or g.falkordb_port:
        return _external_answers(settings)
    folder = root(settings)
    if os.path.exists(folder / WANTED):
        return True
    if not os.path.exists(folder / STATE):
        return False
    from .server import EmbeddedServer

    return EmbeddedServer(settings).live_pid() is not None


def may_start(settings: Settings) -> bool:
    """Whether a process may start the embedded server on its own: the graph is ``on``, or
    ``auto`` after ``graphmem db start``."""
    mode = settings.graph.mode
    return mode == "on" or (mode == "auto" and wanted(settings))


def _external_answers(settings: Settings) -> bool:
    """The configured server's probe: once per process, again ``retry_after`` seconds after a
    failed one; never while the home's breaker is open (another process found it hung)."""
    from .breaker import Breaker
    from .server import external_endpoint, is_hung, ping

    ep = external_endpoint(settings)
    assert ep is not None
    key = f"{ep.describe()}|{settings.home}"
    seen = _probes.get(key)
    now = time.monotonic()
    if seen is not None and (seen[0] or now - seen[1] < settings.graph.retry_after):
        return seen[0]
    breaker = Breaker(settings.home, settings.graph.retry_after)
    if breaker.open_reason() is not None:
        return False
    reason = ping(ep, timeout=settings.graph.connect_timeout)
    if is_hung(reason):
        breaker.trip(str(reason))
    _probes[key] = (reason is None, now)
    return reason is None


def forget_probes() -> None:
    """Probe the configured servers again at the next check (tests, a changed configuration)."""
    _probes.clear()
