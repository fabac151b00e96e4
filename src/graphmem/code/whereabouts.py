"""Where is it now: a search naming code finds the map entry of the file that defines it today.

A value that changed over time ("where is ``stripe_refund``?" after it moved from ``a.py`` to
``b.py``) has a current answer and superseded ones, and the memories that give the superseded
ones are often the best word matches: the sessions that worked on it while it lived in ``a.py``.
So when a query names one or two code names (``anchors.query_symbols``: functions, classes,
methods such as ``Session.commit``) that the project defines now in at most ``max_homes`` files
(``code_tuning.py``):

- ``promote``: the codebase-map entry (kind ``file``) of each file that defines them now, at
  most ``max_promoted``, fetched from the index when it was not among the candidates (an entry's
  id is its path's, ``insight_items``), goes no lower than place ``promote_at``, and above the
  first unmarked hit that names a file the name has left (``former_homes``: the files recorded
  works added it to, changed it in or moved it from, ``changes.py``), so an agent reading from the
  top meets the current home before a superseded one; an entry already higher keeps its place.
  Not first by default: the best match is usually the work that wrote the code (locate nDCG);
- ``mark_moved``: a codebase-map entry listing an asked name for a file that no longer defines it
  is marked ``moved`` (its freshness), with ``asked_moved: {"X": ["b.py"]}``; search and context
  show "`X` is now in b.py".

A name defined in more files says too little to answer (``max_homes``), and a query naming more
than ``max_names`` defined names is a task, not a question about where one thing is. Both steps
read the snapshot's symbol table that code recall already built (``Snapshot.definitions``) and
the anchor book's work index; the names asked are kept per query on the snapshot, so a search
pays a few dict look-ups (and one index read when an entry was not a candidate).
Measured on ``bench/codemem.py``: docs/tuning.md, "Where is it now".
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable, Iterable

from ..models import Hit, stable_id
from .anchors import query_symbols
from .code_tuning import current
from .tree import Snapshot

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*")


@dataclass(frozen=True)
class Asked:
    """A code name the query uses: as written, the names an entry may list it by, and the
    files that define it now."""

    name: str
    words: frozenset[str]
    homes: tuple[str, ...]


def asked_homes(query: str, snap: Snapshot | None) -> list[Asked]:
    """The code names ``query`` uses that the project defines now, with their files (empty
    when it names none, or more than ``max_names``); kept per query on the snapshot."""
    if snap is None or not query or not getattr(snap, "files", None):
        return []
    memo = snap.__dict__.setdefault("_asked_homes", {})
    got = memo.get(query)
    if got is None:
        if len(memo) >= current().asked_memo:
            memo.clear()
        got = memo[query] = _resolve(query, snap)
    return got


def _resolve(query: str, snap: Snapshot) -> list[Asked]:
    defs = snap.definitions
    found: dict[tuple, Asked] = {}
    for name in query_symbols(query):
        # ``pkg.Client.charge`` is ``Client.charge``; a last part alone (``charge``) is not asked
        for cand in dict.fromkeys((name, ".".join(name.split(".")[-2:]))):
            rows = defs.get(cand)
            if not rows:
                continue
            key = tuple(sorted((p, s.name) for p, s in rows))
            if key not in found:
                found[key] = Asked(name, frozenset({name, cand, *(s.name for _, s in rows)}),
                                   tuple(dict.fromkeys(p for p, _ in rows)))
            break
    t = current()
    if len(found) > t.max_names:
        return []
    return [a for a in found.values() if len(a.homes) <= t.max_homes]


def former_homes(asked: list[Asked], works: Iterable) -> set[str]:
    """The files the asked names were added to, changed or moved from by a recorded work
    (``changes.Works``) that define them no more."""
    out: set[str] = set()
    for a in asked:
        for w_all in works:
            for name in a.words:
                for head in w_all.touched_by.get(name, ()):
                    w = w_all.by_head.get(head) or {}
                    out.update(p for key in ("added", "changed") for p, names in
                               (w.get(key) or {}).items() if name in names)
                    out.update(p for p, m in (w.get("moved") or {}).items() if name in m)
        out.difference_update(a.homes)
    return out


def promote(hits: list[Hit], asked: list[Asked], scopes: Iterable[tuple[str, str]],
            fetch: Callable[[list[str], set[str]], list[Hit]] | None = None,
            former: set[str] | frozenset[str] = frozenset()) -> list[Hit]:
    """``hits`` with the map entries of the files defining the asked names now at place
    ``promote_at`` at the lowest, and above the first unmarked hit that points to one of the
    ``former`` files (its text or its files name it); an entry already higher keeps its place.
    ``scopes`` are the (project, spec) keys whose map entries count, ``fetch(ids, known)``
    reads the missing ones from the index."""
    homes = list(dict.fromkeys(p for a in asked for p in a.homes))
    if not homes:
        return hits
    t = current()
    first = next((n for n, h in enumerate(hits) if "removed" not in h.metadata), len(hits))
    wrong = next((n for n, h in enumerate(hits) if n >= first and _points_to(h, former)), None)
    right = next((n for n, h in enumerate(hits) if _names_home(h, homes)), None)
    if right is not None and right <= first + t.promote_at and (wrong is None or right < wrong):
        return hits  # the current home is met first already: nothing to move
    scopes = list(dict.fromkeys(scopes))
    mine = set(scopes)
    have = [h for h in hits if h.kind == "file" and (h.project, h.spec) in mine
            and h.metadata.get("path") in homes]
    if len(have) < t.max_promoted and fetch is not None:
        known = {h.id for h in hits}
        ids = [stable_id(project, spec, "file", p) for project, spec in scopes for p in homes]
        have += [h for h in fetch([i for i in ids if i not in known], known)
                 if h.kind == "file" and h.metadata.get("path") in homes]
    one: dict[str, Hit] = {}  # one entry per file (the best placed): a second one for the same file adds nothing
    for h in have:
        one.setdefault(h.metadata["path"], h)
    chosen = list(one.values())[:t.max_promoted]
    if not chosen:
        return hits
    was = {h.id: n for n, h in enumerate(hits)}
    picked = {h.id for h in chosen}
    rest = [h for h in hits if h.id not in picked]
    first = next((n for n, h in enumerate(rest) if "removed" not in h.metadata), len(rest))
    at = first + t.promote_at  # after the works that removed a name it asks
    at = min(at, next((n for n, h in enumerate(rest) if n >= first and _points_to(h, former)), at))
    out = rest
    for n, h in enumerate(sorted(chosen, key=lambda h: was.get(h.id, len(hits)))):
        place = min(was.get(h.id, len(hits)), at + n, len(out))
        if place != was.get(h.id):  # moved up: scored where it stands (context keeps it)
            above = out[place - 1].score if place else max((x.score for x in out), default=0.0) + 0.01
            h = h.replaced(score=round(max(h.score, above - 1e-4), 6))
        out = out[:place] + [h] + out[place:]
    return out


def _points_to(hit: Hit, files: set[str] | frozenset[str]) -> bool:
    """Whether an unmarked hit names one of ``files`` in its text or among its files."""
    fresh = m if isinstance(m := hit.metadata.get("freshness"), dict) else {}
    if not files or fresh.get("state") in ("moved", "gone") or hit.metadata.get("validity"):
        return False
    return any(f in hit.text for f in files) or any(p in files for p in fresh.get("paths") or ())


def _names_home(hit: Hit, homes: list[str]) -> bool:
    """Whether a hit names one of ``homes`` as an agent reads it: in its text, among its files,
    or as the new name of a moved one."""
    fresh = m if isinstance(m := hit.metadata.get("freshness"), dict) else {}
    shown = {*(fresh.get("paths") or ()), *(fresh.get("moved") or {}).values()}
    return any(h in hit.text or h in shown for h in homes)


def mark_moved(hits: list[Hit], asked: list[Asked], project: str) -> list[Hit]:
    """``hits`` with each codebase-map entry of ``project`` that lists an asked name for a file
    no longer defining it marked ``moved``, ``asked_moved`` naming the files that do now."""
    if not asked:
        return hits
    out = []
    for h in hits:
        path = h.metadata.get("path") if h.kind == "file" and h.project == project else None
        fresh = m if isinstance(m := h.metadata.get("freshness"), dict) else {}
        if not isinstance(path, str) or fresh.get("state") == "gone":
            out.append(h)
            continue
        listed = _names_in(h)
        moved = {a.name: list(a.homes) for a in asked if path not in a.homes and a.words & listed}
        if not moved:
            out.append(h)
            continue
        fresh = {"moved": {}, "paths": [path], **fresh, "state": "moved", "asked_moved": moved}
        out.append(h.replaced(metadata={**h.metadata, "freshness": fresh}))
    return out


def _names_in(hit: Hit) -> set[str]:
    """The code names a map entry's purpose lists (each dotted one also by its last part)."""
    purpose = hit.metadata.get("purpose")
    text = purpose if isinstance(purpose, str) else hit.text.partition(": ")[2]
    out: set[str] = set()
    for name in _IDENT.findall(text):
        out.add(name)
        if "." in name:
            out.add(name.rsplit(".", 1)[-1])
    return out


def moved_note(fresh: dict) -> list[str]:
    """"`X` is now in b.py" for each name ``asked_moved`` holds (what search and context show)."""
    got = m if isinstance(m := fresh.get("asked_moved"), dict) else {}
    return [f"`{name}` is now in {', '.join(map(str, homes))}" for name, homes in got.items()
            if isinstance(homes, list)]
