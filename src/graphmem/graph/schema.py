"""How MemoryItems map onto Graphiti's schema in FalkorDB (pure data; no I/O, no graphiti import).

Per project graph (``group_id`` from the project path) and per batch of items:

    (:Entity:Session|Spec)  anchor: the session that learned it, or the spec when no session
    (:Entity:<Kind>)        one node per MemoryItem, uuid = MemoryItem.id (so MERGE makes replays
                            idempotent); name, summary = the text, name_embedding, gm_* fields
    -[:RELATES_TO]->        anchor -> item, name = the relation, fact = the text, fact_embedding
    (:Episodic)             the batch as one episode, MENTIONS every node it touched
    (:GraphmemMeta)         the embedder name and dimension this graph's vectors come from
    (:GraphmemTombstone)    uuid of a deleted item and when (``gm_written``): other machines
                            sharing the server drop it from their local index (``team.py``)

Every write stamps ``gm_written`` with the server's clock (ms), the cursor other machines read
changes by.

Graphiti's own search reads these as ordinary entities, facts and episodes.
"""

from __future__ import annotations

import functools
import hashlib
import math
import json
import re
import unicodedata
from pathlib import Path
from typing import Any, Callable, Iterable

from ..models import MemoryItem, hash_id, stable_id

GROUP_PREFIX = "gm_"

_INSIGHT_RELATIONS = {
    "subtasks_completed": ("Subtask", "COMPLETED_SUBTASK"),
    "what_worked": ("Insight", "FOUND_WORKING"),
    "what_failed": ("Insight", "FOUND_FAILING"),
    "recommendations_for_next_session": ("Insight", "RECOMMENDS"),
}
_KIND_RELATIONS = {
    "file": ("File", "UNDERSTOOD_FILE"),
    "pattern": ("Pattern", "FOUND_PATTERN"),
    "gotcha": ("Gotcha", "ENCOUNTERED_GOTCHA"),
    "turn": ("Turn", "SAID"),
    "step": ("Step", "EXECUTED"),
    "fact": ("Fact", "STATES"),
    "insight": ("Insight", "LEARNED"),
}
LABELS = sorted({lab for lab, _ in (*_INSIGHT_RELATIONS.values(), *_KIND_RELATIONS.values())})


def group_id(project: str) -> str:
    """A graph name safe for FalkorDB and Graphiti: ``gm_<ascii slug>_<hash of the full path>``.

    Only ``[a-z0-9_]``: no hyphens or dots (RediSearch syntax), never a bare word like ``main``,
    and the hash keeps two folders with the same name apart.
    """
    name = Path(str(project)).name or "root"
    slug = unicodedata.normalize("NFKD", name).encode("ascii", "ignore").decode().lower()
    slug = re.sub(r"[^a-z0-9]+", "_", slug).strip("_")[:40] or "project"
    digest = hashlib.sha256(str(project).encode("utf-8", "surrogatepass")).hexdigest()[:10]
    return f"{GROUP_PREFIX}{slug}_{digest}"


def label_and_relation(item: MemoryItem) -> tuple[str, str]:
    """The node label and the edge name of an item's kind."""
    if item.kind == "insight" and item.metadata.get("field") in _INSIGHT_RELATIONS:
        return _INSIGHT_RELATIONS[item.metadata["field"]]
    return _KIND_RELATIONS[item.kind]


def derived_id(*parts: str) -> str:
    """A stable id from ids that are already canonical (no text normalisation needed)."""
    return hash_id(*parts)


def anchor_of(item: MemoryItem) -> tuple[str, str, str]:
    """(uuid, label, name) of the node an item hangs from: its session, else its spec."""
    return _anchor(item.project, item.spec or "", item.session or "")


@functools.lru_cache(maxsize=4096)
def _anchor(project: str, spec: str, session: str) -> tuple[str, str, str]:
    spec_name = Path(spec).name if spec else Path(project).name
    if session:
        return (stable_id(project, spec, "session", session), "Session",
                f"session {session} of {spec_name}")
    return stable_id(project, spec, "spec"), "Spec", f"spec {spec_name}"


def _short_name(item: MemoryItem) -> str:
    if item.kind == "file" and isinstance(item.metadata.get("path"), str):
        return item.metadata["path"]
    text = " ".join(item.text.split())
    return text if len(text) <= 120 else text[:117] + "..."


class Vector(list):
    """A vector on the wire: integers, millionths of each component (``list.__repr__`` of ints
    is three times faster than of floats, and vector text is the bulk of every write). Cypher
    turns it back with ``VEC`` below; 6 digits keep cosine exact enough."""


SCALE = 1_000_000
VEC = "vecf32([x IN {} | x / 1000000.0])"  # Cypher: a wire Vector -> a float32 vector


def as_vectors(vectors: list[list[float]]) -> list[Vector]:
    """Vectors ready for the wire (see ``Vector``). Refuses NaN, infinity and ragged input."""
    import numpy as np

    arr = np.asarray(vectors, dtype=np.float64)
    if arr.ndim != 2 or not np.isfinite(arr).all():
        raise ValueError("embedder returned NaN, infinity or ragged vectors")
    return [Vector(row) for row in np.rint(arr * SCALE).astype(np.int64).tolist()]


def _str(v: str) -> str:
    return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _num(v: float) -> str:
    if v != v or v in (math.inf, -math.inf):
        raise ValueError("cannot send NaN or infinity to FalkorDB")
    return repr(v)


def _list(v: list) -> str:
    return "[" + ",".join([cypher_literal(x) for x in v]) + "]"


def _map(v: dict) -> str:
    return "{" + ",".join([f"`{k}`:{cypher_literal(x)}" for k, x in v.items()]) + "}"


# Exact-type dispatch: writes serialise ~10^5 values per batch, so isinstance chains add up.
_LITERALS: dict[type, Callable[[Any], str]]
_LITERALS = {str: _str, int: repr, float: _num, bool: lambda v: "true" if v else "false",
             type(None): lambda v: "null", Vector: list.__repr__, list: _list, tuple: _list,
             dict: _map}


def cypher_literal(value: Any) -> str:
    """A parameter value as Cypher text, like falkordb's own ``stringify_param_value`` but
    several times faster on vectors (the bulk of every write)."""
    fn = _LITERALS.get(type(value))
    if fn is None:
        raise TypeError(f"cannot send {type(value).__name__} to FalkorDB")
    return fn(value)


def with_params(cypher: str, params: dict[str, Any] | None) -> str:
    """``CYPHER name=value ... <query>``: the parameter header FalkorDB reads."""
    if not params:
        return cypher
    return "CYPHER " + " ".join(f"{k}={cypher_literal(v)}" for k, v in params.items()) + " " + cypher


def build_batch(gid: str, items: list[MemoryItem], vectors: dict[str, list[float]]) -> dict[str, Any]:
    """Rows for one batch of one project: anchors, item nodes by label, the episode, fact edges.

    ``vectors`` maps every item text and anchor name to its embedding (``as_vectors``). The
    fact edge reuses its item node's vector: the fact is the item's text.
    """
    anchors: dict[str, dict] = {}
    nodes: dict[str, list[dict]] = {}
    edges: list[dict] = []
    latest = max(i.time for i in items)
    ep_uuid = derived_id(gid, "episode", *sorted(i.id for i in items))
    for item in items:
        when = item.time.isoformat()
        a_uuid, a_label, a_name = anchor_of(item)
        anchors.setdefault(a_uuid, {"uuid": a_uuid, "label": a_label, "vec": vectors[a_name],
                                    "props": {"uuid": a_uuid, "name": a_name, "group_id": gid,
                                              "summary": a_name, "created_at": when,
                                              "gm_spec": item.spec or "", "gm_anchor": a_label}})
        label, relation = label_and_relation(item)
        vec = vectors[item.text]
        props = {"uuid": item.id, "name": _short_name(item), "group_id": gid, "summary": item.text,
                 "created_at": when, "gm_kind": item.kind, "gm_project": item.project,
                 "gm_spec": item.spec or "", "gm_session": item.session or "", "gm_time": when,
                 "gm_source": item.source, "gm_meta": json.dumps(item.metadata, default=str),
                 "gm_hash": feed_hash(item), "gm_author": str(item.metadata.get("author", "")),
                 "gm_host": str(item.metadata.get("host", ""))}
        if item.metadata.get("writer"):  # which home wrote it (``team.writer``): its owner
            props["gm_writer"] = str(item.metadata["writer"])
        nodes.setdefault(label, []).append({"uuid": item.id, "vec": vec, "props": props})
        edges.append({"source": a_uuid, "target": item.id, "props": {
            "uuid": derived_id(item.id, a_uuid, "fact"), "name": relation, "fact": item.text,
            "group_id": gid, "episodes": [ep_uuid], "created_at": when, "valid_at": when,
            "gm_id": item.id, "gm_kind": item.kind}})
    mentions = [{"node": u, "uuid": derived_id(ep_uuid, u), "group_id": gid,
                 "created_at": latest.isoformat()} for u in [*anchors, *(i.id for i in items)]]
    episode = {"uuid": ep_uuid, "name": f"graphmem {len(items)} item(s)", "group_id": gid,
               "source": "text", "source_description": "graphmem structured memory",
               "content": "\n".join(f"{i.kind}: {i.text}" for i in items),
               "entity_edges": [e["props"]["uuid"] for e in edges],
               "created_at": latest.isoformat(), "valid_at": latest.isoformat(),
               "gm_spec": items[0].spec or ""}
    return {"anchors": list(anchors.values()), "nodes": nodes, "edges": edges,
            "episode": episode, "mentions": mentions}


def texts_to_embed(items: list[MemoryItem]) -> list[str]:
    """Every distinct text a batch needs a vector for (item texts and anchor names)."""
    seen: dict[str, None] = {}
    for item in items:
        seen.setdefault(item.text)
        seen.setdefault(anchor_of(item)[2])
    return list(seen)


def rrf(rankings: Iterable[list[int]], n: int, k: int = 60) -> list[float]:
    """Reciprocal-rank fusion: each ranking lists item positions, best first."""
    scores = [0.0] * n
    for ranking in rankings:
        for rank, idx in enumerate(ranking):
            scores[idx] += 1.0 / (k + rank + 1)
    return scores


# ---- Cypher ---------------------------------------------------------------------------------
CODE_LABELS = ("File", "Symbol")  # code nodes (``code_graph.py``)


@functools.lru_cache(maxsize=None)
def nodes_query(label: str, written: bool = True) -> str:
    """Nodes of one label, merged by uuid, their vector from ``r.vec`` (labels cannot be
    parameters; they come from ``LABELS`` only). ``written``: stamped with the server's clock,
    the change feed's cursor (memories and their anchors; code nodes are not in the feed)."""
    assert label in LABELS or label in ("Session", "Spec") or label in CODE_LABELS
    return (f"UNWIND $rows AS r\nMERGE (n:Entity {{uuid: r.uuid}})\nSET n:{label}\nSET n = r.props\n"
            + ("SET n.gm_written = timestamp()\n" if written else "")
            + "SET n.name_embedding = " + VEC.format("r.vec"))


EPISODE = """MERGE (ep:Episodic {uuid: $episode.uuid})
SET ep = $episode
WITH ep
UNWIND $mentions AS m
MATCH (n:Entity {uuid: m.node})
MERGE (ep)-[e:MENTIONS {uuid: m.uuid}]->(n)
SET e.group_id = m.group_id, e.created_at = m.created_at"""


def edges_query(vector_of: str = "t") -> str:
    """Fact edges merged by uuid between existing nodes; the edge's vector is its target's
    (``t``: the item a memory's anchor points at) or its source's (``s``: the memory an ABOUT
    edge starts from)."""
    assert vector_of in ("s", "t")
    return ("UNWIND $rows AS r\nMATCH (s:Entity {uuid: r.source})\nMATCH (t:Entity {uuid: r.target})\n"
            "MERGE (s)-[e:RELATES_TO {uuid: r.props.uuid}]->(t)\nSET e = r.props\n"
            f"SET e.fact_embedding = {vector_of}.name_embedding")


EDGES = edges_query("t")
META = "MATCH (m:GraphmemMeta) RETURN m.embedder, m.dimension, m.project"
CLAIM = ("MERGE (m:GraphmemMeta {key: 'graph'}) SET m.embedder = $name, m.dimension = $dim, "
         "m.project = $project, m.schema = 1")

HIT_FIELDS = ("n.uuid, n.gm_kind, n.summary, n.gm_project, n.gm_spec, n.gm_session, n.gm_time, "
              "n.gm_meta, n.gm_source")
# Reading nodes anyone with the password may have written: each field comes back as a list of
# one string, or empty when it is missing or not a string (a number or a list, which would make
# any string function fail the whole query); ``ITEM_SIZES`` gives each node's longest string
# field and their sum (characters), so that a node over the size limit is never sent whole.
_FIELDS = [f.strip() for f in HIT_FIELDS.split(",")][1:]
_STRINGS = "[v IN [{}] WHERE typeOf(v) = 'String']"
CHECKED_ITEMS_BY_ID = ("MATCH (n:Entity) WHERE n.uuid IN $ids RETURN n.uuid, "
                       + ", ".join(_STRINGS.format(f) for f in _FIELDS))
# The same in one read for a few ids (a search's winners): a field over $max comes back [null].
_CLIPPED = "[v IN [{}] WHERE typeOf(v) = 'String' | CASE WHEN size(v) > $max THEN null ELSE v END]"
CLIPPED_ITEMS_BY_ID = ("MATCH (n:Entity) WHERE n.uuid IN $ids RETURN n.uuid, "
                       + ", ".join(_CLIPPED.format(f) for f in _FIELDS))
HASHES_BY_ID = "MATCH (n:Entity) WHERE n.uuid IN $ids RETURN n.uuid, n.gm_hash"
ITEM_SIZES = ("MATCH (n:Entity) WHERE n.uuid IN $ids WITH n, "
              + _STRINGS.format(", ".join(_FIELDS)) + " AS f RETURN n.uuid, "
              "reduce(m = 0, x IN f | CASE WHEN size(x) > m THEN size(x) ELSE m END), "
              "reduce(t = 0, x IN f | t + size(x))")
# A node this home wrote (``team.owner``): by its writer, or, written before writers were
# stamped, by its host.
MINE = "(n.gm_writer = $writer OR (n.gm_writer IS NULL AND n.gm_host = $host))"


# ---- team: what changed since a cursor (``team.py``) ----------------------------------------
TEAM_INDEXES = ("CREATE INDEX FOR (n:Entity) ON (n.gm_written)",
                "CREATE INDEX FOR (t:GraphmemTombstone) ON (t.uuid)",
                "CREATE INDEX FOR (t:GraphmemTombstone) ON (t.gm_written)")
# Pages ordered by (gm_written, uuid), each starting after the (t, u) of the row before; the
# first condition lets the range index on gm_written narrow the scan.
_AFTER = "n.gm_written >= $t AND (n.gm_written > $t OR n.uuid > $u)"
CHANGED_ITEMS = ("MATCH (n:Entity) WHERE n.gm_kind IS NOT NULL AND " + _AFTER
                 + " RETURN n.uuid, n.gm_hash, n.gm_written ORDER BY n.gm_written, n.uuid LIMIT $page")
CHANGED_TOMBSTONES = ("MATCH (n:GraphmemTombstone) WHERE " + _AFTER
                      + " RETURN n.uuid, n.gm_written ORDER BY n.gm_written, n.uuid LIMIT $page")
AFTER_ALL = "~~~~"  # as a cursor's uuid: past every id written at that ms (ids are [0-9a-f-])
TOMBSTONE_IDS = """UNWIND $ids AS id
MERGE (t:GraphmemTombstone {uuid: id})
SET t.gm_written = timestamp()"""
TOMBSTONE_SPEC = """MATCH (n:Entity) WHERE n.gm_spec = $spec AND n.gm_kind IS NOT NULL
MERGE (t:GraphmemTombstone {uuid: n.uuid})
SET t.gm_written = timestamp()"""


def owned(cypher: str, owner: tuple[str, str] | None) -> str:
    """``cypher``'s first ``WHERE`` narrowed to the nodes of ``owner`` ((writer, host), the
    ``$writer`` and ``$host`` parameters), or unchanged for None (a graph of one home)."""
    return cypher if owner is None else cypher.replace(" WHERE ", f" WHERE {MINE} AND ", 1)


def feed_hash(item: MemoryItem) -> str:
    """The hash a teammate's pull compares (``team.pull``): the text's, and the validity state
    the item was shared with (``team.stamp``), so a retire or supersede reaches the other homes
    as a changed item."""
    shared = item.metadata.get("shared_validity")
    state = shared.get("state") if isinstance(shared, dict) else None
    return item.content_hash() if not state else hash_id(item.content_hash(), str(state))[:16]
