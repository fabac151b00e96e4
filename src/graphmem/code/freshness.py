"""Freshness at read time: is the code a memory talks about still as it was when it was learned?

For a whole result list at once, against one ``Snapshot`` of the project (cached against HEAD and
the git index), each anchor is:

- ``current``: the file has the same blob; for a symbol, its own lines are the same (the file
  may have changed elsewhere: ``edited``; for a class, only its methods may have:
  ``members_changed``); for a whole file, at least ``keep_share`` of the
  lines the memory saw are still there (``history.kept_shares``);
- ``changed``: the symbol's own lines changed (the item lists it under ``symbols_changed``),
  or most of the file was rewritten (or, outside git, its content differs);
- ``moved``: the file is gone but its content is now at another path, or git saw it renamed
  since (``-M``: renamed and edited in one commit, ``history.History.follow``; its new path is
  also ``changed`` when most of it was rewritten), or the symbol is now defined (only) in another
  file; the anchor carries the current ``to`` path. An item lists them in ``moves``
  (``{"from", "to", "what": "file"|"symbol", "symbol"?, "left"?, "renamed"?}``; ``left``: a
  symbol's old file is no longer in the tree; ``renamed``: and at least ``renamed_share`` of that
  file's lines are in the new one, so the file was renamed rather than the function moved out
  of a deleted file; ``describe_move`` words each) and, as before, in ``moved`` (old path ->
  new path);
- ``gone``: the file or the symbol is defined nowhere.

Every anchored file whose blob differs also gets the number of commits that touched it since
the anchor's HEAD (``commits``: path -> count, ``history.History``).

An item's state is a stale mark only when what the item says no longer holds (issue 34 item 3:
on entire-cli's dump of every top-10 hit, "some of its files gone" marked 51 current hits for 6
stale ones, a session's file renamed 16 for 22, a session's files rewritten 3 for 1). It comes
from its own anchors (the paths and symbols its text names) or, when it names none, from its
session's files: ``gone`` when all of its own anchors are gone (for an item naming none: all of
its session's files, or every one of the ``min_touched`` or more symbols its session added or
changed); ``changed`` when more than half of its own anchors are gone, with ``reason`` naming
them ("src/c.py is gone"; on pytest's dump exactly half, as in "replace X with Y", marked 19
current hits for 4 stale ones, more than half none; on entire-cli's, 0 for 3); else ``moved``
when one of its own anchors moved (its text names the old place), else ``changed`` when one of
its own anchors changed (its own lines rewritten; a class's lines hold its methods, so a named
class whose methods changed is ``current`` with ``members_changed``: on pytest's dump those
marks fell on 35 current hits for 9 stale ones), else ``current``. What happened since without
making it untrue is information: ``changed_since`` (files whose content differs, its own or its
session's), ``commits``, ``moves`` of its session's files (its paths are shown with their new
names) and ``reason`` when at most half of its own code is gone. Items without anchors get no
state. Results are memoised per (anchor record, snapshot).

A second mark comes from the work the item was learned from (``work_gone``, the work lines of
``changes.py``: the works naming the item, else its session, else, for a note written with no
session, the work of the HEAD it was written at): ``gone`` when at least ``work_gone_share`` of
the ``min_work_files`` or more source files that work added or edited (not those it deleted) are
no longer in the tree, and no symbol it added or changed in them is defined anywhere now (a
renamed file, by git's renames since the work or by its symbols, or code moved elsewhere, is
not gone), or when one of those files is gone and
every one of the ``min_touched`` or more symbols the work added or changed is defined nowhere
(the two signs together: either alone also fits current hits), whatever the item's own anchors
say; ``work_gone`` names them ("2 of the 3 files its work changed are no longer in the tree").
On pytest's dump of every top-10 hit: 8 stale hits marked, no current one; neither sign alone
separates (docs/tuning.md "Stale marks").

The same work lines tell a work undone in the tree (``undone``, item 2: no revert message
needed): every source file its works changed is back to the blob it had before (``was``), one
it added absent again and not renamed; the item is ``gone`` with ``undone`` naming the files and
the sessions of the latest later work that touched them (shown "reverted in session N").

One mark depends on the query (``asked_gone``): when the query names a symbol that is defined
nowhere now, a hit whose session added or changed that symbol (a ``touched`` anchor, or a work
record of ``changes.py`` naming the hit or its session) is ``gone`` for this query, and its
``asked_gone`` names the symbol and the file it was in ("`X` was in src/a.py and is defined
nowhere now"), ``removed_in`` the sessions that removed it. On pytest's removed tasks, by the
touched anchors: 5 stale hits marked, no current one (the session that removed a symbol did not
add or change it).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

from ..models import Hit
from .anchors import book
from .code_tuning import current
from .glob_anchor import in_tree
from .glob_anchor import matches as glob_matches
from .history import history, kept_shares
from .tree import Snapshot, snapshot

STATES = ("current", "changed", "moved", "gone")


def anchor_state(a: dict, snap: Snapshot, head: str | None = None) -> dict:
    """The state of one anchor now: ``{"path", "state", "to"?, "symbol"?, "edited"?}``;
    ``head``: the HEAD it was taken at (a file renamed since is followed by git's renames)."""
    path, sym = a.get("path"), a.get("symbol")
    out: dict[str, Any] = {"path": path}
    if a.get("glob") and isinstance(path, str):  # a pattern: there while it names a file
        out["glob"] = True
        out["state"] = "current" if in_tree(path, snap) else "gone"
        return out
    if sym:
        out["symbol"] = sym
        found = snap.definitions.get(sym, [])
        here = [s for p, s in found if p == path]
        if here:
            assert path is not None  # it names a file of the definitions found
            if any(s.digest == a.get("digest") for s in here):
                out["state"] = "current"  # its own lines are as they were
                out["edited"] = snap.files.get(path) != a.get("blob")
            elif all(s.kind == "class" for s in here):
                # a class's lines hold its methods: one of them changed, the class is as it was
                out["state"], out["edited"], out["members_changed"] = "current", True, True
            else:
                out["state"], out["lines_changed"] = "changed", True
        elif found and len({p for p, _ in found}) == 1:
            out["state"], out["to"] = "moved", found[0][0]
            out["left"] = path not in snap.files  # its file went too, or it stays
            if out["left"]:  # renamed, or deleted once the function moved out
                out["renamed"] = _mostly_at(a.get("blob") or "", out["to"], snap)
        elif found:
            out["state"] = "changed"  # now defined in several other files: no single new home
        else:
            out["state"] = "gone"
        return out
    blob = snap.files.get(path) if path is not None else None
    if blob is not None:
        if blob == a.get("blob"):
            out["state"] = "current"
            return out
        kept = _kept(snap).get((a.get("blob") or "", blob))
        if kept is None and snap.git:
            kept = kept_shares(snap.root, {(a.get("blob") or "", blob)}).get(
                (a.get("blob") or "", blob))
        out["edited"] = True
        out["state"] = "current" if kept is not None and kept >= current().keep_share else "changed"
        return out
    same = snap.by_blob.get(a.get("blob") or "", [])
    if len(same) == 1:
        out["state"], out["to"] = "moved", same[0]
        return out
    to = _renamed_to(path, head, snap)
    if to is None:
        out["state"] = "gone"
        return out
    # renamed and edited in one commit (git's -M): moved, and changed when most of it is new
    out["state"], out["to"], out["edited"] = "moved", to, True
    pair = (a.get("blob") or "", snap.files[to])
    kept = kept_shares(snap.root, {pair}, {pair[1]: to}).get(pair)
    if kept is None or kept < current().keep_share:
        out["rewritten"] = True
    return out


def _mostly_at(blob: str, path: str, snap: Snapshot) -> bool:
    """Whether at least ``renamed_share`` of the lines of ``blob`` (a file that left the tree) are
    in the file at ``path`` now: that file is the old one renamed, not a new home of one part."""
    now = snap.files.get(path)
    if not blob or now is None or blob == now:
        return bool(blob) and blob == now
    pair = (blob, now)
    kept = _kept(snap).get(pair)
    if kept is None and snap.git:
        kept = kept_shares(snap.root, {pair}, {now: path}).get(pair)
    return kept is not None and kept >= current().renamed_share


def _renamed_to(path: str | None, head: str | None, snap: Snapshot) -> str | None:
    """The file ``path`` is now by the renames git saw since ``head`` (None: not renamed, or
    not in the tree now)."""
    if not (snap.git and snap.head and head and path):
        return None
    hist = history(snap.root, snap.head)
    to = hist.follow(head, path) if hist is not None else None
    return to if to in snap.files else None


def _memo(snap: Snapshot, name: str) -> dict:
    """A memo kept on the snapshot (it lasts until the next commit), emptied when it holds
    ``memo_size`` answers (many writes and no commit: the works' older versions)."""
    memo = snap.__dict__.setdefault(name, {})
    if len(memo) >= current().memo_size:
        memo.clear()
    return memo


def _kept(snap: Snapshot) -> dict:
    return snap.__dict__.setdefault("_kept", {})


def prepare(recs: list[dict], snap: Snapshot) -> None:
    """Read at once what the whole-file anchors of ``recs`` need, and the symbol anchors whose
    file left the tree (was it renamed: ``_mostly_at``), in one ``git cat-file``; a
    record already prepared on this snapshot is skipped (its pairs are all known since)."""
    if not snap.git:
        return
    known = _kept(snap)
    # id(record) -> (record, its anchors then): a session's record gains anchors as lines are read
    done = _memo(snap, "_prepared")
    pairs: set[tuple[str, str]] = set()
    where: dict[str, str] = {}  # a current blob is read from its file in the work tree
    for rec in recs:
        size = len(rec.get("anchors") or ())
        seen = done.get(id(rec))
        if seen is not None and seen[0] is rec and seen[1] == size:
            continue
        done[id(rec)] = (rec, size)
        for a in rec.get("anchors") or ():
            if not isinstance(a, dict):
                continue
            at = a.get("path") if not a.get("symbol") else _left_for(a, snap)
            if at is None:
                continue
            now = snap.files.get(at)
            pair = (a.get("blob") or "", now)
            if now is not None and now != pair[0] and pair not in known:
                pairs.add((pair[0], now))
                where[now] = at
    if pairs:
        known.update(kept_shares(snap.root, pairs, where))


def _left_for(a: dict, snap: Snapshot) -> str | None:
    """The one file a symbol anchor's code moved to when its own file left the tree (where
    ``anchor_state`` asks whether that file is the old one renamed), else None."""
    if a.get("path") in snap.files:
        return None
    homes = {p for p, _ in snap.definitions.get(a["symbol"], ())}  # asked of symbol anchors only
    return next(iter(homes)) if len(homes) == 1 else None


def item_state(rec: dict, snap: Snapshot) -> dict:
    """The freshness of one item from its anchor record (see the module docstring)."""
    memo = snap.__dict__.setdefault("_freshness", {})
    key = (id(rec), rec.get("at"), tuple(rec.get("items") or ())[:1], len(rec.get("anchors") or ()))
    got = memo.get(key)
    if got is not None:
        return got
    anchors = [a for a in rec.get("anchors") or [] if isinstance(a, dict)]
    every = [anchor_state(a, snap, rec.get("head")) for a in anchors]
    own = [s for s, a in zip(every, anchors) if not a.get("via")]
    touched = [s for s, a in zip(every, anchors) if a.get("touched")]
    states = [s for s, a in zip(every, anchors) if not a.get("touched")]
    basis = own or states
    counts = {k: sum(1 for s in basis if s["state"] == k) for k in STATES}
    work_gone = not own and len(touched) >= current().min_touched and all(
        s["state"] == "gone" for s in touched)
    if work_gone:
        states = states + touched  # the symbols its session wrote: all defined nowhere now
    partly_gone = sorted({_named(s) for s in own if s["state"] == "gone"})
    if basis and counts["gone"] == len(basis) or work_gone:
        state = "gone"
    elif len(partly_gone) * 2 > len(own):
        state = "changed"  # most of the code it names is gone: what it says holds in part at most
    elif any(s["state"] == "moved" for s in own):
        state = "moved"  # the code it names is elsewhere now (its text is read with new names)
    elif any(s["state"] == "changed" for s in own):
        state = "changed"  # its own lines were rewritten
    else:
        state = "current"  # files it names (or its session's) may have changed elsewhere since
    out = {"state": state, "head": rec.get("head"), "learned_at": rec.get("at"),
           "moved": {s["path"]: s["to"] for s in states if s["state"] == "moved"},
           "moves": [{"from": s["path"], "to": s["to"], "what": "symbol", "symbol": s["symbol"],
                      "left": bool(s.get("left")),
                      **({"renamed": True} if s.get("renamed") else {})}
                     if s.get("symbol") else {"from": s["path"], "to": s["to"], "what": "file"}
                     for s in states if s["state"] == "moved"],
           "changed": sorted({s["path"] for s in basis if s["state"] == "changed"} |
                             {s["to"] for s in basis if s.get("rewritten")}),
           "symbols_changed": sorted({s["symbol"] for s in states if s.get("lines_changed")}),
           "gone": sorted({s["path"] if not s.get("symbol") else f"{s['path']}:{s['symbol']}"
                           for s in states if s["state"] == "gone"}),
           "commits": _commits(rec.get("head"), basis, snap),
           "changed_since": sorted({s.get("to") or s["path"] for s in basis
                                    if s.get("edited") or s["state"] == "changed"}),
           "paths": list(dict.fromkeys(
               s.get("to") or s["path"] for s in states if s["state"] != "gone"))}
    if partly_gone and state != "gone":  # a mark at half of its code, else what to know
        out["reason"] = "; ".join(f"{x} is gone" for x in partly_gone)
    memo[key] = out
    return out


def moves_of(fresh: dict) -> list[dict]:
    """The moves of a freshness mark, as ``{"from", "to", ...}`` dicts: its ``moves``, or, for a
    mark made before moves were listed, one file move per ``moved`` entry; malformed ones out."""
    moves = fresh.get("moves")
    if not isinstance(moves, list):
        moved = fresh.get("moved")
        moves = [{"from": a, "to": b, "what": "file"}
                 for a, b in (moved.items() if isinstance(moved, dict) else ())]
    return [m for m in moves if isinstance(m, dict) and isinstance(m.get("from"), str)
            and isinstance(m.get("to"), str)]


def is_rename(m: dict) -> bool:
    """Whether a move (``moves_of``) is its file's: renamed, where a symbol's move is the
    function leaving a file that stays, or that was deleted."""
    return m.get("what") == "file" or bool(m.get("renamed")) or not m.get("symbol")


def describe_move(m: dict, arrow: bool = False) -> str:
    """One move as a reader should take it: "a.py is now b.py" for a renamed file,
    "`refund` moved from a.py (deleted) to b.py" for a function that left a file that is gone,
    "`refund` moved from a.py to b.py" for one that left a file still there; with ``arrow``,
    "a.py -> b.py" and "`refund` a.py (deleted) -> b.py" (``graphmem search``'s marks)."""
    gone = " (deleted)" if m.get("left") else ""
    if arrow:
        return f"{m['from']} -> {m['to']}" if is_rename(m) else \
            f"`{m['symbol']}` {m['from']}{gone} -> {m['to']}"
    if is_rename(m):
        return f"{m['from']} is now {m['to']}"
    return f"`{m['symbol']}` moved from {m['from']}{gone} to {m['to']}"


def _named(s: dict) -> str:
    """An anchor as a reason names it: its path, or ``symbol in path``."""
    return f"{s['symbol']} in {s['path']}" if s.get("symbol") else s["path"]


def _commits(head: str | None, basis: list[dict], snap: Snapshot) -> dict[str, int]:
    """Commits since ``head`` that touched each anchored file whose content differs now."""
    touched = sorted({s.get("to") or s["path"] for s in basis
                      if s.get("edited") or s["state"] == "changed"})
    hist = history(snap.root, snap.head) if touched and snap.git and head else None
    if hist is None:
        return {}
    out = {}
    for path in touched:
        n = hist.commits_since(head, path)
        if n is not None:
            out[path] = n
    return out


def work_gone(fresh: dict, rec: dict, hit: Hit, works: Any, snap: Snapshot) -> dict:
    """``fresh`` marked ``gone`` when the code the item's work wrote is gone (see the module
    docstring), with ``work_gone``: ``{"files": the gone ones, "of": how many it wrote,
    "symbols"?: the ones it wrote, all defined nowhere now, "sessions", "commits"}``."""
    if fresh["state"] == "gone" or works is None or hit.kind == "file" or not snap.files:
        return fresh
    # the same answer while the snapshot, the item's state and the works stay as they are
    memo = _memo(snap, "_work_gone")
    key = (id(fresh), id(works), works.version, hit.id, hit.session, rec.get("head"))
    got = memo.get(key)
    if got is not None and got[0] is fresh and got[1] is works:
        return got[2]
    out = _work_gone(fresh, rec, hit, works, snap)
    memo[key] = (fresh, works, out)
    return out


def _work_gone(fresh: dict, rec: dict, hit: Hit, works: Any, snap: Snapshot) -> dict:
    done = works.of(hit.id, str(hit.session) if hit.session else None, rec.get("head"))
    if not done:
        return fresh
    back = undone(done, works, snap)
    if back is not None:
        return {**fresh, "state": "gone", "gone": sorted({*fresh.get("gone", ()), *back["files"]}),
                "undone": back}
    wrote = {p for w in done for p in w["files"]} - {p for w in done for p in w["deleted"]}
    heads = {p: w["head"] for w in done for p in w["files"]}  # renamed since: not lost
    lost = sorted(p for p in wrote if p not in snap.files and not _lives_on(p, done, snap)
                  and _renamed_to(p, heads.get(p), snap) is None)
    syms = sorted({f"{p}:{n}" for w in done for key in ("added", "changed")
                   for p, names in w[key].items() for n in names})
    t = current()
    most = len(wrote) >= t.min_work_files and len(lost) >= t.work_gone_share * len(wrote)
    every = lost and len(syms) >= t.min_touched and not any(
        snap.definitions.get(s.rsplit(":", 1)[1]) for s in syms)
    if not (most or every):
        return fresh
    out = {"files": lost, "of": len(wrote), **({"symbols": syms} if every else {}),
           "sessions": sorted({s for w in done for s in w["sessions"]}),
           "commits": [w["head"] for w in done]}
    return {**fresh, "state": "gone", "gone": sorted({*fresh.get("gone", ()), *lost,
                                                      *(syms if every else ())}),
            "work_gone": out}


def undone(done: list[dict], works: Any, snap: Snapshot) -> dict | None:
    """``{"files", "sessions", "commits"}`` when the work an item came from was undone in the
    tree: every source file each of its works (``done``) changed is back to the content it had
    before that work (one the work added is absent again, and not renamed), with the sessions of the latest later
    work that touched those files (who undid it, when recorded); None otherwise, or when a work
    of ``done`` predates the ``was`` field (nothing to compare)."""
    if not snap.head or any(not w.get("was") or w["head"] == snap.head for w in done):
        return None
    files: set[str] = set()
    for w in done:
        for path, blob in w["was"].items():
            if snap.files.get(path) != blob:  # None when absent, as for a file the work added
                return None
            if blob is None and (_lives_on(path, done, snap)
                                 or _renamed_to(path, w["head"], snap) is not None):
                return None  # a file it added, renamed since: its code lives on
            files.add(path)
    heads = list(works.by_head)
    first = min(heads.index(w["head"]) for w in done)
    mine = {w["head"] for w in done}
    later = [works.by_head[h] for h in heads[first + 1:] if h not in mine
             and files & {*works.by_head[h].get("was", ()), *works.by_head[h]["files"]}]
    by = later[-1] if later else None
    return {"files": sorted(files), "sessions": list(by["sessions"]) if by else [],
            "commits": [w["head"] for w in done]}


def reverted_note(fresh: dict) -> str:
    """"reverted in session 7 (its change is undone in the tree)" for a memory whose work was
    undone without a revert message (``freshness.undone``), empty otherwise."""
    undone = fresh.get("undone") if isinstance(fresh.get("undone"), dict) else None
    if undone is None:
        return ""
    who = [str(s) for s in undone.get("sessions") or ()][:3]
    return ("reverted in session " + ", ".join(who) if who else "reverted") + \
        " (its change is undone in the tree)"


def _lives_on(path: str, works: list[dict], snap: Snapshot) -> bool:
    """Whether a symbol the works added or changed in ``path`` is defined somewhere now (the
    file was renamed, or its code moved: not gone)."""
    return any(snap.definitions.get(n) for w in works for key in ("added", "changed")
               for n in w[key].get(path, ()))


def asked_names(query: str) -> set[str]:
    """The code names a query uses (``anchors.query_symbols``, each also by its last part): the
    candidates of ``asked_gone``."""
    from .anchors import query_symbols

    return {n for name in query_symbols(query or "") for n in (name, name.rsplit(".", 1)[-1])}


def asked_gone(fresh: dict, rec: dict, asked: set[str], snap: Snapshot, hit: Hit | None = None,
               works: Any = None) -> dict:
    """``fresh`` with the query's mark: ``gone`` when the hit's session added or changed a
    symbol the query names that is defined nowhere now, by its ``touched`` anchors or by the
    work records (``changes.Works``: a work naming the hit or its session; not the work that
    removed it), with ``removed_in``: the sessions of the work that removed it (``fresh``
    itself when no such symbol is)."""
    if fresh["state"] in ("gone", "moved") and not fresh.get("undone") or not asked:
        return fresh  # an undone work's memory still says which asked symbol went with it
    lost = {f"{a['path']}:{a['symbol']}" for a in rec.get("anchors") or ()
            if isinstance(a, dict) and a.get("touched") and a.get("symbol") in asked
            and not snap.definitions.get(a["symbol"])}
    removed_in: dict[str, list[str]] = {}
    for name in sorted(asked) if works is not None and hit is not None else ():
        if snap.definitions.get(name):
            continue
        assert hit is not None  # the loop runs only with a hit
        removal = works.removal(name)
        for head in works.touched_by.get(name, ()):
            w = works.by_head.get(head)
            if w is None or w is removal or not (
                    hit.id in w["items"] or (hit.session and str(hit.session) in w["sessions"])):
                continue
            lost.update(f"{p}:{name}" for key in ("added", "changed")
                        for p, names in w[key].items() if name in names)
            lost.update(f"{p}:{name}" for p, m in w["moved"].items() if name in m)
        if removal is not None and any(x.endswith(f":{name}") for x in lost):
            removed_in[name] = list(removal["sessions"])
    if not lost:
        return fresh
    out = {**fresh, "state": "gone", "asked_gone": sorted(lost),
           "gone": sorted({*fresh.get("gone", ()), *lost})}
    if removed_in:
        out["removed_in"] = removed_in
    return out


def named_code(query: str, snap: Snapshot) -> set[str]:
    """The files of the project that ``query`` names, directly or through a symbol they define."""
    from .anchors import find_paths, find_symbols

    if not snap.files:
        return set()
    return {*find_paths(query, snap), *(a["path"] for a in find_symbols(query, snap, []))}


def annotate(hits: list[Hit], project_dir: str | Path | None, snap: Snapshot | None = None,
             spec_dir_of: Callable[[Hit], Path | None] | None = None,
             query: str | None = None) -> list[Hit]:
    """Each anchored hit gets ``metadata["freshness"]`` (with ``query``, also ``asked_gone``);
    gone ones move ``gone_drop`` places down."""
    if not hits or project_dir is None:
        return hits
    root = Path(project_dir)
    out: list[Hit] = []
    books: dict = {}  # one refresh per spec folder, not per hit
    recs, wheres = [], []
    for hit in hits:
        where = spec_dir_of(hit) if spec_dir_of else (hit.spec if hit.project == str(root) else None)
        wheres.append(where)
        if where and where not in books:
            books[where] = book(where)
        b = books[where] if where else None
        rec = b.records.get(hit.id) if b else None
        if rec is None and b is not None and hit.kind in ("turn", "step") and hit.session:
            rec = b.session_record(hit.session)  # a prompt naming no file: its session's files
        recs.append(rec)
    if any(recs):
        snap = snap or snapshot(root, max_age=0)
        prepare([r for r in recs if r], snap)
    asked = asked_names(query) if query and any(recs) else set()
    for hit, rec, where in zip(hits, recs, wheres):
        if rec is None:
            out.append(hit)
            continue
        works = books[where].works if where else None
        assert snap is not None  # a record is never empty: any(recs) above made the snapshot
        fresh = work_gone(item_state(rec, snap), rec, hit, works, snap)
        fresh = asked_gone(fresh, rec, asked, snap, hit, works if asked else None)
        out.append(hit.replaced(metadata={**hit.metadata, "freshness": fresh}))
    drop = current().gone_drop
    if drop is None:
        live = [h for h in out if _state(h) != "gone"]
        return live + [h for h in out if _state(h) == "gone"]
    # a gone hit moves ``drop`` places down (the list is short: a stable insertion)
    order = [(i + (drop + 0.5 if _state(h) == "gone" else 0), h) for i, h in enumerate(out)]
    return [h for _, h in sorted(order, key=lambda x: x[0])]


def _state(hit: Hit) -> str | None:
    f = hit.metadata.get("freshness")
    return f.get("state") if isinstance(f, dict) else None


def anchored_to(spec_dirs: list[str | Path], paths: list[str] | set[str], limit: int = 20) -> list[str]:
    """Ids of the items anchored to any of ``paths`` (by their path at write time, or by a glob
    anchor's pattern naming one of them), newest first."""
    found: list[tuple[str, str]] = []
    for spec in spec_dirs:
        b = book(spec)
        seen: set[str] = set()
        # the items whose latest record names a path, newest first; then those of a pattern
        named = [reversed(b.now_by_path.get(path, {})) for path in paths]
        named += [reversed(ids) for g, ids in b.globs.items()
                  if any(glob_matches(g, p) for p in paths)]
        for ids in named:
            for item_id in ids:
                if item_id in seen:
                    continue
                seen.add(item_id)
                found.append((b.records[item_id].get("at") or "", item_id))
                if len(seen) >= limit * 2:
                    break
    return [i for _, i in sorted(found, reverse=True)[:limit]]
