"""Hybrid search over project graphs: brute-force cosine and the full-text index per graph, fused
across graphs by RRF; only the winners' fields are fetched, and ``Hit`` s carry no vectors."""

from __future__ import annotations

import asyncio
import json
import logging
import re
import time
from datetime import datetime
from typing import Any, Callable

from ..models import Hit
from graphmem.graph import schema
from .schema import rrf

log = logging.getLogger("graphmem.graph")
SEARCH_RETRY = 1.0  # seconds after a failed connection before a search tries again
_STOP = {"a", "an", "and", "are", "as", "at", "be", "but", "by", "for", "if", "in", "into", "is",
         "it", "no", "not", "of", "on", "or", "such", "that", "the", "their", "then", "there",
         "these", "they", "this", "to", "was", "will", "with", "what", "how", "why", "when"}


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
                 exclude: Callable[[list[str]], set[str]] | None = None) -> list[Hit]:
    """``GraphStore.search``: hybrid search over each project's graph (every graphmem graph when
    ``projects`` is None), optionally within one spec; ``exclude`` drops candidate ids (the
    items the local index ranks itself) before any field is fetched."""
    if not query.strip():
        return []
    conn = store.conn
    if conn.client is None and time.monotonic() - conn.failed_at > SEARCH_RETRY \
            and conn.breaker.open_reason() is None:
        # A search tries a refused server again after a second, not after ``retry_after``:
        # a restarted server answers at once (a hung one trips the home's breaker instead).
        await conn.connect(force=True)
    gids = [schema.group_id(p) for p in projects] if projects is not None else await store.graphs()
    gids = await _same_embedder(store, gids, strict=projects is not None)
    if not gids:
        return []
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
        return []
    # Only the winners' fields are fetched (by the uuid index), one query per graph.
    wanted: dict[str, list[str]] = {}
    for i in top:
        wanted.setdefault(home[ids[i]], []).append(ids[i])
    fetched = await asyncio.gather(*(store.query(g, schema.ITEMS_BY_ID, {"ids": u}, ro=True)
                                     for g, u in wanted.items()))
    rows = {r[0]: r for res in fetched if res is not None for r in res.result_set}
    return [_hit(rows[ids[i]], fused[i] / best) for i in top if ids[i] in rows]


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
    return [(u, float(s)) for u, s in found[0]], text[:k]


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
