"""One async connection to a FalkorDB server: connect (starting the embedded one), query, reconnect.

Every graph query of a process goes through ``Connection.query``: one try per query (a failure
queues the write in the outbox instead of stalling), a lost connection reconnected at once and
the query retried once, a failed server paused for ``graph.retry_after`` and a hung one reported
to the home's circuit breaker (``breaker.py``). Importing this module does not import
graphiti_core.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import TYPE_CHECKING, Any, Callable

from ..errors import GraphError, ServerError
from ..settings import Settings
from graphmem.graph import schema

if TYPE_CHECKING:
    from .server import Endpoint

log = logging.getLogger("graphmem.graph")
# The client's pool holds 100 connections, and a search over every graph sends 2-3 queries per
# graph at once: past ~35 projects that raised MaxConnectionsError before this bound.
MAX_IN_FLIGHT = 32


def connection_error(exc: BaseException) -> bool:
    """Whether ``exc`` means the server is gone (as opposed to a query it refused)."""
    import redis

    return isinstance(exc, (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError,
                            OSError, asyncio.TimeoutError))


class Connection:
    """The async client of one FalkorDB server, shared by every graph on it."""

    def __init__(self, settings: Settings, on_drop: Callable[[], None] = lambda: None):
        from .breaker import Breaker

        self.settings = settings
        self.endpoint: Endpoint | None = None
        self.client: Any = None  # falkordb.asyncio.FalkorDB once connected
        self.last_error: str | None = None
        self.failed_at = float("-inf")  # monotonic time of the last failed connection
        self.breaker = Breaker(settings.home, settings.graph.retry_after)
        self._on_drop = on_drop  # what the owner forgets with the client (per-graph checks)
        self._down_until = 0.0
        self._lock = asyncio.Lock()
        self._last_ok = 0.0  # monotonic time of the last reply from the server
        self._slots = asyncio.Semaphore(MAX_IN_FLIGHT)

    @property
    def available(self) -> bool:
        """Connected, or allowed to try again (a failed server is retried after a pause; a hung
        one after the home's circuit breaker closes)."""
        if self.client is not None:
            return True
        return time.monotonic() >= self._down_until and self.breaker.open_reason() is None

    async def connect(self, force: bool = False, start: bool = True) -> None:
        """Reach the server (starting the embedded one if needed, unless not ``start`` or this
        process may not start it: ``presence.may_start``); raises ServerError."""
        async with self._lock:
            if self.client is not None:
                return
            if not force and time.monotonic() < self._down_until:
                raise ServerError(f"graph unavailable ({self.last_error}); retrying in "
                                  f"{self._down_until - time.monotonic():.0f}s")
            tripped = None if force else self.breaker.open_reason()
            if tripped is not None:  # another process found the server hung a moment ago
                self._mark_down(tripped)
                raise ServerError(f"graph unavailable ({tripped})")
            from graphmem.graph import presence

            start = start and presence.may_start(self.settings)
            try:
                ep = await asyncio.to_thread(self._reach, start)
            except ServerError as exc:
                self._mark_down(str(exc))
                raise
            except OSError as exc:  # e.g. the home is not writable
                self._mark_down(str(exc))
                raise ServerError(f"cannot start FalkorDB: {exc}") from None
            from falkordb.asyncio import FalkorDB
            from redis.asyncio.retry import Retry
            from redis.backoff import NoBackoff

            t = self.settings.graph.timeout
            opts = dict(socket_timeout=t, socket_connect_timeout=self.settings.graph.connect_timeout)
            if ep.url:
                client = FalkorDB.from_url(ep.url, **opts)
            else:
                client = FalkorDB(**ep.client_kwargs(), **opts)
            # set afterwards: falkordb's constructor copies these options into a sync client
            client.connection.set_retry(Retry(NoBackoff(), 0))
            self.client = client
            self.endpoint = ep
            self.last_error = None
            self._last_ok = time.monotonic()  # ensure_endpoint's ping just got its reply
            self.breaker.reset()

    def _reach(self, start: bool) -> "Endpoint":
        """``server.ensure_endpoint`` in a worker thread; a hung server trips the breaker here,
        so it is tripped even when the caller stopped waiting (a search past its deadline)."""
        from graphmem.graph import server

        try:
            return server.ensure_endpoint(self.settings, start)
        except ServerError as exc:
            if server.is_hung(str(exc)):
                self.breaker.trip(str(exc))
            raise

    async def check_alive(self) -> None:
        """Before a write on a connection idle for a while: one ping within the connect
        deadline, so a server stopped since costs that deadline, not the write timeout."""
        if self.client is None or time.monotonic() - self._last_ok < 1.0:
            return
        from graphmem.graph import server

        try:
            await asyncio.wait_for(self.client.connection.ping(),
                                   self.settings.graph.connect_timeout)
        except asyncio.TimeoutError:
            reason = f"{server.HUNG} within {self.settings.graph.connect_timeout:g}s (stopped or hung)"
            await self.drop(reason)
            self.breaker.trip(reason)
            raise ServerError(f"FalkorDB {reason}") from None
        except Exception as exc:
            if not connection_error(exc):
                raise GraphError(f"FalkorDB ping failed: {exc}") from None
            restart = self._idle_stopped()
            await self.drop(f"{type(exc).__name__}: {exc}", mark=not restart)
            if not restart:
                raise ServerError(f"lost the connection to FalkorDB: {exc}") from None
            await self.connect(force=True)  # its idle watcher stopped it: started again
        self._last_ok = time.monotonic()

    def _idle_stopped(self) -> bool:
        """Whether the embedded server is gone because its idle watcher stopped it (and this
        process may start it again): a reconnect then starts it rather than queueing."""
        from graphmem.graph import presence, server

        if self.endpoint is None or self.endpoint.external or not presence.may_start(self.settings):
            return False
        return server.EmbeddedServer(self.settings).stopped_when_idle()

    def _mark_down(self, reason: str) -> None:
        self.last_error = reason.splitlines()[0][:300] if reason else "unknown error"
        self.failed_at = time.monotonic()
        self._down_until = self.failed_at + self.settings.graph.retry_after

    async def drop(self, reason: str, client: Any = None, mark: bool = True) -> None:
        """Forget the current client (only if it is still ``client``, when given: a query that
        failed on an old client must not close the one another query has just reconnected)."""
        if client is not None and client is not self.client:
            return
        client, self.client = self.client, None
        self._on_drop()
        if mark:
            self._mark_down(reason)
        if client is not None:
            try:
                await client.connection.aclose()
            except Exception:  # the connection is already broken; closing is best effort
                pass

    async def _retrying(self, call: Callable[[Any], Any], retry: bool) -> Any:
        """``call(client)``; a lost connection is reconnected at once and ``call`` tried once
        more (a restarted or replaced server kills every pooled connection), rather than
        pausing the graph. A dead embedded server is not restarted here: writes are queued."""
        if self.client is None:
            await self.connect()
        client = self.client
        try:
            return await call(client)
        except Exception as exc:
            if not connection_error(exc):
                raise
            await self.drop(f"{type(exc).__name__}: {exc}", client, mark=not retry)
            if retry:
                try:
                    await self.connect(force=True, start=self._idle_stopped())
                except ServerError:
                    raise ServerError(f"lost the connection to FalkorDB: {exc}") from None
                return await self._retrying(call, retry=False)
            raise ServerError(f"lost the connection to FalkorDB: {exc}") from None

    async def query(self, gid: str, cypher: str, params: dict | None = None, ro: bool = False):
        """Run one Cypher query on graph ``gid``: its result, or None for a read of a graph that
        does not exist yet; GraphError for a query the server refused."""
        text = schema.with_params(cypher, params)  # our serialiser: much faster on vectors

        async def run(client):
            graph = client.select_graph(gid)
            async with self._slots:
                res = await (graph.ro_query(text) if ro else graph.query(text))
            self._last_ok = time.monotonic()
            return res

        try:
            return await self._retrying(run, retry=True)
        except ServerError:
            raise
        except Exception as exc:
            if "empty key" in str(exc):  # read of a graph that does not exist yet
                return None
            raise GraphError(f"FalkorDB query failed on graph {gid}: {exc}") from None

    async def list_graphs(self) -> list[str]:
        """Every graph on the server."""
        try:
            return await self._retrying(lambda client: client.list_graphs(), retry=True)
        except ServerError:
            raise
        except Exception as exc:
            raise GraphError(f"cannot list graphs: {exc}") from None

    async def delete_graph(self, gid: str) -> None:
        """Delete one graph (a graph that does not exist is no error)."""
        if self.client is None:
            await self.connect()
        try:
            await self.client.select_graph(gid).delete()
        except Exception as exc:
            if "empty key" not in str(exc) and "Invalid graph" not in str(exc):
                raise GraphError(f"cannot delete graph {gid}: {exc}") from None

    async def aclose(self) -> None:
        """Close the client (the embedded server keeps running for other processes)."""
        client, self.client = self.client, None
        if client is not None:
            try:
                await client.connection.aclose()
            except Exception as exc:
                log.debug("closing the FalkorDB connection: %s", exc)
