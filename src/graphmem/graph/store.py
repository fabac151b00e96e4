"""``GraphStore``: graphmem's memories in Graphiti's schema on FalkorDB, one graph per project.

The store owns what is per graph (the embedder each graph records, its indexes) and hands the
rest to one module each:

- ``connection.py``  the async client: connect (starting the embedded server), query, reconnect
- ``writes.py``      structured writes by batched Cypher (no LLM needed) and deletes
- ``extraction.py``  with an LLM, Graphiti's own ``add_episode`` on the free text
- ``hybrid_search.py`` hybrid search (cosine + full text, fused by RRF) across project graphs
- ``feed.py``        item ids, items by id, and the change feed teammates read

Only ``graph/`` imports graphiti_core, and lazily: importing this module stays cheap so a search
does not pay for graphiti's import.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable

from ..errors import GraphError, GraphmemError, IndexMismatchError
from ..models import MemoryItem
from ..settings import Settings
from graphmem.graph import feed, hybrid_search, schema, writes
from .connection import Connection
from .extraction import Extraction


class GraphStore:
    """Every project graph of one FalkorDB server, reached through one async client."""

    def __init__(self, settings: Settings, embedder: Any, llm: Any | None = None,
                 reranker: Any | None = None):
        self.settings = settings
        self.embedder = embedder
        self.llm = llm
        self.reranker = reranker
        self._ready: set[str] = set()  # graphs whose meta and indexes were checked this process
        self._team_ready: set[str] = set()  # graphs with the change feed's indexes
        self.embedders: dict[str, tuple[str, int, str]] = {}  # graph -> (model, dim, project)
        self.extraction = Extraction(self)
        self.conn = Connection(settings, on_drop=self._forget_graphs)

    def _forget_graphs(self) -> None:
        """What was checked on a connection that is gone is checked again on the next one."""
        self._ready.clear()
        self._team_ready.clear()
        self.embedders.clear()
        self.extraction.forget()

    # ---- connection (``connection.py``) ------------------------------------------------------
    @property
    def available(self) -> bool:
        """Connected, or allowed to try again (``Connection.available``)."""
        return self.conn.available

    @property
    def endpoint(self):
        """Where the connected server listens (None before the first connection)."""
        return self.conn.endpoint

    @property
    def last_error(self) -> str | None:
        """Why the last connection failed (None once connected)."""
        return self.conn.last_error

    @property
    def breaker(self):
        """The home's circuit breaker (``breaker.py``)."""
        return self.conn.breaker

    async def connect(self, force: bool = False, start: bool = True) -> None:
        """Reach the server (starting the embedded one unless not ``start``); raises ServerError."""
        await self.conn.connect(force, start)

    async def query(self, gid: str, cypher: str, params: dict | None = None, ro: bool = False):
        """One Cypher query on graph ``gid`` (``Connection.query``)."""
        return await self.conn.query(gid, cypher, params, ro)

    async def graphs(self) -> list[str]:
        """Names of every graphmem project graph on the server."""
        return sorted(n for n in await self.conn.list_graphs() if n.startswith(schema.GROUP_PREFIX))

    # ---- graphs: the embedder each records, their indexes -----------------------------------
    async def recorded_embedder(self, project: str) -> tuple[str, int] | None:
        """(model, dimension) recorded in a project's graph; None for a graph not made yet."""
        res = await self.query(schema.group_id(project), schema.META, ro=True)
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
        await self.prepare(schema.group_id(project), project)

    async def prepare(self, gid: str, project: str) -> None:
        """Check the graph's recorded embedder; on a new graph create indexes and the record."""
        if gid in self._ready:
            return
        got = await self.recorded_embedder(project)
        if got is not None:
            err = self.mismatch(project, got)
            if err is not None:
                raise err
        else:
            from graphiti_core.driver.driver import GraphProvider
            from graphiti_core.graph_queries import get_fulltext_indices, get_range_indices

            # No HNSW vector index: measured here it makes every write 2-3x slower, is rebuilt
            # on each server start, and brute-force cosine over one project's graph is a few ms.
            await self._create_indexes(gid, [*get_range_indices(GraphProvider.FALKORDB),
                                             *get_fulltext_indices(GraphProvider.FALKORDB),
                                             *schema.TEAM_INDEXES])
            await self.query(gid, schema.CLAIM, {"name": self.embedder.name,
                                                 "dim": int(self.embedder.dimension),
                                                 "project": project})
        self._ready.add(gid)

    async def _create_indexes(self, gid: str, queries: Iterable[str]) -> None:
        for q in queries:
            try:
                await self.query(gid, q)
            except GraphError as exc:
                if "already indexed" not in str(exc) and "already exists" not in str(exc):
                    raise

    def has_team_indexes(self, gid: str) -> bool:
        """Whether this process has made sure the change feed's indexes exist on ``gid``."""
        return gid in self._team_ready

    async def team_indexes(self, gid: str) -> None:
        """Range indexes the change feed reads by (graphs made before it lack them)."""
        if gid not in self._team_ready:
            await self._create_indexes(gid, schema.TEAM_INDEXES)
            self._team_ready.add(gid)

    async def drop_project(self, project: str) -> None:
        """Delete a project's whole graph (before a rebuild with another embedder)."""
        gid = schema.group_id(project)
        await self.conn.delete_graph(gid)
        self._ready.discard(gid)
        self._team_ready.discard(gid)
        self.embedders.pop(gid, None)
        self.extraction.forget(gid)

    def graphiti(self, project: str):
        """Graphiti on this project's graph, with every client seat filled by graphmem."""
        return self.extraction.graphiti(project)

    # ---- writes (``writes.py``) ----------------------------------------------------------------
    async def save(self, items: Iterable[MemoryItem], extract: bool = True) -> str | None:
        """Write items to their project graphs; raises a GraphmemError when any could not be
        written. Returns a note when LLM extraction (the optional second step) failed, else
        None; ``extract=False`` skips that step (rebuilds: it would re-run every LLM call)."""
        return await writes.save(self, items, extract)

    async def delete_spec(self, project: str, spec: str, owner: tuple[str, str] | None = None) -> None:
        """Remove one spec's items (of ``owner`` only, when given), and its anchors and episodes
        that no item is left in, from its project graph (tombstoned)."""
        await writes.delete_spec(self, project, spec, owner)

    async def delete_items(self, project: str, ids: list[str],
                           owner: tuple[str, str] | None = None) -> None:
        """Remove items (of ``owner`` only, when given) and their fact edges by id from their
        project graph (tombstoned)."""
        await writes.delete_items(self, project, ids, owner)

    # ---- reads (``feed.py``, ``hybrid_search.py``) --------------------------------------------------
    async def changes(self, project: str, after: tuple[int, str] = (0, ""),
                      tombstones: bool = False) -> list[list]:
        """Items or tombstones of a project graph written after the cursor ``after``."""
        return await feed.changes(self, project, after, tombstones)

    async def server_ms(self, project: str) -> int:
        """The server's clock (ms), the one ``gm_written`` stamps come from."""
        return await feed.server_ms(self, project)

    async def item_sizes(self, project: str, ids: list[str]) -> dict[str, tuple[int, int]]:
        """(longest field, all fields) in characters of the given items, without sending them."""
        return await feed.item_sizes(self, project, ids)

    async def items_by_id(self, project: str, ids: list[str], max_chars: int | None = None,
                          sizes: dict[str, tuple[int, int]] | None = None
                          ) -> tuple[list[list], dict[str, int]]:
        """``HIT_FIELDS`` rows of the given items (those still in the graph), and the ids of
        those with a field over ``max_chars`` (never sent whole)."""
        return await feed.items_by_id(self, project, ids, max_chars, sizes)

    async def item_ids(self, project: str, spec: str | None = None,
                       owner: tuple[str, str] | None = None) -> set[str]:
        """Ids of the items a project graph holds (optionally of one spec, or of one home:
        ``owner``, see ``team.owner``)."""
        return await feed.item_ids(self, project, spec, owner)

    async def search(self, query: str, projects: list[str] | None, kinds: list[str] | None = None,
                     limit: int = 10, spec: str | None = None,
                     exclude: Callable[[list[str]], set[str]] | None = None
                     ) -> hybrid_search.GraphHits:
        """Hybrid search over each project's graph (every graphmem graph when ``projects`` is
        None), optionally within one spec, without the ids ``exclude`` returns; the winners that
        fail their checks come back in ``refused``, unwarned."""
        return await hybrid_search.search(self, query, projects, kinds, limit, spec, exclude)

    async def aclose(self) -> None:
        """Close the connection (the embedded server keeps running for other processes)."""
        await self.extraction.aclose()
        await self.conn.aclose()


async def open_graph(settings: Settings, embedder: Any, llm: Any | None = None,
                     reranker: Any | None = None) -> GraphStore | None:
    """The graph store per ``settings.graph.mode``: None when off. ``auto`` is opened only
    once ``presence.in_use`` says a server is there, and then acts as ``on``: a server that
    cannot be reached leaves the store down and writes go to the outbox until it is back."""
    if settings.graph.mode == "off":
        return None
    store = GraphStore(settings, embedder, llm, reranker)
    try:
        await store.connect()
    except GraphmemError:
        pass  # down: writes are queued; the next write or `graphmem sync` tries again
    return store
