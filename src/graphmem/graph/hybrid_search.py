"""Hybrid search over project graphs: brute-force cosine and the full-text index per graph, fused
across graphs by RRF; only the winners' fields are fetched, and ``Hit`` s carry no vectors."""

from __future__ import annotations

import asyncio
import logging
import re
import time
from typing import Any, Callable, NamedTuple, get_args

from graphmem.graph import schema
from graphmem.graph.feed import fetch_items, node_hashes
from graphmem.graph.foreign import fields
from graphmem.graph.schema import rrf
from graphmem.models import Hit, Kind

log = logging.getLogger("graphmem.graph")
KINDS = list(get_args(Kind))
SEARCH_RETRY = 1.0  # seconds after a failed connection before a search tries again
_STOP = {"a", "an", "and", "are", "as", "at", "be", "but", "by", "for", "if", "in", "into", "is",
         "it", "no", "not", "of", "on", "or", "such", "that", "the", "their", "then", "there",
         "these", "they", "this", "to", "was", "will", "with", "what", "how", "why", "when"}


class Refusal(NamedTuple):
    """A node of ours that won a search but failed its checks: where, which version, why."""

    graph: str
    hash: str  # its ``gm_hash`` as ``str``: a refusal holds until the node changes
    reason: str


class GraphHits(list[Hit]):
    """A graph search's hits, and ``refused``: uuid -> ``Refusal`` of the winners left out. The
    caller decides who is told (``facade/team.note_refused``: once per home, not per search)."""

    def __init__(self, hits: Any = (), refused: dict[str, Refusal] | None = None):
        super().__init__(hits)
        self.refused: dict[str, Refusal] = refused or {}


def query_words(text: str) -> list[str]:
    """The words of ``text`` that go into full-text queries (punctuation never reaches the
    RediSearch syntax; stop words and single letters are dropped)."""
    words = [w for w in re.findall(r"\w+", text.casefold()) if w not in _STOP and len(w) > 1]
    return list(dict.fromkeys(words))[:32]


def fulltext_query(text: str, all_words: bool = False) -> str:
    """RediSearch query: any of the words (OR), or every one of them (AND)."""
    return (" " if all_words else " | ").join(query_words(text))


async def search(store: Any, query: str, projects: list[str] | None, kinds: list[str] | None = None,
                 limit: int = 10, spec: str | None = None,
                 exclude: Callable[[list[str]], set[str]] | None = None) -> GraphHits:
    """``GraphStore.search``: hybrid search over each project's graph (every graphmem graph when
    ``projects`` is None), optionally within one spec; ``exclude`` drops candidate ids (the
    items the local index ranks itself) before any field is fetched. Winners that fail their
    checks are left out and returned in ``refused``, never warned about here."""
    if not query.strip():
        return GraphHits()
    conn = store.conn
    if conn.client is None and time.monotonic() - conn.failed_at > SEARCH_RETRY \
            and conn.breaker.open_reason() is None:
        # A search tries a refused server again after a second, not after ``retry_after``:
        # a restarted server answers at once (a hung one trips the home's breaker instead).
        await conn.connect(force=True)
    gids = [schema.group_id(p) for p in projects] if projects is not None else await store.graphs()
    gids = await _same_embedder(store, gids, strict=projects is not None)
    if not gids:
        return GraphHits()
    from ..providers.base import as_embedder

    vec = schema.as_vectors([await as_embedder(store.embedder).embed_query(query)])[0]
    ft = fulltext_query(query)
    k = limit * (4 if kinds or spec else 2)
    per_graph = await asyncio.gather(*(_candidates(store, g, vec, ft, kinds, k, spec) for g in gids))
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
        return GraphHits()
    # Only the winners' fields are fetched (by the uuid index), one query per graph.
    wanted: dict[str, list[str]] = {}
    for i in top:
        wanted.setdefault(home[ids[i]], []).append(ids[i])
    limit_bytes = store.settings.max_item_bytes
    fetched = await asyncio.gather(*(fetch_items(store, g, u, limit_bytes)
                                     for g, u in wanted.items()))
    rows: dict[str, list] = {}
    why: dict[str, str] = {}
    for got, too_big in fetched:
        rows.update((r[0], r) for r in got)
        why.update((u, f"a field over the limit of {limit_bytes} bytes (GRAPHMEM_MAX_ITEM_BYTES)")
                   for u in too_big)
    hits = []
    for i in top:
        row = rows.get(ids[i])
        if row is None:
            continue  # deleted since, or over the limit (``why``)
        try:
            hits.append(_hit(row, fused[i] / best, limit_bytes))
        except ValueError as exc:  # pydantic's errors too: a node another program wrote
            why[ids[i]] = str(exc).splitlines()[0]
    return GraphHits(hits, await _refusals(store, why, home))


async def _refusals(store: Any, why: dict[str, str], home: dict[str, str]) -> dict[str, Refusal]:
    """The refused winners with their graph and content hash (read only when there are any)."""
    by_graph: dict[str, list[str]] = {}
    for uuid in why:
        by_graph.setdefault(home[uuid], []).append(uuid)
    found = await asyncio.gather(*(node_hashes(store, g, u) for g, u in by_graph.items()))
    return {u: Refusal(g, digests.get(u, "None"), why[u])
            for (g, us), digests in zip(by_graph.items(), found) for u in us}


async def _same_embedder(store: Any, gids: list[str], strict: bool) -> list[str]:
    """The graphs whose vectors our embedder can compare with. A graph of another embedder is an
    error when named (``strict``: project or spec scope), skipped with a warning in an
    every-project search (its cosines would fail the whole query)."""
    known = store.embedders
    todo = [g for g in gids if g not in known]
    if todo:
        found = await asyncio.gather(*(store.query(g, schema.META, ro=True) for g in todo))
        for g, res in zip(todo, found):
            rows = res.result_set if res is not None else []
            if rows:
                known[g] = (str(rows[0][0]), int(rows[0][1]), str(rows[0][2]))
    keep = []
    for g in gids:
        rec = known.get(g)
        err = store.mismatch(rec[2], rec[:2]) if rec else None
        if err is None:
            keep.append(g)
        elif strict:
            raise err
        else:
            log.warning("graph search skips %s: %s", g, err)
    return keep


async def _candidates(store: Any, gid: str, vec: list[float], ft: str, kinds: list[str] | None,
                      k: int, spec: str | None) -> tuple[list, list]:
    """One graph's best ``k`` ids by cosine and by full text, as (uuid, score) pairs."""
    # Only nodes of our kinds: another program's nodes are no candidates, and cost no warning
    # on every search (a node of ours that fails its checks is left out and returned as refused).
    where = "WHERE n.gm_kind IN $kinds" + (" AND n.gm_spec = $spec" if spec else "")
    params = {"vec": vec, "k": k, "kinds": list(kinds or KINDS), "q": ft, "spec": spec or ""}
    # Ids and scores only: projecting fields (let alone vectors) for every candidate costs
    # more than the ranking itself; the winners' fields are fetched afterwards.
    # A node without a vector (written by another program) has no cosine: not a candidate.
    vq = (f"WITH {schema.VEC.format('$vec')} AS q MATCH (n:Entity) {where} "
          f"AND n.name_embedding IS NOT NULL WITH n, "
          f"vec.cosineDistance(n.name_embedding, q) AS d ORDER BY d ASC LIMIT $k "
          f"RETURN n.uuid, 1 - d")
    tq = (f"CALL db.idx.fulltext.queryNodes('Entity', $q) YIELD node AS n, score {where} "
          f"WITH n, score ORDER BY score DESC LIMIT $k RETURN n.uuid, score")
    runs = [store.query(gid, vq, params, ro=True)]
    if ft:
        # RediSearch's TF-IDF ranks a document with two frequent words above one with every
        # word of the query, so documents holding all the words come first (AND, then OR).
        runs.append(store.query(gid, tq, {**params, "q": ft.replace(" | ", " ")}, ro=True))
        if " | " in ft:
            runs.append(store.query(gid, tq, params, ro=True))
    results = await asyncio.gather(*runs)
    found = [res.result_set if res is not None else [] for res in results]
    text: list[tuple[str, float]] = []
    seen: set[str] = set()
    for tier, rows in enumerate(found[1:]):
        for uuid, score in rows:
            if uuid not in seen:
                seen.add(uuid)
                text.append((uuid, float(score) + (1e6 if tier == 0 else 0.0)))
    return [(u, float(s)) for u, s in found[0] if isinstance(s, (int, float))], text[:k]


def _hit(row: list, score: float, max_bytes: int) -> Hit:
    """A checked row as a hit (``foreign.py``); a ValueError for a node that is not a graphmem
    item."""
    # paths out of the project are dropped, not refused: this home's graph may hold items
    # written before project keys, with absolute paths (``local_path`` is then the root)
    return Hit(score=score, project=row[3] or "", backend="graph",
               **fields(row, max_bytes, strict_paths=False))
