"""Anchors: the code a memory talks about, and that code's state when the memory was written.

When items are written, each gets the file paths it names that exist in the project tree (in its
text, its ``metadata.path`` for codebase-map entries, step payloads), the backticked globs it names
that match a file of the tree (``glob_anchor.py``: a Cursor rule's ``src/api/**/*.ts``) and the
symbols it names that the project defines (see ``symbols.py``); items of one session file are also anchored, as
``"via": "session"``, to the files that session's discoveries list. Each anchor keeps the file's
git blob id (and for a symbol its lines and a hash of them), with HEAD at write time.

Stored beside the reference files as ``memory/anchors.jsonl`` (``anchor_file.py`` gives the
format: anchor lists stored once and named by records, its reader and its compaction). The first
write after HEAD moved also records what the commits since the last HEAD graphmem saw did to the
code, as that session's work (``changes.py``: symbols removed, added, changed or moved, files
deleted).
``reindex`` writes a line for every item that has none (its state as of the reindex).
"""

from __future__ import annotations

import functools
import json
import logging
import os
import re
from datetime import datetime, timezone
from pathlib import Path
from typing import Callable, Iterable, Sequence

from ..models import MemoryItem
from graphmem.code import changes
from .anchor_file import AnchorBook, anchors_file, append, book, compact
from .glob_anchor import find_globs
from .history import cat_file
from .symbols import language_of, parse_symbols
from .code_caches import CACHES
from .code_tuning import current
from .tree import Snapshot, snapshot

log = logging.getLogger("graphmem.code")

EPISODE_KINDS = ("turn", "step")  # their records name the episodic session they belong to
_PATH = re.compile(r"[\w@+~-][\w./@+~-]*")
# a quoted or backticked span holding a space: a path with spaces can only be named this way
_QUOTED = re.compile(r"`([^`\n]+ [^`\n]*)`|\"([^\"\n]+ [^\"\n]*)\"|'([^'\n]+ [^'\n]*)'")
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*")


__all__ = ["AnchorBook", "anchors_file", "backfill", "book", "compact", "record"]


def _looks_like_symbol(name: str, text: str, start: int) -> bool:
    """Prose words are not symbol names: keep dotted, snake, camel or backticked names and calls."""
    if "." in name or "_" in name.strip("_") or any(c.isupper() for c in name[1:]):
        return True
    before, after = text[start - 1:start], text[start + len(name):start + len(name) + 1]
    return before == "`" or after == "("


def find_paths(text: str, snap: Snapshot) -> list[str]:
    """Paths of files in the tree that ``text`` names (whole relative paths, or unique file names;
    a path holding a space when quoted or backticked whole)."""
    out: list[str] = []
    for m in _PATH.finditer(text):
        tok = m.group(0).rstrip(".").removeprefix("./")
        if tok in snap.files:
            out.append(tok)
        elif "." in tok and "/" not in tok:
            same = snap.by_basename.get(tok)
            if same and len(same) == 1:
                out.append(same[0])
        elif "/" in tok:  # a path given from a parent folder: keep the unique tail match
            tail = tok.lstrip("/")
            hits = [p for p in snap.by_basename.get(tail.rsplit("/", 1)[-1], ())
                    if p.endswith("/" + tail)]
            if len(hits) == 1:
                out.append(hits[0])
    for m in _QUOTED.finditer(text) if " " in text else ():  # `src/my dir/x.py`: quoted whole
        tok = next(g for g in m.groups() if g).strip().removeprefix("./")
        if tok in snap.files:
            out.append(tok)
    return list(dict.fromkeys(out))


def query_symbols(text: str) -> list[str]:
    """The symbol names ``text`` uses (backticked, dotted, snake or camel case, or called), in
    order; a dotted name also as its last two parts (``pkg.Client.charge`` -> ``Client.charge``)."""
    memo = CACHES.query_symbols  # a search asks three times (removal, touched, asked_gone)
    got = memo.get(text)
    if got is None:
        got = memo.put(text, _query_symbols(text))  # one scan
    return list(got)


def _query_symbols(text: str) -> tuple[str, ...]:
    out: dict[str, None] = {}
    for m in _IDENT.finditer(text):
        name = m.group(0)
        if _looks_like_symbol(name, text, m.start()):
            out[name] = None
            if name.count(".") > 1:
                out[".".join(name.split(".")[-2:])] = None
    return tuple(out)


def find_symbols(text: str, snap: Snapshot, near: list[str]) -> list[dict]:
    """Symbol anchors for the names ``text`` uses that the project defines."""
    defs = snap.definitions
    out: dict[tuple[str, str], dict] = {}
    for m in _IDENT.finditer(text):
        name = m.group(0)
        if not _looks_like_symbol(name, text, m.start()):
            continue
        parts = name.split(".")
        for cand in (name, ".".join(parts[-2:]), parts[-1]):
            found = defs.get(cand)
            if not found:
                continue
            if len(parts) > 1 and cand == parts[-1] and not _looks_like_symbol(cand, cand, 0):
                break  # "pytest.approx" -> "approx" is fine, "a.b" -> "b" alone is too weak
            local = [f for f in found if f[0] in near] or found
            if len({p for p, _ in local}) <= current().max_symbol_files:
                for path, sym in local:
                    out.setdefault((path, sym.name), {
                        "path": path, "blob": snap.files[path], "symbol": sym.name,
                        "lines": [sym.start, sym.end], "digest": sym.digest})
            break
    return list(out.values())


def anchors_for(item: MemoryItem, snap: Snapshot, session_paths: list[str],
                touched: Sequence[dict] = ()) -> list[dict]:
    """The anchors of one item: its own paths and symbols, then its session's files and the
    symbols the session added or changed there (``touched_symbols``)."""
    text = item.text
    own = find_paths(text, snap)
    meta_path = item.metadata.get("path") if isinstance(item.metadata, dict) else None
    if isinstance(meta_path, str) and meta_path in snap.files and meta_path not in own:
        own.insert(0, meta_path)
    if item.kind == "file" and isinstance(meta_path, str):
        text = str(item.metadata.get("purpose", ""))  # its symbols are those of its own file
        syms = [a for a in find_symbols(text, snap, [meta_path]) if a["path"] == meta_path]
    else:
        syms = find_symbols(text, snap, own or session_paths)
    anchored = {a["path"] for a in syms}
    out = [*syms, *({"path": g, "glob": True} for g in find_globs(item.text, snap)),
           *({"path": p, "blob": snap.files[p]} for p in own if p not in anchored)]
    most = current().max_anchors
    if item.kind not in ("file", "turn", "step"):  # the whole list: one set for the session
        return out[:most] + [{"path": p, "blob": snap.files[p], "via": "session"}
                             for p in session_paths[:most]] + list(touched)
    return out[:most]


def touched_symbols(snap: Snapshot, known: AnchorBook, paths: list[str],
                    seen: dict[str, str | None] | None = None) -> list[dict]:
    """The symbols of ``paths`` that were added or whose lines changed since graphmem last saw
    each file (its blob in the last record naming it, else the file at the last record's HEAD,
    where a file missing there is new): session anchors with ``"touched": true``. Only in git
    (an old version is taken from ``seen``, the versions this write read already, else read by
    its id with one ``git cat-file --batch``)."""
    if not snap.git or not paths:
        return []
    wanted: dict[str, str] = {}  # path -> what to read of its old version
    for path in dict.fromkeys(paths):
        old = known.blobs.get(path)
        if old is None and known.last_head and known.last_head != snap.head:
            old = f"{known.last_head}:{path}"
        if old is not None and old != snap.files.get(path) and language_of(path):
            wanted[path] = old
    if not wanted:
        return []
    seen = seen or {}
    rest = [n for n in wanted.values() if n not in seen]
    tuning = current()
    texts = {**seen, **(cat_file(snap.root, rest, tuning.max_parse_bytes) if rest else {})}
    out: list[dict] = []
    for path, old in wanted.items():
        if old not in texts:
            continue  # an object git no longer has: unknown, so nothing is claimed
        before = {(s.name, s.digest) for s in parse_symbols(path, texts[old] or "")}
        for sym in snap.symbols(path):
            if (sym.name, sym.digest) not in before:
                out.append({"path": path, "symbol": sym.name, "digest": sym.digest,
                            "via": "session", "touched": True})  # what its state needs
    return out[:tuning.max_touched]


def record(project_dir: str | Path | None, spec_dir: str | Path | None,
           items: Iterable[MemoryItem], with_work: bool = True) -> int:
    """Compute and append the anchors of ``items`` (and, with ``with_work``, the work line
    of the first write since HEAD moved); returns the anchor records written (0 without code)."""
    items = list(items)
    if not items or project_dir is None or spec_dir is None:
        return 0
    snap = snapshot(project_dir)
    if snap.git and _names_new_file(items, snap):
        snap = snapshot(project_dir, untracked_age=0)  # a file created since the list was read
    if not snap.files:
        return 0
    session_paths: dict[str | None, list[str]] = {}
    for it in items:  # files a session's discoveries list anchor that session's other items
        p = it.metadata.get("path") if it.kind == "file" and it.session else None
        if isinstance(p, str) and p in snap.files:
            session_paths.setdefault(it.session, []).append(p)
    known = book(spec_dir)
    at = datetime.now(timezone.utc).isoformat(timespec="seconds")
    seen: dict[str, str | None] = {}  # old versions read for the work line, by cat_file name
    work = work_lines(snap, known, items, at, str(spec_dir), seen) if with_work else []
    touched = touched_symbols(snap, known, [p for ps in session_paths.values() for p in ps], seen)
    groups: dict[str, dict] = {}
    for it in items:
        paths = session_paths.get(it.session, []) if it.session else []
        found = anchors_for(it, snap, paths, [a for a in touched if a["path"] in paths])
        if not found:
            continue
        episode = it.session if it.kind in EPISODE_KINDS else None
        key = json.dumps([episode, found], sort_keys=True)
        groups.setdefault(key, {"items": [], "anchors": found, "session": episode})["items"].append(it.id)
    if not groups and not work and with_work and snap.git and snap.head \
            and snap.head != known.last_head:
        work = [{"work": snap.head, "at": at}]  # nothing anchored: the HEAD seen, for the next diff
    if not groups and not work:
        return 0
    append(spec_dir, [*work, *({"items": g["items"], "head": snap.head, "at": at,
                                "session": g["session"], "anchors": g["anchors"]}
                               for g in groups.values())])
    return len(groups)


def _names_new_file(items: list[MemoryItem], snap: Snapshot) -> bool:
    """Whether an item names, by its relative path, a file on disk the snapshot does not hold
    (new and untracked since its list of untracked files was read): one ``stat`` per such
    path, nothing for paths it knows."""
    for it in items:
        path = it.metadata.get("path") if it.kind == "file" else None
        tokens = [path] if isinstance(path, str) else []
        tokens += [m.group(0).rstrip(".").removeprefix("./") for m in _PATH.finditer(it.text)
                   if "/" in m.group(0)]
        for tok in tokens:
            if tok and tok not in snap.files and not tok.startswith("/") \
                    and os.path.isfile(os.path.join(snap.root, tok)):
                return True
    return False


def work_lines(snap: Snapshot, known: AnchorBook, items: list[MemoryItem], at: str,
               spec: str, seen: dict[str, str | None] | None = None) -> list[dict]:
    """The work line of the first write since HEAD moved (``changes.py``), or the line by which
    a new session writing at an already recorded HEAD joins that work; empty otherwise."""
    if not snap.git or not snap.head:
        return []
    sessions = list(dict.fromkeys(it.session for it in items if it.session))
    have = known.works.by_head.get(snap.head)
    if have is not None:
        if not changes.did_something(have):
            return []
        # an episodic session's turns and steps written after the commit join its work (a
        # numbered session writing at the same HEAD did not commit: not this work's)
        new = list(dict.fromkeys(it.session for it in items if it.kind in EPISODE_KINDS
                                 and it.session and it.session not in have["sessions"]))
        ids = changes.item_ids([it for it in items if it.session in new])
        return [{"work": snap.head, "sessions": new, "items": ids}] if new else []
    key = (spec, known.last_head or "", snap.head)
    no_work = CACHES.no_work  # (spec, base, HEAD) whose commits changed no code
    if known.last_head in (None, snap.head) or key in no_work:
        return []
    work = changes.compute(snap, known.last_head, seen)
    if not work or set(work) == {"base"}:
        if len(no_work) > current().no_work_memo:
            no_work.clear()
        no_work.add(key)
        return []
    return [changes.line(snap, work, at, changes.item_ids(items), sessions)]


def backfill(project_dir: str | Path, items: list[MemoryItem],
             held: Callable[[str], set[str]] | None = None) -> int:
    """For ``reindex`` and ``anchors refresh``: anchor every item whose spec's ``anchors.jsonl``
    does not name it yet.

    ``items`` were listed before this runs, so a writer may have added items (and their anchor
    records) since: the records of items the files no longer hold are dropped only by asking
    ``held(spec)`` (the ids the spec's files hold now) under the compaction's lock, where no
    append can come between; without it no item's record is dropped.
    """
    by_spec: dict[str, list[MemoryItem]] = {}
    for it in items:  # an item names its spec relative to the project root
        if it.spec:
            by_spec.setdefault(str(Path(project_dir) / it.spec), []).append(it)
    written = 0
    for spec, its in by_spec.items():
        b = book(spec)
        known = b.records
        missing = [it for it in its if it.id not in known]
        try:
            derived = changes.derive(snapshot(project_dir), b.heads, b.works.by_head)
            if derived:  # a file written before work lines, or that lost them
                append(spec, derived)
            written += record(project_dir, spec, missing, with_work=False)  # old items: no new work
            if len(known) > len(its) + written or b.inline:  # items the files no longer hold,
                # or records in the format before sets: the file is written again in this one
                compact(spec, live=None if held is None else functools.partial(held, spec))
        except OSError as exc:
            log.warning("anchors of %s not written: %s", spec, exc)
    return written
