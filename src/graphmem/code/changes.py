"""What a piece of work did to the code: the symbols it removed, added, changed or moved, the
source files it added or edited, and the files it deleted.

When items are written and HEAD is not the HEAD graphmem last saw (the anchor book's last
record), the commits in between are the writing session's work. One ``git diff-tree`` between
the two commits names the files that changed, with their old and new blob ids; their texts are
read at once (``history.blob_texts``: loose objects first, then one ``git cat-file --batch``),
both versions are parsed (``symbols.py``) and compared:

- *removed*: it left a file and no file of the project defines it now;
- *moved*: it left a file and the same work added it to another one;
- *added*: new in its file (and not moved there); *changed*: its own lines differ.

Stored in ``anchors.jsonl`` as a *work* line, beside the anchor records (``anchor_file.py``)::

    {"work": "<HEAD>", "base": "<HEAD before>", "at": "2026-12-01T20:00:00+00:00",
     "sessions": ["12"], "items": ["3f0c...", ...],
     "removed": {"src/pay.py": ["refund", "Client.charge"]}, "added": {"src/api.py": ["serve"]},
     "changed": {"src/api.py": ["Server"]}, "moved": {"src/old.py": {"helper": "src/util.py"}},
     "files": ["src/api.py", "src/util.py"], "deleted": ["src/old.py"],
     "was": {"src/api.py": "<blob>", "src/util.py": null, "src/old.py": "<blob>"}}

``was`` gives the blob each source file in the diff had before the work (null: the work added
it), so a later read can tell the work undone in the tree (``freshness.undone``).

``files`` are the source files (``symbols.language_of``) the work added or edited, whether or not
a symbol list changed (an edit inside a body changes none): what ``freshness.work_gone`` checks.

``items`` are the memories of the write that first saw this HEAD, ``sessions`` their sessions.
A later write at the same HEAD by an episodic session (its turns and steps) adds
``{"work": "<HEAD>", "sessions": [...], "items": [...]}``: its memories join the work. A write
that anchors nothing and changed no code leaves ``{"work": "<HEAD>", "at": ...}``: the HEAD it
saw, which the next diff starts from. A work line that is not in this shape is skipped with a
warning.

``Works`` is the readers' view: HEAD -> work; symbol -> the work that removed it last (unless a
later work added it back); symbol -> the works that added, changed or moved it, oldest first;
memory id and session -> the works that name them (``of``).

Bounded per write: at most ``work_files`` changed source files are parsed and ``work_symbols``
symbols listed per work (``code_tuning.py``). Outside git, or when the HEAD graphmem saw is gone
from the repository (history rewritten), nothing is recorded.
"""

from __future__ import annotations

import logging
import re
from typing import Iterable

from .history import _git, blob_texts
from .symbols import language_of, parse_symbols
from .code_tuning import current
from .tree import Snapshot

log = logging.getLogger("graphmem.code")

ITEM_KINDS = ("insight", "gotcha", "pattern", "step", "turn")  # a map entry is not the work's
LISTS = ("removed", "added", "changed")
_HEX = re.compile(r"[0-9a-f]{4,64}")


def diff(snap: Snapshot, base: str) -> list[tuple[str, str, str, str]] | None:
    """``(status, path, old blob, new blob)`` of the files that differ between ``base`` and the
    snapshot's HEAD (None when git cannot say: ``base`` is not in the repository)."""
    assert snap.head is not None  # callers pass a snapshot at a commit
    raw = _git(snap.root, "diff-tree", "-r", "-z", "--no-renames", "--no-commit-id", base, snap.head)
    if raw is None:
        return None
    tokens = raw.decode("utf-8", "surrogateescape").split("\0")
    out = []
    for meta, path in zip(tokens[0::2], tokens[1::2]):
        parts = meta.split()
        if len(parts) == 5 and meta.startswith(":"):
            out.append((parts[4][:1], path, parts[2], parts[3]))
    return out


def compute(snap: Snapshot, base: str | None, seen: dict[str, str | None] | None = None
            ) -> dict | None:
    """The work between ``base`` and the snapshot's HEAD: ``{"base", "removed", "added",
    "changed", "moved", "files", "deleted"}`` (lists left out when empty); None when there is none to
    compute (outside git, no base, the same HEAD, or git no longer has ``base``). ``seen``
    gets the old versions read, by blob id and as ``<base>:<path>`` (``cat_file``'s names), so
    the same write reads none twice."""
    if not snap.git or not snap.head or not base or base == snap.head or not _HEX.fullmatch(base):
        return None
    rows = diff(snap, base)
    if rows is None:
        return None
    tuning = current()
    code = [r for r in rows if language_of(r[1])][:tuning.work_files]
    want = {o for s, _, o, _ in code if s != "A"}
    want |= {n for s, p, _, n in code if s != "D" and snap.files.get(p) != n}
    texts = blob_texts(snap.root, want, None, tuning.max_parse_bytes) if want else {}
    if seen is not None:
        seen.update(texts)
        seen.update({f"{base}:{p}": texts[o] for s, p, o, _ in code if s != "A" and o in texts})
        seen.update({f"{base}:{p}": None for s, p, _, _ in code if s == "A"})  # new since base
    before: dict[str, dict[str, str]] = {}
    after: dict[str, dict[str, str]] = {}
    for status, path, old, new in code:
        if status != "A" and old not in texts:
            continue  # an old version git cannot give: unknown, nothing claimed
        if status == "D":
            now: dict[str, str] | None = {}
        elif snap.files.get(path) == new:
            now = {s.name: s.digest for s in snap.symbols(path)}
        else:
            now = _parsed(path, texts[new]) if new in texts else None
        if now is None:
            continue
        before[path] = _parsed(path, texts[old]) if status != "A" else {}
        after[path] = now
    left = {(p, n) for p, syms in before.items() for n in syms if n not in after[p]}
    came = {n: p for p, syms in after.items() for n in syms if n not in before[p]}
    defs = snap.definitions
    out: dict = {"base": base, "removed": {}, "added": {}, "changed": {}, "moved": {}}
    for path, name in sorted(left):
        if name in came:
            out["moved"].setdefault(path, {})[name] = came[name]
        elif not any(s.name == name for _, s in defs.get(name, ())):
            out["removed"].setdefault(path, []).append(name)
    moved_in = {n for m in out["moved"].values() for n in m}
    for path, syms in after.items():
        for name, digest in syms.items():
            if name not in before[path] and name not in moved_in:
                out["added"].setdefault(path, []).append(name)
            elif name in before[path] and before[path][name] != digest:
                out["changed"].setdefault(path, []).append(name)
    out["files"] = sorted(p for s, p, _, _ in code if s != "D")
    out["was"] = {p: (o if s != "A" else None) for s, p, o, _ in code}  # to tell it undone later
    out["deleted"] = sorted(p for s, p, _, _ in rows if s == "D")[:tuning.work_symbols]
    _cap(out)
    return {k: v for k, v in out.items() if v}


def _parsed(path: str, text: str) -> dict[str, str]:
    text = text.replace("\r\n", "\n").replace("\r", "\n")  # as the snapshot parses its files
    return {s.name: s.digest for s in parse_symbols(path, text)}


def _cap(work: dict) -> None:
    """At most ``work_symbols`` symbols listed, removed ones kept first."""
    room = current().work_symbols
    for key in ("removed", "moved", "changed", "added"):
        for path in list(work[key]):
            names = work[key][path]
            if room <= 0:
                del work[key][path]
                continue
            if len(names) > room:
                names = work[key][path] = names[:room] if isinstance(names, list) \
                    else dict(list(names.items())[:room])
            room -= len(names)


def did_something(work: dict) -> bool:
    """Whether a work changed any code (a bare line only says which HEAD was seen)."""
    return any(work.get(k) for k in (*LISTS, "moved", "files", "deleted"))


def _names(value) -> bool:
    return isinstance(value, list) and all(isinstance(n, str) for n in value)


def valid(rec: dict) -> bool:
    """Whether a work line has the shape above (else it is skipped)."""
    if not isinstance(rec.get("work"), str) or not _names(rec.get("items", [])) \
            or not _names(rec.get("sessions", [])) or not _names(rec.get("deleted", [])) \
            or not _names(rec.get("files", [])):
        return False
    for key in LISTS:
        got = rec.get(key, {})
        if not isinstance(got, dict) or not all(isinstance(p, str) and _names(v) for p, v in got.items()):
            return False
    was = rec.get("was", {})
    if not isinstance(was, dict) or not all(
            isinstance(p, str) and (b is None or isinstance(b, str)) for p, b in was.items()):
        return False
    moved = rec.get("moved", {})
    return isinstance(moved, dict) and all(
        isinstance(p, str) and isinstance(m, dict) and all(isinstance(v, str) for v in m.values())
        for p, m in moved.items())


class Works:
    """The work lines of one ``anchors.jsonl``, as readers need them (see the module docstring)."""

    def __init__(self) -> None:
        self.by_head: dict[str, dict] = {}
        self.removed_by: dict[str, str] = {}  # symbol -> HEAD of the work that removed it last
        self.touched_by: dict[str, list[str]] = {}  # symbol -> HEADs of works that wrote it
        self.methods: dict[str, set[str]] = {}  # a removed method's own name -> its names T.m
        self.by_item: dict[str, list[str]] = {}  # memory id -> HEADs of the works naming it
        self.by_session: dict[str, list[str]] = {}  # session -> HEADs of the works naming it
        self.version = 0  # grows with every change: readers key their memos on it

    def take(self, rec: dict) -> bool:
        """Add one work line (False when it is not in the shape above)."""
        if not valid(rec):
            return False
        self.version += 1
        head = rec["work"]
        w = self.by_head.get(head)
        if w is None:
            w = self.by_head[head] = {"head": head, "base": rec.get("base"), "at": rec.get("at"),
                                      "sessions": [], "items": [], "removed": {}, "added": {},
                                      "changed": {}, "moved": {}, "files": [], "deleted": [],
                                      "was": {}}
        for key in ("sessions", "items", "files", "deleted"):
            w[key].extend(x for x in rec.get(key, ()) if x not in w[key])
        self._name(head, rec.get("items", ()), rec.get("sessions", ()))
        for key in (*LISTS, "moved", "was"):
            for path, names in rec.get(key, {}).items():
                w[key].setdefault(path, names)
        wrote = [n for key in ("added", "changed") for ns in rec.get(key, {}).values() for n in ns]
        wrote += [n for m in rec.get("moved", {}).values() for n in m]
        for name in wrote:
            self.removed_by.pop(name, None)  # defined again
            heads = self.touched_by.setdefault(name, [])
            if head not in heads:
                heads.append(head)
        for names in rec.get("removed", {}).values():
            for name in names:
                self.removed_by[name] = head
                if "." in name:
                    self.methods.setdefault(name.rsplit(".", 1)[1], set()).add(name)
        return True

    def join(self, head: str | None, session: str | None, items: Iterable[str]) -> None:
        """An anchor record written at ``head`` by one of the work's sessions: its items join."""
        w = self.by_head.get(head) if head else None
        if w is not None and head and session in w["sessions"]:
            items = [i for i in items if i not in w["items"]]
            w["items"].extend(items)
            self.version += 1
            self._name(head, items, ())

    def _name(self, head: str, items: Iterable[str], sessions: Iterable[str]) -> None:
        for index, keys in ((self.by_item, items), (self.by_session, sessions)):
            for key in keys:
                heads = index.setdefault(key, [])
                if head not in heads:
                    heads.append(head)

    def of(self, item_id: str, session: str | None, head: str | None) -> list[dict]:
        """The works a memory came from: those naming it, else those naming its session, else
        (a note written with no session, such as a gotcha) the work of the HEAD it was written
        at, when that work changed code."""
        heads = self.by_item.get(item_id) or (self.by_session.get(session) if session else None)
        if heads:
            return [self.by_head[h] for h in heads]
        w = self.by_head.get(head) if head and not session else None
        return [w] if w is not None and did_something(w) else []

    def removal(self, name: str) -> dict | None:
        """The work that removed symbol ``name`` last (None: never, or defined again since)."""
        head = self.removed_by.get(name)
        return self.by_head.get(head) if head else None

    def removal_named(self, name: str) -> tuple[str, dict] | None:
        """``(symbol, work)`` for ``name`` as ``removal`` finds it, or else for the one removed
        method whose own name it is (``void`` for ``Client.void``)."""
        if name not in self.removed_by and "." not in name:
            full = [n for n in self.methods.get(name, ()) if n in self.removed_by]
            name = full[0] if len(full) == 1 else name
        w = self.removal(name)
        return (name, w) if w is not None else None


def item_ids(items: list) -> list[str]:
    """The ids a work line names of the memories written with it (``work_items``, by kind)."""
    ranked = sorted((it for it in items if it.kind in ITEM_KINDS),
                    key=lambda it: ITEM_KINDS.index(it.kind))
    return [it.id for it in ranked[:current().work_items]]


def line(snap: Snapshot, work: dict, at: str, items: list[str], sessions: list[str]) -> dict:
    """The work line to append for the write that first saw the snapshot's HEAD."""
    return {"work": snap.head, "base": work["base"], "at": at, "sessions": sessions,
            "items": items[:current().work_items], **{k: v for k, v in work.items() if k != "base"}}


def derive(snap: Snapshot, heads: dict[str, list[str]], known: dict[str, dict]) -> list[dict]:
    """For ``reindex``: the work lines an anchors file lacks, derived from the HEADs its records
    were written at (``heads``: HEAD -> the items recorded there, in the order first seen). The
    work of each HEAD is the diff from the HEAD recorded before it, against the project as it
    was at that HEAD (``git ls-tree``), its items those recorded there. A HEAD git no longer has
    is skipped (history rewritten); what happened between records the file no longer holds is
    given to the next recorded HEAD."""
    if not snap.git:
        return []
    out: list[dict] = []
    order = list(heads)
    prev_snap: Snapshot | None = None
    most = current().max_derive  # works derived at most per spec
    for base, head in zip(order, order[1:]):
        if head in known or len(out) >= most or not _HEX.fullmatch(head):
            continue
        rows = diff(Snapshot(snap.root, head, {}, git=True), base)
        if not rows or not any(language_of(r[1]) or r[0] == "D" for r in rows):
            continue  # no code changed (or git no longer has one of them)
        then = _tree_at(snap, head, prev_snap)
        if then is None:
            continue
        prev_snap = then
        work = compute(then, base)
        if work and set(work) != {"base"}:
            out.append(line(then, work, "", heads[head], []))
    return out


def _tree_at(snap: Snapshot, head: str, prev: Snapshot | None) -> Snapshot | None:
    """The project at commit ``head`` (its definitions updated from ``prev``'s)."""
    raw = _git(snap.root, "ls-tree", "-r", "-z", head)
    if raw is None:
        return None
    files = {}
    for rec in raw.decode("utf-8", "surrogateescape").split("\0"):
        meta, _, path = rec.partition("\t")
        parts = meta.split()
        if len(parts) == 3 and parts[1] == "blob":
            files[path] = parts[2]
    then = Snapshot(snap.root, head, files, git=True)
    then.previous = prev
    return then


def tree_at(snap: Snapshot, head: str, prev: Snapshot | None = None) -> Snapshot | None:
    """The project of ``snap`` at commit ``head`` (definitions updated from ``prev``'s)."""
    return _tree_at(snap, head, prev)
