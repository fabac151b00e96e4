"""``about(path_or_symbol)``: everything known about one file or symbol, current first, then history.

A memory is *about* a target when one of its own anchors (``anchors.jsonl``, not the ``via``
session ones) names the target's path, a path whose content now sits at the target (a rename),
or a symbol of that name (``Client.charge`` or just ``charge``). Each entry carries its
freshness (``freshness.item_state`` over the item's own anchors) and its validity
(``validity.jsonl``). Three lists: ``current`` (neither retired nor superseded, and their code
is still there: current, changed or moved), newest first; ``gone`` (neither retired nor
superseded, but the code they describe is gone), newest first; ``history`` (retired and
superseded ones), oldest to newest.

The same answer comes from two places: the files (anchors + validity logs, this module) and,
with the graph on, the project's graph (``ABOUT`` edges with Graphiti's ``valid_at`` /
``invalid_at`` / ``expired_at``, ``graph/code_graph.py``). Both are reduced to the same
``Mention`` rows and finished here by ``assemble``.

A symbol no file defines any more may have been removed by a recorded piece of work
(``changes.py``): ``removals`` says which session removed it, at which commit, with that
session's memories.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, Callable, Iterable

from ..errors import ValidationError
from .freshness import describe_move, item_state, moves_of, reverted_note, work_gone
from .mention import Mention, homes, matches  # what the graph reads too (graph/code_graph.py)
from .code_tuning import current
from .tree import Snapshot

log = logging.getLogger("graphmem.code")
HISTORY = ("retired", "superseded")
UNREVIEWED = ("pending", "rejected")  # held for review, or rejected by a person: left out
STATES_FILE = "anchor_states.json"


def check_target(target: Any, project_dir: Path | None) -> str:
    """A relative path or symbol name; an absolute path inside the project is made relative."""
    most = current().max_target
    if not isinstance(target, str) or not target.strip() or len(target) > most \
            or "\x00" in target or any(0xD800 <= ord(c) <= 0xDFFF for c in target):
        raise ValidationError(f"must be a file path (relative to the project) or a symbol name, "
                              f"1-{most} characters", field="path_or_symbol")
    t = target.strip()
    if "/" in t or "\\" in t:  # a path: as context(files=) reads it (models.project_path)
        from ..models import project_path

        try:
            t = project_path(t, project_dir)
        except ValueError as exc:  # ../x.py, or an absolute path outside the project
            raise ValidationError(str(exc), field="path_or_symbol") from None
    if (t == "." or t != target.strip()) and project_dir is not None and \
            (Path(project_dir) / t).is_dir():  # a path ("src/", "./src", "."), not a name
        raise ValidationError(f"{t} is a folder; about takes a file or a symbol. For the "
                              f"memories about files under it, use context with files=[\"{t}\"] "
                              f"(CLI: --file {t})", field="path_or_symbol")
    return t


def local_mentions(spec_dirs: Iterable[str | Path], target: str, snap: Snapshot) -> list[Mention]:
    """Mentions of ``target`` read from the spec folders' anchors and validity logs."""
    from graphmem.files.validity_log import validity_log
    from .anchors import book

    out: dict[str, Mention] = {}
    for spec in spec_dirs:
        events = validity_log(spec).events
        for item_id, rec in book(spec).records.items():
            own = [a for a in rec.get("anchors") or [] if isinstance(a, dict) and not a.get("via")]
            hit = [a for a in own if matches(a, target, snap, rec.get("head"))]
            if hit:
                out[item_id] = Mention(item_id, own, hit, rec.get("head"), rec.get("at"),
                                       _validity(events.get(item_id)))
    return list(out.values())


def moved_here(spec_dirs: Iterable[str | Path], paths: Iterable[str], snap: Snapshot,
               limit: int = 20) -> list[str]:
    """Ids of the items anchored elsewhere whose code now lives at one of ``paths`` (a file
    renamed there, a symbol moved there), newest first: what ``context(files=[new name])`` pins
    beside the items anchored there by that name."""
    from .anchors import book

    wanted = {p: None for p in paths if p in snap.files}  # a folder's files: many
    here = {s.name for p in wanted for s in snap.symbols(p)}  # only these can have moved in

    def candidate(a: dict) -> bool:
        return isinstance(a, dict) and a.get("path") not in wanted and not a.get("via") and (
            a.get("symbol") in here if a.get("symbol") else a.get("path") not in snap.files)

    found: dict[str, str] = {}
    for spec in spec_dirs if wanted else ():
        b = book(spec)
        ids = {i: None for name in here for i in b.by_symbol.get(name, ())}
        for old in _gone_files(b, snap):  # whole-file anchors: only paths no longer in the tree
            ids.update(b.file_items[old])
        for i in ids:
            rec = b.records.get(i) or {}
            if i not in found and any(candidate(a) and not wanted.keys().isdisjoint(
                    homes(a, snap, rec.get("head"))) for a in rec.get("anchors") or ()):
                found[i] = rec.get("at") or ""
    return sorted(found, key=lambda i: found[i], reverse=True)[:limit]


def _gone_files(b: Any, snap: Snapshot) -> list[str]:
    """The paths ``b`` anchors whole files at that are not in the tree now and may live on
    elsewhere (an anchored blob is in the tree, or git saw the path renamed): kept per
    (snapshot, lines the book read), so a call reads an index, not every anchor."""
    key = (b.ino, b.offset)
    memo = snap.__dict__.setdefault("_gone_files", {})
    got = memo.get(id(b))
    if got is not None and got[0] == key:
        return got[1]
    renamed = _renamed_paths(snap)
    out = [p for p, blobs in b.file_items.items() if p not in snap.files and (
        p in renamed or any(blob in snap.by_blob for blob in b.file_blobs.get(p, ())))]
    memo[id(b)] = (key, out)
    return out


def _renamed_paths(snap: Snapshot) -> set[str] | dict:
    """Paths git saw renamed in the history up to the snapshot's HEAD."""
    from .history import history

    hist = history(snap.root, snap.head) if snap.git and snap.head else None
    return hist.renamed if hist is not None else {}


def removals(spec_dirs: Iterable[str | Path], target: str,
             rows_of: Callable[[list[str]], list[Any]], limit: int = 3) -> list[dict]:
    """The recorded works that removed symbol ``target`` (``refund``, ``Client.charge``,
    ``src/pay.py:refund``, or a method's own name): ``{"symbol", "paths", "commit", "at",
    "sessions", "memories": [{"id", "kind", "text", "session"}]}``, newest first."""
    from .anchors import book

    path, _, name = target.rpartition(":") if ":" in target else ("", "", target)
    out: list[dict[str, Any]] = []
    for spec in spec_dirs:
        works = book(spec).works
        for sym, head in works.removed_by.items():
            w = works.by_head.get(head)
            if w is None or not (sym == name or sym.endswith("." + name)):
                continue
            paths = sorted(p for p, names in w["removed"].items() if sym in names)
            if path and path not in paths:
                continue
            out.append({"symbol": sym, "paths": paths, "commit": head, "at": w.get("at"),
                        "sessions": list(w["sessions"]), "items": list(reversed(w["items"]))})
    out.sort(key=lambda e: e["at"] or "", reverse=True)
    out = out[:limit]
    rows = {r.id: r for r in rows_of([i for e in out for i in e["items"]])} if out else {}
    for e in out:
        e["memories"] = [{"id": i, "kind": rows[i].kind, "text": rows[i].text,
                          "session": rows[i].session} for i in e.pop("items") if i in rows][:5]
    return out


def unknown_note(target: str, snap: Snapshot, root: str | Path | None) -> str | None:
    """What ``about`` says of a target that nothing names and the project does not have (a
    typo shows); None when the project has it (a file or a symbol with no memory yet)."""
    import os

    path, _, sym = target.rpartition(":") if ":" in target and "/" in target else ("", "", target)
    if path:  # src/pay.py:refund
        defs = snap.definitions.get(sym) or []
        if any(p == path for p, _ in defs):
            return None
        return f"nothing is known about {target}: {path} does not define {sym} and no memory names it"
    if target in snap.files or root is not None and os.path.exists(os.path.join(root, target)):
        return None
    if "/" in target:
        return f"nothing is known about {target}: it is not in the project and no memory names it"
    if target in snap.definitions or any(k.endswith("." + target) for k in snap.definitions):
        return None
    return f"nothing is known about {target}: no file of the project defines it and no memory names it"


def _validity(ev: dict | None) -> dict | None:
    if not ev:
        return None
    return {k: ev.get(k) for k in ("state", "by", "reason", "invalid_at", "recorded_at")}


def assemble(mentions: list[Mention], rows: dict[str, Any], snap: Snapshot, target: str,
             source: str, works_of: Callable[[Any], Any] | None = None) -> dict:
    """The answer: ``{"target", "source", "current": [...], "gone": [...], "history": [...]}``
    (see the module docstring); ``rows`` are
    the memories as the local index holds them (id -> ``Hit``); ``works_of(row)``, the work
    lines of its spec (``changes.Works``), gives the same ``work_gone`` mark as a search."""
    current: list[dict[str, Any]]
    gone: list[dict[str, Any]]
    current, gone, history = [], [], []
    for m in mentions:
        row = rows.get(m.id)
        if row is None:  # anchored but no longer held by the files (a replaced insight)
            continue
        if (m.validity or {}).get("state") in UNREVIEWED:
            continue  # waiting for review, or rejected: not memory yet (files/review_log.py)
        rec = {"anchors": m.anchors, "head": m.head, "at": m.learned_at,
               "items": [f"{source}:{m.id}"]}  # memo key per source
        fresh = work_gone(item_state(rec, snap), rec, row, works_of(row) if works_of else None,
                          snap)
        entry = {"id": m.id, "kind": row.kind, "text": row.text, "spec": row.spec,
                 "session": row.session, "valid_at": _iso(row.time),
                 "learned_at": m.learned_at,
                 "anchors": [_short(a) for a in m.matched],
                 "freshness": {k: fresh[k] for k in ("state", "reason", "moved", "moves",
                                                     "changed", "gone", "symbols_changed",
                                                     "commits", "work_gone", "undone",
                                                     "changed_since", "members_changed")
                               if k in fresh},  # the keys a search hit's freshness has
                 "validity": m.validity}
        if (m.validity or {}).get("state") in HISTORY:
            history.append(entry)
        else:  # not retired: is what it says about the code still about code that is there?
            (gone if fresh["state"] == "gone" else current).append(entry)
    for part in (current, gone):
        part.sort(key=lambda e: (e["valid_at"] or "", e["id"]), reverse=True)
    history.sort(key=lambda e: (e["valid_at"] or "", (e["validity"] or {}).get("invalid_at") or "",
                                e["id"]))
    return {"target": target, "source": source, "current": current, "gone": gone,
            "history": history}


def _short(a: dict) -> dict:
    return {k: a[k] for k in ("path", "symbol") if a.get(k)}


def _iso(value: Any) -> str | None:
    if value is None:
        return None
    return value.isoformat() if hasattr(value, "isoformat") else str(value)


def last_renames_head(spec: str | Path) -> str | None:
    """The HEAD up to which a spec's refresh sent renames to the graph (None: never)."""
    import json

    try:
        got = json.loads((Path(spec) / "memory" / STATES_FILE).read_text())
    except (OSError, ValueError):
        return None
    head = got.get("renames_head") if isinstance(got, dict) else None
    return head if isinstance(head, str) else None


def pending_renames(project: Path, specs: list, head: str,
                    previous: dict[str, str | None]) -> list[tuple[str, str, str]]:
    """Renames since the oldest refresh that sent some (the whole window when one never did),
    of files the specs' anchors name, and the later renames of those files' new names."""
    from .anchors import book
    from .history import renames

    heads = set(previous.values())
    since = heads.pop() if len(heads) == 1 else None
    if since == head:
        return []
    relevant = {p for s in specs for p in book(s).by_path}
    out = []
    for old, new, when in renames(project, since, head):
        if old in relevant:
            out.append((old, new, when))
            relevant.add(new)
    return out


def format_about(ans: dict, emit: Callable[[str], None] = print) -> None:
    """The human form of an ``about`` answer (the CLI's)."""
    def line(e: dict) -> str:
        f = e["freshness"]
        extra = ""
        moves = moves_of(f)
        if f["state"] == "moved" and moves:
            extra = ": " + ", ".join(dict.fromkeys(describe_move(m) for m in moves))
            if f["changed"]:  # renamed and mostly rewritten in one commit
                extra += "; " + ", ".join(f["changed"]) + " changed since"
            if f.get("reason"):  # and some of the rest of its code is gone
                extra += "; " + f["reason"]
        elif f["state"] == "changed" and (f["changed"] or f.get("reason")):
            said = [", ".join(f["changed"]) + " changed since"] if f["changed"] else []
            extra = " (" + "; ".join([*said, *([f["reason"]] if f.get("reason") else [])]) + ")"
        elif f.get("reason") and f["state"] != "gone":  # current: less than most of it gone
            extra = f" ({f['reason']})"
        elif f["state"] == "gone" and f.get("undone"):
            extra = f" ({reverted_note(f)})"
        elif f["state"] == "gone" and f.get("work_gone"):
            w = f["work_gone"]
            extra = (f" ({len(w['files'])} of the {w['of']} files its work changed are no longer"
                     " in the tree)")
        v = e["validity"] or {}
        mark = " ".join(str(x) for x in (v.get("state"), v.get("by") and f"by {v['by']}",
                                          v.get("invalid_at") and f"at {v['invalid_at']}") if x)
        why = " ".join(str(v.get("reason") or "").split())  # one line, even from an old log
        if why == f"replaced by {v.get('by')}":  # supersede's default reason: "by" says it
            why = ""
        mark = f" [{mark}{': ' + why if why else ''}]" if v else ""
        return f"  [{f['state']}{extra}]{mark} {e['kind']}: {e['text']}  ({e['id']})"

    emit(f"About {ans['target']} (from the {ans['source']}):")
    for r in ans.get("removed") or ():
        sessions = [str(x) for x in r["sessions"] if x is not None]
        who = f"session {', '.join(sessions)}" if sessions else "a session graphmem did not record"
        emit(f"Removed: {r['symbol']} ({', '.join(r['paths'])}) by {who} at commit "
             f"{r['commit'][:12]}{' on ' + r['at'] if r.get('at') else ''}")
        for m in r["memories"]:  # a note written with no session: the commit's work holds it
            where = f" (session {m['session']})" if m.get("session") is not None else ""
            emit(f"  {m['kind']}{where}: {m['text']}  ({m['id']})")
    gone = ans.get("gone") or []
    if not ans["current"] and not gone and not ans["history"]:
        emit("  nothing known" if not ans.get("removed") else "No memory names it.")
        for note in ans.get("notes") or ():
            emit(f"Note: {note}.")
        return
    if ans["current"] or not gone:
        emit(f"Current ({len(ans['current'])}):")
    for e in ans["current"]:
        emit(line(e))
    if gone:
        emit(f"Code gone ({len(gone)}): not retired, but the code they describe is no longer "
             "in the tree")
        for e in gone:
            emit(line(e))
    if ans["history"]:
        emit(f"History, oldest first ({len(ans['history'])}):")
        for e in ans["history"]:
            emit(line(e))
