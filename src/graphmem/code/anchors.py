"""Anchors: the code a memory talks about, and that code's state when the memory was written.

When items are written, each gets the file paths it names that exist in the project tree (in its
text, its ``metadata.path`` for codebase-map entries, step payloads) and the symbols it names that
the project defines (see ``symbols.py``); items of one session file are also anchored, as
``"via": "session"``, to the files that session's discoveries list. Each anchor keeps the file's
git blob id (and for a symbol its lines and a hash of them), with HEAD at write time.

Stored beside the reference files as ``memory/anchors.jsonl``, append-only, one JSON object per
line, the last line naming an item wins::

    {"items": ["3f0c..."], "head": "9b1e...", "at": "2026-12-01T20:00:00+00:00",
     "anchors": [{"path": "src/pay.py", "blob": "a1b2...", "symbol": "refund", "lines": [10, 24],
                  "digest": "77aa..."}, {"path": "src/api.py", "blob": "c3d4...", "via": "session"}]}

``reindex`` writes a line for every item that has none (its state as of the reindex).

Compaction (``compact``): once the file holds more than ``COMPACT_RATIO`` times the lines its
readers need and at least ``COMPACT_MIN_BYTES``, the next write rewrites it with only the lines
that still decide something (the last line of each item, and the lines that give a session its
files), in order, to a temp file renamed over it, under the same lock every append takes. A
reader sees the old file or the new one (a new inode: it reads it again), a crash leaves the old
file and a stray temp file, and nothing is lost: the file is derived (``reindex`` rebuilds it).
"""

from __future__ import annotations

import json
import logging
import re
from datetime import datetime, timezone
from pathlib import Path
from typing import Iterable

from ..files.atomic import append_line, atomic_write_bytes
from ..files.jsonl_tail import JsonlTail, tail
from ..files.lock import folder_lock
from ..files.safe import open_file, real_dir
from ..models import MemoryItem
from .tree import Snapshot, snapshot

log = logging.getLogger("graphmem.code")

FILE_NAME = "anchors.jsonl"
LOCK_NAME = ".anchors.lock"  # every append and every compaction of anchors.jsonl holds it
COMPACT_RATIO = 3
COMPACT_MIN_BYTES = 256_000
MAX_SYMBOL_FILES = 3  # a name defined in more files than this says too little to anchor
MAX_ANCHORS = 40
EPISODE_KINDS = ("turn", "step")  # their records name the episodic session they belong to
_compacted: dict[str, int] = {}  # anchors file -> its size after this process compacted it
_PATH = re.compile(r"[\w@+~-][\w./@+~-]*")
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*")


def anchors_file(spec_dir: str | Path) -> Path:
    """Where a spec folder keeps its anchors."""
    return Path(spec_dir) / "memory" / FILE_NAME


def _looks_like_symbol(name: str, text: str, start: int) -> bool:
    """Prose words are not symbol names: keep dotted, snake, camel or backticked names and calls."""
    if "." in name or "_" in name.strip("_") or any(c.isupper() for c in name[1:]):
        return True
    before, after = text[start - 1:start], text[start + len(name):start + len(name) + 1]
    return before == "`" or after == "("


def find_paths(text: str, snap: Snapshot) -> list[str]:
    """Paths of files in the tree that ``text`` names (whole relative paths, or unique file names)."""
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
    return list(dict.fromkeys(out))


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
            if len({p for p, _ in local}) <= MAX_SYMBOL_FILES:
                for path, sym in local:
                    out.setdefault((path, sym.name), {
                        "path": path, "blob": snap.files[path], "symbol": sym.name,
                        "lines": [sym.start, sym.end], "digest": sym.digest})
            break
    return list(out.values())


def anchors_for(item: MemoryItem, snap: Snapshot, session_paths: list[str]) -> list[dict]:
    """The anchors of one item: its own paths and symbols, then its session's files."""
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
    out = [*syms, *({"path": p, "blob": snap.files[p]} for p in own if p not in anchored)]
    if item.kind not in ("file", "turn", "step"):
        out += [{"path": p, "blob": snap.files[p], "via": "session"} for p in session_paths
                if p not in own and p not in anchored]
    return out[:MAX_ANCHORS]


def record(project_dir: str | Path | None, spec_dir: str | Path | None,
           items: Iterable[MemoryItem]) -> int:
    """Compute and append the anchors of ``items``; returns the lines written (0 without code)."""
    items = list(items)
    if not items or project_dir is None or spec_dir is None:
        return 0
    snap = snapshot(project_dir)
    if not snap.files:
        return 0
    session_paths: dict[str | None, list[str]] = {}
    for it in items:  # files a session's discoveries list anchor that session's other items
        p = it.metadata.get("path") if it.kind == "file" and it.session else None
        if isinstance(p, str) and p in snap.files:
            session_paths.setdefault(it.session, []).append(p)
    groups: dict[str, dict] = {}
    for it in items:
        found = anchors_for(it, snap, session_paths.get(it.session, []) if it.session else [])
        if not found:
            continue
        episode = it.session if it.kind in EPISODE_KINDS else None
        key = json.dumps([episode, found], sort_keys=True)
        groups.setdefault(key, {"items": [], "anchors": found, "session": episode})["items"].append(it.id)
    if not groups:
        return 0
    at = datetime.now(timezone.utc).isoformat(timespec="seconds")
    lines = "".join(json.dumps({"items": g["items"], "head": snap.head, "at": at,
                                **({"session": g["session"]} if g["session"] else {}),
                                "anchors": g["anchors"]}, ensure_ascii=False) + "\n"
                    for g in groups.values())
    path = anchors_file(spec_dir)
    real_dir(path.parent, create=True)
    with folder_lock(path.parent, name=LOCK_NAME):  # a compaction never drops an append
        append_line(path, lines, sync=False)  # derived: reindex writes it again
    if book(spec_dir).wants_compaction():
        compact(spec_dir)
    return len(groups)


def needed(lines: list[bytes], live: set[str] | None = None) -> list[bytes]:
    """The lines a reader of ``lines`` needs: the last one naming each item (of ``live`` ones,
    when given), and those that add a file to their session's list (``AnchorBook``), in order."""
    recs: list[dict | None] = []
    for line in lines:
        try:
            rec = json.loads(line)
        except ValueError:
            rec = None
        recs.append(rec if isinstance(rec, dict) and isinstance(rec.get("anchors"), list) else None)
    last: dict[str, int] = {}
    for i, rec in enumerate(recs):
        for item_id in (rec or {}).get("items") or []:
            last[item_id] = i
    keep = {i for item_id, i in last.items() if live is None or item_id in live}
    files: dict[str, set] = {}
    for i, rec in enumerate(recs):
        if rec is None or not isinstance(rec.get("session"), str):
            continue
        have = files.setdefault(rec["session"], set())
        new = {a.get("path") for a in rec["anchors"] if isinstance(a, dict)} - have
        if new and len(have) < MAX_ANCHORS:
            keep.add(i)
            have.update(new)
    return [lines[i] for i in sorted(keep)]


def compact(spec_dir: str | Path, live: set[str] | None = None) -> tuple[int, int]:
    """Rewrite ``anchors.jsonl`` with only the lines readers need -> (bytes before, after)."""
    path = anchors_file(spec_dir)
    with folder_lock(path.parent, name=LOCK_NAME):
        try:
            with open_file(path) as fh:
                data = fh.read()
        except FileNotFoundError:
            return 0, 0
        body = data[:data.rfind(b"\n") + 1]  # a torn last line is dropped
        kept = needed(body.splitlines(), live)
        out = b"".join(line + b"\n" for line in kept)
        if len(out) < len(data):
            atomic_write_bytes(path, out)
        _compacted[str(path)] = min(len(out), len(data))
    return len(data), min(len(out), len(data))


class AnchorBook(JsonlTail):
    """Item id -> its latest anchor record, read incrementally from one ``anchors.jsonl``."""

    def reset(self) -> None:
        self.lines = 0  # lines read; against the distinct records, it says when to compact
        self.records: dict[str, dict] = {}
        self.sessions: dict[str, dict] = {}  # episodic session -> the files its turns/steps name
        self.by_path: dict[str, list[str]] = {}  # path -> ids of the items anchored there, in order

    def session_record(self, session: str) -> dict | None:
        """A record for an unanchored turn or step: its session's other files, ``via`` session."""
        return self.sessions.get(session)

    def wants_compaction(self) -> bool:
        """Whether most lines no longer decide anything (see ``compact``); after a compaction,
        not before the file is ``COMPACT_RATIO`` times its compacted size again."""
        distinct = len({id(r) for r in self.records.values()})
        return self.offset >= max(COMPACT_MIN_BYTES, COMPACT_RATIO * _compacted.get(str(self.path), 0)) \
            and self.lines > COMPACT_RATIO * (distinct + len(self.sessions))

    def take(self, rec: dict) -> None:
        self.lines += 1
        if not isinstance(rec.get("anchors"), list):
            return
        for item_id in rec.get("items") or []:
            self.records[item_id] = rec
        for path in {a.get("path") for a in rec["anchors"] if isinstance(a, dict)}:
            self.by_path.setdefault(path, []).extend(rec.get("items") or [])
        if isinstance(rec.get("session"), str):
            self._add_session(rec)

    def _add_session(self, rec: dict) -> None:
        got = self.sessions.setdefault(rec["session"], {"items": [], "head": rec.get("head"),
                                                        "at": rec.get("at"), "anchors": []})
        have = {a["path"] for a in got["anchors"]}
        for a in rec["anchors"]:
            if isinstance(a, dict) and a.get("path") not in have and len(have) < MAX_ANCHORS:
                have.add(a.get("path"))
                got["anchors"].append({"path": a.get("path"), "blob": a.get("blob"), "via": "session"})


def book(spec_dir: str | Path) -> AnchorBook:
    """The (cached, refreshed) anchors of one spec folder."""
    return tail(AnchorBook, anchors_file(spec_dir))


def backfill(project_dir: str | Path, items: list[MemoryItem]) -> int:
    """For ``reindex``: anchor every item whose spec's ``anchors.jsonl`` does not name it yet."""
    by_spec: dict[str, list[MemoryItem]] = {}
    for it in items:  # an item names its spec relative to the project root
        if it.spec:
            by_spec.setdefault(str(Path(project_dir) / it.spec), []).append(it)
    written = 0
    for spec, its in by_spec.items():
        known = book(spec).records
        missing = [it for it in its if it.id not in known]
        try:
            written += record(project_dir, spec, missing)
            if len(known) > len(its) + written:  # lines of items the files no longer hold
                compact(spec, live={it.id for it in its})
        except OSError as exc:
            log.warning("anchors of %s not written: %s", spec, exc)
    return written
