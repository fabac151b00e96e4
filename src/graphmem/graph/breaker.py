"""The graph's circuit breaker, shared by every process of one ``GRAPHMEM_HOME``.

    <home>/graph-breaker.json   {"until": <epoch seconds>, "reason": "..."}

A graph server that is there but does not reply (stopped with SIGSTOP, hung, swamped) costs each
caller a deadline (``graph.connect_timeout``) to find out. The first caller that pays it trips
the breaker: until ``until`` (``graph.retry_after`` seconds later), every process skips the graph
at once: writes go to the outbox, searches are answered by the local index alone. The next
attempt after the cool-down (or a forced one: ``graphmem sync``) tries the server again, and a
successful connection resets the breaker. A server that is simply down is not a reason to trip
it: refusing a connection costs nothing.
"""

from __future__ import annotations

import json
import logging
import os
import time
from pathlib import Path

log = logging.getLogger("graphmem.graph")

NAME = "graph-breaker.json"


class Breaker:
    """Read, trip and reset the home's breaker file (a missing or unreadable file is closed)."""

    def __init__(self, home: Path, cool_down: float):
        self.path = Path(home) / NAME
        self.cool_down = cool_down

    def open_reason(self) -> str | None:
        """Why the graph is skipped right now, or None when the breaker is closed."""
        try:
            data = json.loads(self.path.read_text(encoding="utf-8"))
            left = float(data["until"]) - time.time()
        except (OSError, ValueError, KeyError, TypeError):
            return None
        if left <= 0:
            return None
        return f"{data.get('reason') or 'graph failed'}; graph skipped for {left:.0f}s more"

    def trip(self, reason: str) -> None:
        """Skip the graph in every process of this home for the cool-down."""
        from ..files.atomic import atomic_write_text
        from ..files.safe import private_dir

        try:
            private_dir(self.path.parent)
            atomic_write_text(self.path, json.dumps(
                {"until": time.time() + self.cool_down, "reason": reason.splitlines()[0][:300],
                 "pid": os.getpid()}))
        except Exception as exc:  # the breaker is an optimisation; the in-process pause remains
            log.debug("graph breaker not written: %s", exc)
        else:
            # debug: the caller's own notice (search fell back, write queued) is
            # the one line a user sees
            log.debug("graph: %s; writes go to the outbox and searches use the local index for "
                        "%.0fs (`graphmem sync` retries at once)", reason.splitlines()[0][:200],
                        self.cool_down)

    def reset(self) -> None:
        """The server answers again."""
        try:
            self.path.unlink()
        except FileNotFoundError:
            pass
        except OSError as exc:
            log.debug("graph breaker not reset: %s", exc)
