"""The project's code in its graph: File and Symbol entities, memories linked to them by ``ABOUT``.

Written with each batch of items (``writes.write_batch``, so through the same outbox path as
every graph write) from the files: an item's own anchors (``memory/anchors.jsonl``) and its
validity (``memory/validity.jsonl``). In Graphiti's schema, per project graph (``group_id``)::

    (:Entity:File {gm_code: "file", gm_path, gm_blob})
    (:Entity:Symbol {gm_code: "symbol", gm_path, gm_symbol})
    (memory)-[:RELATES_TO {name: "ABOUT", valid_at, invalid_at, expired_at, gm_*}]->(File|Symbol)
    (File)-[:RELATES_TO {name: "DEFINES"}]->(Symbol)
    (old File)-[:RELATES_TO {name: "RENAMED_TO", valid_at}]->(new File)

``valid_at`` is when the memory was written; a retired or superseded memory's edges get
``invalid_at`` (when it stopped being true) and ``expired_at`` (when graphmem learned that), so
a Graphiti query filtering on them sees the validity the files hold. Code nodes have no
``gm_kind``: searches for memories never return them. Only ``embedder`` is needed.
"""

from __future__ import annotations

from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from ..models import MemoryItem
from graphmem.graph import schema
from .schema import derived_id

HISTORY = ("retired", "superseded")
EDGE_FIELDS = ("gm_path", "gm_blob", "gm_symbol", "gm_digest", "gm_lines", "gm_head",
               "gm_learned_at", "gm_validity", "gm_by", "gm_reason", "gm_event_at",
               "gm_recorded_at")

CODE_EDGES = schema.edges_query("s")  # an ABOUT edge's vector is its memory's (the source)
RENAME_NODES = """UNWIND $rows AS r
MERGE (n:Entity:File {uuid: r.uuid})
ON CREATE SET n = r.props, n.name_embedding = """ + schema.VEC.format("r.vec")
DROP_ABOUT = """MATCH (m:Entity)-[e:RELATES_TO]->(:Entity) WHERE m.uuid IN $ids AND e.name = 'ABOUT'
DELETE e"""


def file_uuid(gid: str, path: str) -> str:
    """The File node of ``path`` in one graph."""
    return derived_id(gid, "code-file", path)


def symbol_uuid(gid: str, path: str, symbol: str) -> str:
    """The Symbol node of ``symbol`` defined in ``path``."""
    return derived_id(gid, "code-symbol", path, symbol)


def spec_dir_of(item: MemoryItem) -> Path | None:
    """The spec folder on this machine holding ``item`` (None: its project's root is unknown)."""
    from ..code.roots import ROOTS

    root = ROOTS.get(item.project)
    return root / item.spec if root is not None and item.spec else None


def _own_anchors(item: MemoryItem) -> tuple[dict | None, list[dict]]:
    from ..code.anchors import book

    spec = spec_dir_of(item)
    rec = book(spec).records.get(item.id) if spec is not None else None
    if rec is None:
        return None, []
    return rec, [a for a in rec.get("anchors") or [] if isinstance(a, dict) and not a.get("via")
                 and not a.get("glob") and isinstance(a.get("path"), str)]  # a pattern: no file


def build_code_rows(gid: str, items: list[MemoryItem], snap: Any) -> dict[str, Any]:
    """File and Symbol nodes, ABOUT / DEFINES / RENAMED_TO edges for one batch (no vectors yet)."""
    from ..code.freshness import anchor_state
    from graphmem.files.validity_log import validity_log

    now = datetime.now(timezone.utc).isoformat(timespec="seconds")
    files: dict[str, dict] = {}
    symbols: dict[str, dict] = {}
    edges: list[dict] = []

    def file_node(path: str, blob: str | None) -> str:
        u = file_uuid(gid, path)
        files.setdefault(u, {"uuid": u, "name": path, "props": {
            "uuid": u, "name": path, "group_id": gid, "summary": f"file {path}", "created_at": now,
            "gm_code": "file", "gm_path": path,
            "gm_blob": (snap.files.get(path) if snap else None) or blob or ""}})
        return u

    for item in items:
        rec, own = _own_anchors(item)
        if not own:
            continue
        spec = spec_dir_of(item)
        assert rec is not None and spec is not None  # own anchors come from the spec's record
        ev = validity_log(spec).events.get(item.id) or {}
        state = ev.get("state")
        when = item.time.isoformat()
        for a in own:
            path, sym = a["path"], a.get("symbol")
            f = file_node(path, a.get("blob"))
            target = f
            if sym:
                target = symbol_uuid(gid, path, sym)
                symbols.setdefault(target, {"uuid": target, "name": sym, "props": {
                    "uuid": target, "name": sym, "group_id": gid, "summary": f"{sym} in {path}",
                    "created_at": now, "gm_code": "symbol", "gm_path": path, "gm_symbol": sym}})
                edges.append(_edge(gid, f, target, "DEFINES", f"{path} defines {sym}", now))
            props = _edge(gid, item.id, target, "ABOUT", item.text, rec.get("at") or when)["props"]
            props.update({"uuid": derived_id(item.id, target, "about"), "valid_at": when,
                          "gm_id": item.id, "gm_path": path, "gm_blob": a.get("blob"),
                          "gm_symbol": sym, "gm_digest": a.get("digest"), "gm_lines": a.get("lines"),
                          "gm_head": rec.get("head"), "gm_learned_at": rec.get("at"),
                          "gm_validity": state, "gm_by": ev.get("by"), "gm_reason": ev.get("reason"),
                          "gm_event_at": ev.get("invalid_at"), "gm_recorded_at": ev.get("recorded_at")})
            if state in HISTORY:
                props["invalid_at"], props["expired_at"] = ev.get("invalid_at"), ev.get("recorded_at")
            edges.append({"source": item.id, "target": target,
                          "props": {k: v for k, v in props.items() if v is not None}})
            if snap is not None and not sym:
                moved = anchor_state({"path": path, "blob": a.get("blob")}, snap,
                                     rec.get("head")).get("to")
                if moved:
                    edges.append(_edge(gid, f, file_node(moved, None), "RENAMED_TO",
                                       f"{path} was renamed to {moved}", now))
    return {"files": list(files.values()), "symbols": list(symbols.values()), "edges": edges,
            "ids": sorted({i.id for i in items})}


def _edge(gid: str, source: str, target: str, name: str, fact: str, when: str) -> dict:
    return {"source": source, "target": target, "props": {
        "uuid": derived_id(source, target, name.lower()), "name": name, "fact": fact,
        "group_id": gid, "episodes": [], "created_at": when, "valid_at": when}}


async def write_code(store: Any, gid: str, project: str, items: list[MemoryItem]) -> None:
    """Write the code nodes and edges of a batch (raises GraphError like every graph write)."""
    from ..code.roots import ROOTS
    from ..code.tree import snapshot

    if not any(_own_anchors(i)[1] for i in items):
        return  # no query at all for a batch naming no code
    try:
        snap = snapshot(ROOTS[project])
    except OSError:
        snap = None
    rows = build_code_rows(gid, items, snap)
    nodes = rows["files"] + rows["symbols"]
    vectors = schema.as_vectors(await store.embedder.embed([n["props"]["summary"] for n in nodes]))
    for n, v in zip(nodes, vectors):
        n["vec"] = v
    for label, group in (("File", rows["files"]), ("Symbol", rows["symbols"])):
        if group:
            await store.query(gid, schema.nodes_query(label, written=False), {"rows": group})
    await store.query(gid, DROP_ABOUT, {"ids": rows["ids"]})
    if rows["edges"]:
        await store.query(gid, CODE_EDGES, {"rows": rows["edges"]})


async def write_renames(store: Any, gid: str, renames: list[tuple[str, str, str]]) -> int:
    """RENAMED_TO edges (with their File nodes) for renames git saw, ``(old, new, when)``;
    ``valid_at`` is the rename's commit time. Raises GraphError like every graph write."""
    if not renames:
        return 0
    now = datetime.now(timezone.utc).isoformat(timespec="seconds")
    files: dict[str, dict] = {}
    for path in {p for old, new, _ in renames for p in (old, new)}:
        u = file_uuid(gid, path)
        files[u] = {"uuid": u, "name": path, "props": {
            "uuid": u, "name": path, "group_id": gid, "summary": f"file {path}", "created_at": now,
            "gm_code": "file", "gm_path": path}}
    nodes = list(files.values())
    vectors = schema.as_vectors(await store.embedder.embed([n["props"]["summary"] for n in nodes]))
    for n, v in zip(nodes, vectors):
        n["vec"] = v
    # MERGE keeps a File node's blob when it already has one (nodes_query would overwrite it)
    await store.query(gid, RENAME_NODES, {"rows": nodes})
    edges = [_edge(gid, file_uuid(gid, old), file_uuid(gid, new), "RENAMED_TO",
                   f"{old} was renamed to {new}", when or now) for old, new, when in renames]
    await store.query(gid, CODE_EDGES, {"rows": edges})
    return len(edges)


async def about_mentions(store: Any, project: str, target: str, snap: Any) -> list:
    """``about``'s mentions from the graph: the memories whose ABOUT edges reach ``target``
    (its File node, a File whose content moved there, a Symbol of that name)."""
    from ..code.mention import Mention, matches

    gid = schema.group_id(project)  # the project's key
    res = await store.query(gid, "MATCH (f:File) WHERE f.gm_code = 'file' RETURN f.gm_path", ro=True)
    known = [r[0] for r in res.result_set] if res is not None else []
    renamed = await store.query(
        gid, "MATCH p = (a:File)-[:RELATES_TO*1..10]->(b:File {gm_path: $t}) "
             "WHERE all(x IN relationships(p) WHERE x.name = 'RENAMED_TO') RETURN a.gm_path",
        {"t": target}, ro=True)
    earlier = {r[0] for r in renamed.result_set} if renamed is not None else set()
    paths = {target, *(p for p in known if p not in snap.files), *earlier}
    fields = ", ".join(f"e.{f}" for f in EDGE_FIELDS)
    res = await store.query(gid, (
        "MATCH (m:Entity)-[e:RELATES_TO]->(c:Entity) WHERE e.name = 'ABOUT' AND (c.gm_path IN "
        "$paths OR c.gm_symbol = $t OR c.gm_symbol ENDS WITH $dot OR c.gm_path + ':' + "
        f"c.gm_symbol = $t OR c.gm_symbol IN $here) RETURN m.uuid, {fields}, e.invalid_at, "
        "e.expired_at"),
        {"paths": sorted(paths), "t": target, "dot": "." + target,
         "here": sorted({s.name for s in snap.symbols(target)})}, ro=True)  # moved in: matches
    found: dict[str, list[dict]] = {}
    for row in res.result_set if res is not None else []:
        a = _anchor(row)
        if a["path"] in earlier or matches(a, target, snap):  # earlier: git's renames, edited too
            found.setdefault(row[0], []).append(a)
    if not found:
        return []
    res = await store.query(gid, (
        "MATCH (m:Entity)-[e:RELATES_TO]->(:Entity) WHERE e.name = 'ABOUT' AND m.uuid IN $ids "
        f"RETURN m.uuid, {fields}, e.invalid_at, e.expired_at"), {"ids": sorted(found)}, ro=True)
    rows: dict[str, list] = {}
    for row in res.result_set if res is not None else []:
        rows.setdefault(row[0], []).append(row)
    out = []
    for item_id, matched in found.items():
        first = rows[item_id][0]
        meta = dict(zip(EDGE_FIELDS, first[1:]))
        validity = None
        if meta["gm_validity"]:
            validity = {"state": meta["gm_validity"], "by": meta["gm_by"],
                        "reason": meta["gm_reason"], "invalid_at": meta["gm_event_at"],
                        "recorded_at": meta["gm_recorded_at"]}
        out.append(Mention(item_id, [_anchor(r) for r in rows[item_id]], matched,
                           meta["gm_head"], meta["gm_learned_at"], validity))
    return out


def _anchor(row: list) -> dict:
    meta = dict(zip(EDGE_FIELDS, row[1:]))
    a = {"path": meta["gm_path"], "blob": meta["gm_blob"]}
    if meta["gm_symbol"]:
        a.update(symbol=meta["gm_symbol"], digest=meta["gm_digest"], lines=meta["gm_lines"])
    return a
