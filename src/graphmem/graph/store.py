"""``GraphStore``: graphmem's memories in Graphiti's schema on FalkorDB, one graph per project.

Structured writes need no LLM: items are embedded with the configured embedder and written in
Graphiti's schema by batched Cypher (``schema.py``), idempotent on ``MemoryItem.id``. With an LLM
configured, the free-text parts also go through ``Graphiti.add_episode`` (one at a time per graph,
with a timeout; a failure there never fails the write). Search runs brute-force cosine and the
full-text index per project graph, fuses them by RRF, and returns ``Hit`` s without vectors.

This is the only module (with ``clients.py``, which it loads lazily) that touches graphiti_core;
importing it stays cheap so a search does not pay for graphiti's import.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
import time
from datetime import datetime
from typing import Any, Callable, Iterable

from ..errors import GraphError, GraphmemError, IndexMismatchError, ServerError
from ..models import Hit, MemoryItem
from ..redact import redact_items
from ..settings import Settings
from . import schema
from .schema import rrf

log = logging.getLogger("graphmem.graph")
MAX_IN_FLIGHT = 32
SEARCH_RETRY = 1.0  # seconds after a failed connection before a search tries again

PAGE = 5000  # ids per read when listing a graph's items (see ``item_ids``)
BATCH = 1000  # items per Cypher batch: big enough to amortise round trips, small enough to parse
EXTRACT_FIELDS = {"what_worked", "what_failed", "recommendations_for_next_session"}
_STOP = {"a", "an", "and", "are", "as", "at", "be", "but", "by", "for", "if", "in", "into", "is",
         "it", "no", "not", "of", "on", "or", "such", "that", "the", "their", "then", "there",
         "these", "they", "this", "to", "was", "will", "with", "what", "how", "why", "when"}


def _connection_error(exc: BaseException) -> bool:
    import redis

    return isinstance(exc, (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError,
                            OSError, asyncio.TimeoutError))


def query_words(text: str) -> list[str]:
    """The words of ``text`` that go into full-text queries (punctuation never reaches the
    RediSearch syntax; stop words and single letters are dropped)."""
    words = [w for w in re.findall(r"\w+", text.casefold()) if w not in _STOP and len(w) > 1]
    return list(dict.fromkeys(words))[:32]


def fulltext_query(text: str, all_words: bool = False) -> str:
    """RediSearch query: any of the words (OR), or every one of them (AND)."""
    return (" " if all_words else " | ").join(query_words(text))


class GraphStore:
    """Every project graph of one FalkorDB server, reached through one async client."""

    def __init__(self, settings: Settings, embedder: Any, llm: Any | None = None,
                 reranker: Any | None = None):
        self.settings = settings
        self.embedder = embedder
        self.llm = llm
        self.reranker = reranker
        self.endpoint = None
        self._client = None
        self._down_until = 0.0
        self.last_error: str | None = None
        self._ready: set[str] = set()  # graphs whose meta and indexes were checked this process
        self._team_ready: set[str] = set()  # graphs with the change feed's indexes
        self._embedders: dict[str, tuple[str, int, str]] = {}  # graph -> (model, dim, project)
        self._graphitis: dict[str, Any] = {}
        self._locks: dict[str, asyncio.Lock] = {}
        self._connect_lock = asyncio.Lock()
        self._last_ok = 0.0  # monotonic time of the last reply from the server
        from .breaker import Breaker

        self.breaker = Breaker(settings.home, settings.graph.retry_after)
        # At most this many queries in flight: the client's pool holds 100 connections, and a
        # search over every graph sends 2-3 queries per graph at once (MaxConnectionsError past
        # ~35 projects before this bound).
        self._slots = asyncio.Semaphore(MAX_IN_FLIGHT)

    # ---- connection ------------------------------------------------------------------------
    @property
    def available(self) -> bool:
        """Connected, or allowed to try again (a failed server is retried after a pause; a hung
        one after the home's circuit breaker closes, ``breaker.py``)."""
        if self._client is not None:
            return True
        return time.monotonic() >= self._down_until and self.breaker.open_reason() is None

    async def connect(self, force: bool = False, start: bool = True) -> None:
        """Reach the server (starting the embedded one if needed, unless not ``start``);
        raises ServerError."""
        async with self._connect_lock:
            if self._client is not None:
                return
            if not force and time.monotonic() < self._down_until:
                raise ServerError(f"graph unavailable ({self.last_error}); retrying in "
                                  f"{self._down_until - time.monotonic():.0f}s")
            tripped = None if force else self.breaker.open_reason()
            if tripped is not None:  # another process found the server hung a moment ago
                self._mark_down(tripped)
                raise ServerError(f"graph unavailable ({tripped})")
            from . import server

            try:
                ep = await asyncio.to_thread(server.ensure_endpoint, self.settings, start)
            except ServerError as exc:
                self._mark_down(str(exc))
                if server.is_hung(str(exc)):
                    self.breaker.trip(str(exc))
                raise
            except OSError as exc:  # e.g. the home is not writable
                self._mark_down(str(exc))
                raise ServerError(f"cannot start FalkorDB: {exc}") from None
            from falkordb.asyncio import FalkorDB
            from redis.asyncio.retry import Retry
            from redis.backoff import NoBackoff

            # One try per query: a failure queues the write in the outbox instead of stalling.
            t = self.settings.graph.timeout
            opts = dict(socket_timeout=t, socket_connect_timeout=self.settings.graph.connect_timeout)
            if ep.url:
                client = FalkorDB.from_url(ep.url, **opts)
            else:
                client = FalkorDB(**ep.client_kwargs(), **opts)
            # set afterwards: falkordb's constructor copies these options into a sync client
            client.connection.set_retry(Retry(NoBackoff(), 0))
            self._client = client
            self.endpoint = ep
            self.last_error = None
            self._last_ok = time.monotonic()  # ensure_endpoint's ping just got its reply
            self.breaker.reset()

    async def _check_alive(self) -> None:
        """Before a write on a connection idle for a while: one ping within the connect
        deadline, so a server stopped since costs that deadline, not the write timeout."""
        if self._client is None or time.monotonic() - self._last_ok < 1.0:
            return
        from . import server

        try:
            await asyncio.wait_for(self._client.connection.ping(),
                                   self.settings.graph.connect_timeout)
        except asyncio.TimeoutError:
            reason = f"{server.HUNG} within {self.settings.graph.connect_timeout:g}s (stopped or hung)"
            await self._drop_client(reason)
            self.breaker.trip(reason)
            raise ServerError(f"FalkorDB {reason}") from None
        except Exception as exc:
            if not _connection_error(exc):
                raise GraphError(f"FalkorDB ping failed: {exc}") from None
            await self._drop_client(f"{type(exc).__name__}: {exc}")
            raise ServerError(f"lost the connection to FalkorDB: {exc}") from None
        self._last_ok = time.monotonic()

    def _mark_down(self, reason: str) -> None:
        self.last_error = reason.splitlines()[0][:300] if reason else "unknown error"
        self._failed_at = time.monotonic()
        self._down_until = self._failed_at + self.settings.graph.retry_after

    _failed_at = float("-inf")

    async def _drop_client(self, reason: str, client: Any = None, mark: bool = True) -> None:
        """Forget the current client (only if it is still ``client``, when given: a query that
        failed on an old client must not close the one another query has just reconnected)."""
        if client is not None and client is not self._client:
            return
        client, self._client = self._client, None
        self._ready.clear()
        self._team_ready.clear()
        self._embedders.clear()
        self._graphitis.clear()
        if mark:
            self._mark_down(reason)
        if client is not None:
            try:
                await client.connection.aclose()
            except Exception:  # the connection is already broken; closing is best effort
                pass

    async def _query(self, gid: str, cypher: str, params: dict | None = None, ro: bool = False,
                     retry: bool = True):
        if self._client is None:
            await self.connect()
        client = self._client
        graph = client.select_graph(gid)
        text = schema.with_params(cypher, params)  # our serialiser: much faster on vectors
        try:
            async with self._slots:
                res = await (graph.ro_query(text) if ro else graph.query(text))
            self._last_ok = time.monotonic()
            return res
        except Exception as exc:
            if _connection_error(exc):
                reason = f"{type(exc).__name__}: {exc}"
                await self._drop_client(reason, client, mark=not retry)
                if retry:
                    # A restarted or replaced server (every pooled connection is dead): connect
                    # again at once and try once more, rather than pausing the graph. A dead
                    # embedded server is not restarted here: the write is queued in the outbox.
                    try:
                        await self.connect(force=True, start=False)
                    except ServerError:
                        raise ServerError(f"lost the connection to FalkorDB: {exc}") from None
                    return await self._query(gid, cypher, params, ro, retry=False)
                raise ServerError(f"lost the connection to FalkorDB: {exc}") from None
            if "empty key" in str(exc):  # read of a graph that does not exist yet
                return None
            raise GraphError(f"FalkorDB query failed on graph {gid}: {exc}") from None

    # ---- graphs ----------------------------------------------------------------------------
    async def recorded_embedder(self, project: str) -> tuple[str, int] | None:
        """(model, dimension) recorded in a project's graph; None for a graph not made yet."""
        gid = schema.group_id(project)
        res = await self._query(gid, "MATCH (m:GraphmemMeta) RETURN m.embedder, m.dimension", ro=True)
        rows = res.result_set if res is not None else []
        return (str(rows[0][0]), int(rows[0][1])) if rows else None

    def mismatch(self, project: str, got: tuple[str, int]) -> IndexMismatchError | None:
        """The error for a graph whose vectors come from another embedder than ours, or None."""
        name, dim = self.embedder.name, int(self.embedder.dimension)
        if got == (name, dim):
            return None
        return IndexMismatchError(
            f"the graph of project {project} holds vectors from embedder {got[0]} ({got[1]}-d), "
            f"but this machine's embedder is {name} ({dim}-d); vectors of two embedders are never "
            f"mixed. Configure {got[0]} here (GRAPHMEM_EMBEDDER_PROVIDER, "
            f"GRAPHMEM_LOCAL_EMBEDDING_MODEL ...), or move to a new graph: another project id "
            f"(GRAPHMEM_PROJECT_ID) or `graphmem reindex`, which rebuilds this project's graph "
            f"with {name} from this machine's files (every machine must then use {name})")

    async def check_embedder(self, project: str) -> None:
        """Refuse (IndexMismatchError) when the project's graph was built by another embedder;
        a new graph is claimed for ours."""
        await self._prepare(schema.group_id(project), project)

    async def _prepare(self, gid: str, project: str) -> None:
        """Check the graph's recorded embedder; on a new graph create indexes and the record."""
        if gid in self._ready:
            return
        got = await self.recorded_embedder(project)
        name, dim = self.embedder.name, int(self.embedder.dimension)
        if got is not None:
            err = self.mismatch(project, got)
            if err is not None:
                raise err
        else:
            await self._create_indexes(gid)
            await self._query(gid, "MERGE (m:GraphmemMeta {key: 'graph'}) SET m.embedder = $name, "
                              "m.dimension = $dim, m.project = $project, m.schema = 1",
                              {"name": name, "dim": dim, "project": project})
        self._ready.add(gid)

    async def _create_indexes(self, gid: str) -> None:
        from graphiti_core.driver.driver import GraphProvider
        from graphiti_core.graph_queries import get_fulltext_indices, get_range_indices

        # No HNSW vector index: measured here it makes every write 2-3x slower, is rebuilt on
        # each server start, and brute-force cosine over one project's graph is a few ms.
        queries = [*get_range_indices(GraphProvider.FALKORDB), *get_fulltext_indices(GraphProvider.FALKORDB),
                   *schema.TEAM_INDEXES]
        for q in queries:
            try:
                await self._query(gid, q)
            except GraphError as exc:
                if "already indexed" not in str(exc) and "already exists" not in str(exc):
                    raise

    def graphiti(self, project: str):
        """Graphiti on this project's graph, with every client seat filled by graphmem."""
        gid = schema.group_id(project)
        if gid not in self._graphitis:
            if self._client is None:
                raise ServerError("not connected to FalkorDB")
            from graphiti_core.driver.falkordb_driver import FalkorDriver

            from .clients import make_graphiti

            # One driver per graph: every clone() would fire index creation again.
            driver = FalkorDriver(falkor_db=self._client, database=gid)
            self._graphitis[gid] = make_graphiti(driver, self.embedder, self.llm, self.reranker)
        return self._graphitis[gid]

    async def _settle(self, g: Any) -> None:
        task = getattr(g.driver, "_init_task", None)  # index creation the driver fired itself
        if task is not None and not task.done():
            try:
                await task
            except Exception as exc:
                log.info("graphiti index creation: %s", exc)

    # ---- writes ----------------------------------------------------------------------------
    async def save(self, items: Iterable[MemoryItem], extract: bool = True) -> str | None:
        """Write items to their project graphs; raises a GraphmemError when any could not be written.

        Returns a note when LLM extraction (the optional second step) failed, else None.
        ``extract=False`` skips that step (rebuilds: it would re-run every LLM call).
        """
        items = list(items)
        if not items:
            return None
        if self.settings.redact:  # whichever path brings them (write, outbox, rebuild, doctor --fix)
            items = redact_items(items)
        await self._check_alive()
        try:
            await asyncio.wait_for(self._save(items), timeout=self.settings.graph.timeout)
        except asyncio.TimeoutError:
            reason = f"graph write timed out after {self.settings.graph.timeout:.0f}s"
            await self._drop_client(reason)  # the next connection's ping tells slow from hung
            raise GraphError(reason) from None
        if self.llm is not None and extract:
            return await self._extract(items)
        return None

    async def _save(self, items: list[MemoryItem]) -> None:
        by_project: dict[str, list[MemoryItem]] = {}
        for item in items:
            by_project.setdefault(item.project, []).append(item)
        for project, group in by_project.items():
            gid = schema.group_id(project)
            await self._prepare(gid, project)
            for start in range(0, len(group), BATCH):
                await self._write_batch(gid, group[start:start + BATCH])

    async def _write_batch(self, gid: str, items: list[MemoryItem]) -> None:
        texts = schema.texts_to_embed(items)
        vectors = await self.embedder.embed(texts)
        try:
            vectors = schema.as_vectors(vectors)
        except ValueError as exc:
            raise GraphError(f"embedder {self.embedder.name}: {exc}") from None
        if len(vectors) != len(texts) or any(len(v) != self.embedder.dimension for v in vectors):
            raise GraphError(f"embedder {self.embedder.name} returned vectors of the wrong shape")
        rows = schema.build_batch(gid, items, dict(zip(texts, vectors)))
        anchors: dict[str, list[dict]] = {}
        for a in rows["anchors"]:
            anchors.setdefault(a["label"], []).append(a)
        # Order matters for readers: nodes first, then the episode, the fact edges last.
        for label, group in [*anchors.items(), *rows["nodes"].items()]:
            await self._query(gid, schema.nodes_query(label), {"rows": group})
        await self._query(gid, schema.EPISODE, {"episode": rows["episode"], "mentions": rows["mentions"]})
        await self._query(gid, schema.EDGES, {"rows": rows["edges"]})
        from .code_graph import write_code  # File/Symbol nodes and ABOUT edges (code_graph.py)

        await write_code(self, gid, items[0].project, items)

    async def _extract(self, items: list[MemoryItem]) -> str | None:
        """Free text through Graphiti's own extraction; failures are reported, never raised."""
        free = [i for i in items if i.kind == "turn"
                or (i.kind == "insight" and i.metadata.get("field") in EXTRACT_FIELDS)]
        if not free:
            return None
        from graphiti_core.nodes import EpisodeType

        notes = []
        for project in dict.fromkeys(i.project for i in free):
            part = [i for i in free if i.project == project]
            gid = schema.group_id(project)
            try:
                g = self.graphiti(project)
                async with self._locks.setdefault(gid, asyncio.Lock()):
                    await self._settle(g)
                    body = "\n".join(f"{i.metadata.get('field', i.kind)}: {i.text}" for i in part)
                    await asyncio.wait_for(g.add_episode(
                        name=f"graphmem session {part[0].session or ''}".strip(), episode_body=body,
                        source_description="graphmem session insights",
                        reference_time=max(i.time for i in part), source=EpisodeType.text,
                        group_id=gid), timeout=self.settings.graph.timeout)
            except (Exception, asyncio.TimeoutError) as exc:
                log.warning("graph extraction for %s failed: %s", project, exc)
                notes.append(f"extraction failed: {type(exc).__name__}: {exc}"[:300])
        return "; ".join(notes) or None

    async def delete_spec(self, project: str, spec: str) -> None:
        """Remove one spec's items, anchors and episodes from its project graph (leaving a
        tombstone per item, so that other machines drop them too)."""
        gid = schema.group_id(project)
        await self._team_indexes(gid)
        await self._query(gid, schema.TOMBSTONE_SPEC, {"spec": spec})
        await self._query(gid, "MATCH (n) WHERE n.gm_spec = $spec DETACH DELETE n", {"spec": spec})

    async def delete_items(self, project: str, ids: list[str]) -> None:
        """Remove items (and their fact edges) by id from their project graph, leaving tombstones."""
        gid = schema.group_id(project)
        await self._team_indexes(gid)
        await self._query(gid, schema.TOMBSTONE_IDS, {"ids": list(ids)})
        await self._query(gid, "MATCH (n:Entity) WHERE n.uuid IN $ids DETACH DELETE n", {"ids": list(ids)})

    # ---- team: changes since a cursor ------------------------------------------------------
    async def _team_indexes(self, gid: str) -> None:
        """Range indexes the change feed reads by (graphs made before it lack them)."""
        if gid in self._team_ready:
            return
        for q in schema.TEAM_INDEXES:
            try:
                await self._query(gid, q)
            except GraphError as exc:
                if "already indexed" not in str(exc) and "already exists" not in str(exc):
                    raise
        self._team_ready.add(gid)

    async def changes(self, project: str, after: tuple[int, str] = (0, ""),
                      tombstones: bool = False) -> list[list]:
        """Items (uuid, hash, written) or tombstones (uuid, written) of a project graph written
        after the cursor ``after`` = (server ms, uuid), in that order. Read in pages until one
        comes back empty, so a server's RESULTSET_SIZE cannot cut the feed short."""
        gid = schema.group_id(project)
        if gid not in self._team_ready:
            got = await self.recorded_embedder(project)
            if got is None:
                return []  # no graph yet (or not ours): nothing to read, nothing to create
            err = self.mismatch(project, got)
            if err is not None:  # its items could be taken in, but never written back
                raise err
            await self._team_indexes(gid)
        query = schema.CHANGED_TOMBSTONES if tombstones else schema.CHANGED_ITEMS
        rows: list[list] = []
        t, u = after
        while True:
            res = await self._query(gid, query, {"t": t, "u": u, "page": PAGE}, ro=True)
            page = res.result_set if res is not None else []
            if not page:
                return rows
            rows.extend(page)
            t, u = page[-1][-1], page[-1][0]

    async def drop_project(self, project: str) -> None:
        """Delete a project's whole graph (before a rebuild with another embedder)."""
        gid = schema.group_id(project)
        if self._client is None:
            await self.connect()
        try:
            await self._client.select_graph(gid).delete()
        except Exception as exc:
            if "empty key" not in str(exc) and "Invalid graph" not in str(exc):
                raise GraphError(f"cannot delete graph {gid}: {exc}") from None
        self._ready.discard(gid)
        self._team_ready.discard(gid)
        self._embedders.pop(gid, None)
        self._graphitis.pop(gid, None)

    async def server_ms(self, project: str) -> int:
        """The server's clock (ms), the one ``gm_written`` stamps come from."""
        res = await self._query(schema.group_id(project), "RETURN timestamp()", ro=True)
        return int(res.result_set[0][0])

    async def items_by_id(self, project: str, ids: list[str]) -> list[list]:
        """``HIT_FIELDS`` rows of the given items (those still in the graph), in chunks; a chunk
        cut short by the server's RESULTSET_SIZE is asked for again without what came back."""
        gid, rows, pending = schema.group_id(project), [], list(dict.fromkeys(ids))
        while pending:
            chunk, pending = pending[:BATCH], pending[BATCH:]
            res = await self._query(gid, schema.ITEMS_BY_ID, {"ids": chunk}, ro=True)
            got = res.result_set if res is not None else []
            rows.extend(got)
            if got:  # an empty answer: the rest of the chunk was deleted meanwhile
                seen = {r[0] for r in got}
                pending = [i for i in chunk if i not in seen] + pending
        return rows

    # ---- reads -----------------------------------------------------------------------------
    async def item_ids(self, project: str, spec: str | None = None, host: str | None = None) -> set[str]:
        """Ids of the items a project graph holds (optionally of one spec, or written from one
        machine: ``host``).

        Read in pages ordered by id, each starting after the last id seen, until a page comes
        back empty: a server's RESULTSET_SIZE silently cuts any one reply short (FalkorDB's
        image defaults to 10,000), so a short page does not mean the end.
        """
        where = ("n.gm_kind IS NOT NULL" + (" AND n.gm_spec = $spec" if spec is not None else "")
                 + (" AND n.gm_host = $host" if host is not None else ""))
        gid, ids, after = schema.group_id(project), set(), ""
        while True:
            res = await self._query(gid, f"MATCH (n:Entity) WHERE {where} AND n.uuid > $after "
                                    f"RETURN n.uuid ORDER BY n.uuid LIMIT {PAGE}",
                                    {"spec": spec or "", "after": after, "host": host or ""}, ro=True)
            page = [r[0] for r in res.result_set] if res is not None else []
            if not page:
                return ids
            ids.update(page)
            after = page[-1]

    async def graphs(self, retry: bool = True) -> list[str]:
        """Names of every graphmem project graph on the server."""
        if self._client is None:
            await self.connect()
        client = self._client
        try:
            names = await client.list_graphs()
        except Exception as exc:
            if _connection_error(exc):
                await self._drop_client(f"{type(exc).__name__}: {exc}", client, mark=not retry)
                if retry:  # a restarted server: as in ``_query``
                    try:
                        await self.connect(force=True, start=False)
                    except ServerError:
                        raise ServerError(f"lost the connection to FalkorDB: {exc}") from None
                    return await self.graphs(retry=False)
                raise ServerError(f"lost the connection to FalkorDB: {exc}") from None
            raise GraphError(f"cannot list graphs: {exc}") from None
        return sorted(n for n in names if n.startswith(schema.GROUP_PREFIX))

    async def search(self, query: str, projects: list[str] | None, kinds: list[str] | None = None,
                     limit: int = 10, spec: str | None = None,
                     exclude: Callable[[list[str]], set[str]] | None = None) -> list[Hit]:
        """Hybrid search (cosine + full text, fused by RRF) over each project's graph
        (every graphmem graph when ``projects`` is None), optionally within one spec.

        ``exclude``: given candidate ids, the ones not wanted (the items the local index holds
        and ranks itself): the best ``limit`` of the others are returned, and no fields are
        fetched for the excluded ones (when all are excluded, no second query runs)."""
        if not query.strip():
            return []
        if self._client is None and time.monotonic() - self._failed_at > SEARCH_RETRY \
                and self.breaker.open_reason() is None:
            # A search tries a refused server again after a second, not after ``retry_after``:
            # a restarted server answers at once (a hung one trips the home's breaker instead).
            await self.connect(force=True)
        gids = [schema.group_id(p) for p in projects] if projects is not None else await self.graphs()
        gids = await self._same_embedder(gids, strict=projects is not None)
        if not gids:
            return []
        from ..providers.base import as_embedder

        vec = schema.as_vectors([await as_embedder(self.embedder).embed_query(query)])[0]
        ft = fulltext_query(query)
        k = limit * (4 if kinds or spec else 2)
        per_graph = await asyncio.gather(*(self._candidates(g, vec, ft, kinds, k, spec) for g in gids))
        # Fuse across graphs, not per graph: cosines from one embedder compare across graphs, so
        # one global vector ranking and one global text ranking go into RRF together.
        home: dict[str, str] = {}
        rankings: list[list[tuple[str, float]]] = [[], []]
        for gid, cands in zip(gids, per_graph):
            for which, found in enumerate(cands):
                for uuid, score in found:
                    home.setdefault(uuid, gid)
                    rankings[which].append((uuid, score))
        ids = list(home)
        pos = {u: i for i, u in enumerate(ids)}
        ranked = [[pos[u] for u, _ in sorted(found, key=lambda r: -r[1])] for found in rankings]
        fused = rrf(ranked, len(ids))
        best = 2.0 / 61  # first in both rankings: scores are scaled into 0..1
        order = sorted(range(len(ids)), key=lambda i: -fused[i])
        if exclude is not None:
            drop = exclude([ids[i] for i in order])
            order = [i for i in order if ids[i] not in drop]
        top = order[:limit]
        if not top:
            return []
        # Only the winners' fields are fetched (by the uuid index), one query per graph.
        wanted: dict[str, list[str]] = {}
        for i in top:
            wanted.setdefault(home[ids[i]], []).append(ids[i])
        fetched = await asyncio.gather(*(self._query(g, f"MATCH (n:Entity) WHERE n.uuid IN $ids "
                                                        f"RETURN {schema.HIT_FIELDS}", {"ids": u}, ro=True)
                                         for g, u in wanted.items()))
        rows = {r[0]: r for res in fetched if res is not None for r in res.result_set}
        return [_hit(rows[ids[i]], fused[i] / best) for i in top if ids[i] in rows]

    async def _same_embedder(self, gids: list[str], strict: bool) -> list[str]:
        """The graphs whose vectors our embedder can compare with. A graph of another embedder
        is an error when named (``strict``: project or spec scope), skipped with a warning in an
        every-project search (its cosines would fail the whole query)."""
        todo = [g for g in gids if g not in self._embedders]
        if todo:
            found = await asyncio.gather(*(self._query(
                g, "MATCH (m:GraphmemMeta) RETURN m.embedder, m.dimension, m.project", ro=True)
                for g in todo))
            for g, res in zip(todo, found):
                rows = res.result_set if res is not None else []
                if rows:
                    self._embedders[g] = (str(rows[0][0]), int(rows[0][1]), str(rows[0][2]))
        keep = []
        for g in gids:
            rec = self._embedders.get(g)
            err = self.mismatch(rec[2], rec[:2]) if rec else None
            if err is None:
                keep.append(g)
            elif strict:
                raise err
            else:
                log.warning("graph search skips %s: %s", g, err)
        return keep

    async def _candidates(self, gid: str, vec: list[float], ft: str, kinds: list[str] | None,
                          k: int, spec: str | None) -> tuple[list, list]:
        """One graph's best ``k`` ids by cosine and by full text, as (uuid, score) pairs."""
        where = ("WHERE n.gm_kind IS NOT NULL" + (" AND n.gm_kind IN $kinds" if kinds else "")
                 + (" AND n.gm_spec = $spec" if spec else ""))
        params = {"vec": vec, "k": k, "kinds": kinds or [], "q": ft, "spec": spec or ""}
        # Ids and scores only: projecting fields (let alone vectors) for every candidate costs
        # more than the ranking itself; the winners' fields are fetched afterwards.
        vq = (f"WITH {schema.VEC.format('$vec')} AS q MATCH (n:Entity) {where} WITH n, "
              f"vec.cosineDistance(n.name_embedding, q) AS d ORDER BY d ASC LIMIT $k "
              f"RETURN n.uuid, 1 - d")
        tq = (f"CALL db.idx.fulltext.queryNodes('Entity', $q) YIELD node AS n, score {where} "
              f"WITH n, score ORDER BY score DESC LIMIT $k RETURN n.uuid, score")
        runs = [self._query(gid, vq, params, ro=True)]
        if ft:
            # RediSearch's TF-IDF ranks a document with two frequent words above one with every
            # word of the query, so documents holding all the words come first (AND, then OR).
            runs.append(self._query(gid, tq, {**params, "q": ft.replace(" | ", " ")}, ro=True))
            if " | " in ft:
                runs.append(self._query(gid, tq, params, ro=True))
        results = await asyncio.gather(*runs)
        found = [res.result_set if res is not None else [] for res in results]
        text: list[tuple[str, float]] = []
        seen: set[str] = set()
        for tier, rows in enumerate(found[1:]):
            for uuid, score in rows:
                if uuid not in seen:
                    seen.add(uuid)
                    text.append((uuid, float(score) + (1e6 if tier == 0 else 0.0)))
        return [(u, float(s)) for u, s in found[0]], text[:k]

    async def aclose(self) -> None:
        """Close the connection (the embedded server keeps running for other processes)."""
        for g in self._graphitis.values():
            await self._settle(g)
        self._graphitis.clear()
        client, self._client = self._client, None
        if client is not None:
            try:
                await client.connection.aclose()
            except Exception as exc:
                log.debug("closing the FalkorDB connection: %s", exc)


def _hit(row: list, score: float) -> Hit:
    uuid, kind, text, project, spec, session, when, meta, source = row[:9]
    try:
        metadata = json.loads(meta) if meta else {}
    except ValueError:
        metadata = {}
    return Hit(id=uuid, kind=kind, text=text or "", score=score, project=project or "",
               spec=spec or None, session=session or None,
               time=datetime.fromisoformat(when) if when else None, metadata=metadata,
               source=source or "", backend="graph")


async def open_graph(settings: Settings, embedder: Any, llm: Any | None = None,
                     reranker: Any | None = None) -> GraphStore | None:
    """The graph store per ``settings.graph.mode``: None when off, or ``auto`` with no server."""
    mode = settings.graph.mode
    if mode == "off":
        return None
    store = GraphStore(settings, embedder, llm, reranker)
    try:
        await store.connect()
    except GraphmemError:
        if mode == "auto":
            return None
        # mode "on": the store exists but is down; writes go to the outbox until it is back
    return store
