"""``memory/anchors.jsonl``: the anchors' file format, its reader (``AnchorBook``) and its compaction.

Append-only JSON Lines, one object a line, in two shapes. An anchor list is stored once, as a
*set* line named by a hash of its content, and records refer to it by that name::

    {"set": "5be1c0a9e3f2", "anchors": [{"path": "src/pay.py", "blob": "a1b2...", "symbol": "refund",
                                         "lines": [10, 24], "digest": "77aa..."}]}
    {"set": "0c4d19aa7b21", "anchors": [{"path": "src/api.py", "blob": "c3d4..."}]}
    {"items": ["3f0c..."], "head": "9b1e...", "at": "2026-12-01T20:00:00+00:00",
     "anchors": "5be1c0a9e3f2", "session_files": "0c4d19aa7b21"}

``anchors`` names the item's own anchors (the code its text names), ``session_files`` the files
of the session it was learned in and the symbols it added or changed there (``"touched": true``),
which readers see as ``"via": "session"`` anchors; either may be absent. A record of a turn or
step also names its episodic ``session``.
The last record naming an item wins. A record written before this format holds its anchors
inline (``"anchors": [...]``, session files marked ``"via": "session"``); it still loads, and the
next compaction (or ``reindex``) writes it in this format.

*Work* lines (``{"work": "<HEAD>", ...}``, ``changes.py``) say what the session writing at that
HEAD did to the code: the symbols it removed, added, changed or moved, the files it deleted.

A line that is not JSON, or a record whose set is missing, is skipped with a warning; nothing
else is lost. Appends take ``LOCK_NAME`` and cut a torn last line first, so a crash mid-line
never swallows the next record.

Compaction (``compact``): once the file holds more than ``compact_ratio`` times the lines its
readers need and at least ``compact_min_bytes`` (``code_tuning.py``), the next write rewrites it
with only what still decides something (the last record of each item, the records that give an episodic session its
files, the sets they name, and every work line), in order, to a temp file renamed over it, under the same lock
every append takes. A reader sees the old file or the new one (a new inode: it reads it again),
a crash leaves the old file and a stray temp file, and nothing is lost: the file is derived
(``reindex`` rebuilds it).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
from pathlib import Path
from typing import Callable, Iterable

from ..files.atomic import append_line, atomic_write_bytes, repair_tail
from ..files.jsonl_tail import JsonlTail, tail
from ..files.lock import folder_lock
from ..files.safe import file_stat, open_file, real_dir
from .changes import Works
from .code_caches import CACHES
from .code_tuning import current

log = logging.getLogger("graphmem.code")

FILE_NAME = "anchors.jsonl"
LOCK_NAME = ".anchors.lock"  # every append and every compaction of anchors.jsonl holds it


def anchors_file(spec_dir: str | Path) -> Path:
    """Where a spec folder keeps its anchors."""
    return Path(spec_dir) / "memory" / FILE_NAME


def set_name(anchors: list[dict]) -> str:
    """The name of an anchor list: a hash of its content, so equal lists are stored once."""
    data = json.dumps(anchors, sort_keys=True, ensure_ascii=False).encode("utf-8")
    return hashlib.sha1(data).hexdigest()[:12]


def encode(rec: dict, known: set[str]) -> list[str]:
    """The lines of one record ``{"items", "head", "at", "session"?, "anchors": [...]}`` (its
    session's anchors marked ``via``): the sets not in ``known`` (which it extends), then the
    record naming them. A work line (``changes.py``) is written as it is."""
    if "work" in rec:
        return [json.dumps(rec, ensure_ascii=False) + "\n"]
    own = [a for a in rec["anchors"] if not a.get("via")]
    via = [{k: v for k, v in a.items() if k != "via"} for a in rec["anchors"] if a.get("via")]
    out = {"items": rec["items"], "head": rec.get("head"), "at": rec.get("at")}
    if rec.get("session") is not None:
        out["session"] = rec["session"]
    lines = []
    for key, anchors in (("anchors", own), ("session_files", via)):
        if not anchors:
            continue
        name = out[key] = set_name(anchors)
        if name not in known:
            known.add(name)
            lines.append(json.dumps({"set": name, "anchors": anchors}, ensure_ascii=False) + "\n")
    lines.append(json.dumps(out, ensure_ascii=False) + "\n")
    return lines


_TEXT_KEYS = ("blob", "symbol", "digest", "via")  # an anchor's optional text fields


def _anchor_ok(a) -> bool:
    """Whether one anchor has the shape readers rely on (a hand edit or a merge may break it)."""
    if not isinstance(a, dict) or not isinstance(a.get("path"), str):
        return False
    if any(not isinstance(a.get(k), (str, type(None))) for k in _TEXT_KEYS):
        return False
    lines = a.get("lines")
    if lines is not None and not (isinstance(lines, list) and len(lines) == 2 and all(
            isinstance(n, int) and not isinstance(n, bool) for n in lines)):
        return False
    return all(isinstance(a.get(k), (bool, type(None))) for k in ("touched", "glob"))


def _anchor_list(value) -> list[dict] | None:
    """An anchor list, or None when it is not one or any of its anchors is malformed."""
    if not isinstance(value, list) or not all(_anchor_ok(a) for a in value):
        return None
    return value


def _optional_text(rec: dict, *keys: str) -> bool:
    return all(isinstance(rec.get(k), (str, type(None))) for k in keys)


class _Resolver:
    """Records of either format -> ``{..., "anchors": [own..., session (via)...]}``."""

    def __init__(self) -> None:
        self.sets: dict[str, list[dict]] = {}
        self.inline = 0  # records read in the format before sets
        self._via: dict[str, list[dict]] = {}  # a set seen as session files, marked once

    def add_set(self, rec: dict) -> bool:
        anchors = _anchor_list(rec.get("anchors"))
        if not isinstance(rec.get("set"), str) or anchors is None:
            return False
        self.sets.setdefault(rec["set"], anchors)
        return True

    def resolve(self, rec: dict) -> dict | None:
        items = rec.get("items")
        if not isinstance(items, list) or not all(isinstance(i, str) for i in items) \
                or not _optional_text(rec, "head", "at", "session", "session_files"):
            return None
        inline = _anchor_list(rec.get("anchors"))
        if inline is not None:  # the format before sets
            self.inline += 1
            return {**rec, "anchors": inline}
        own_ref, via_ref = rec.get("anchors"), rec.get("session_files")
        if own_ref is None and via_ref is None or not _optional_text(rec, "anchors"):
            return None
        own = self.sets.get(own_ref) if own_ref is not None else []
        via = self._session(via_ref) if via_ref is not None else []
        if own is None or via is None:
            return None
        out = {k: v for k, v in rec.items() if k != "session_files"}
        out["anchors"] = [*own, *via]
        out["set_names"] = [n for n in (own_ref, via_ref) if n is not None]  # for compaction
        return out

    def _session(self, name) -> list[dict] | None:
        got = self._via.get(name)
        if got is None and name in self.sets:
            got = self._via[name] = [{**a, "via": "session"} for a in self.sets[name]]
        return got


class AnchorBook(JsonlTail):
    """Item id -> its latest anchor record, read incrementally from one ``anchors.jsonl``."""

    def reset(self) -> None:
        self.lines = 0  # lines read; against the distinct records, it says when to compact
        self.resolver = _Resolver()
        self.records: dict[str, dict] = {}
        # item ids in the order their records were read (again when a newer record names one):
        # what changed since a reader last looked (``recall.write_position``)
        self.recorded: list[str] = []
        self.sessions: dict[str, dict] = {}  # episodic session -> the files its turns/steps name
        self.by_path: dict[str, list[str]] = {}  # path -> ids of the items anchored there, in order
        # path -> the items whose latest record names it, the newest last (``anchored_to``)
        self.now_by_path: dict[str, dict[str, None]] = {}
        # own anchors (not ``via`` a session) indexed as lines are read, for ``about.moved_here``:
        # symbol -> items naming it; path -> items anchored to the whole file; its blobs then
        self.by_symbol: dict[str, dict[str, None]] = {}
        self.file_items: dict[str, dict[str, None]] = {}
        self.file_blobs: dict[str, set[str]] = {}
        self.blobs: dict[str, str] = {}  # path -> its blob in the last record naming it
        # a glob anchor's pattern -> the items whose latest record names it (``glob_anchor.py``)
        self.globs: dict[str, dict[str, None]] = {}
        self.last_head: str | None = None  # HEAD when the last record was written
        self.works = Works()  # what the sessions did to the code (``changes.py``)
        self.heads: dict[str, list[str]] = {}  # HEAD -> items recorded there, first seen first
        self.work_lines = 0

    @property
    def inline(self) -> int:
        """How many records were read in the format before sets (``reindex`` rewrites them)."""
        return self.resolver.inline

    @property
    def sets(self) -> dict[str, list[dict]]:
        """The anchor sets read so far, by name."""
        return self.resolver.sets

    def session_record(self, session: str) -> dict | None:
        """A record for an unanchored turn or step: its session's other files, ``via`` session."""
        return self.sessions.get(session)

    def wants_compaction(self) -> bool:
        """Whether most lines no longer decide anything (see ``compact``); after a compaction,
        not before the file is ``compact_ratio`` times its compacted size again."""
        t = current()
        if self.offset < max(t.compact_min_bytes,
                             t.compact_ratio * CACHES.compacted.get(str(self.path), 0)):
            return False
        live = {id(r): r for r in self.records.values()}
        sets = {n for r in live.values() for n in r.get("set_names", ())}  # sets still named
        needed = len(live) + len(self.sessions) + len(sets) + self.work_lines
        return self.lines > t.compact_ratio * needed

    def skipped(self, line: bytes) -> None:
        try:  # the rare path: parsed again only to word the warning
            rec = json.loads(line)
        except (ValueError, RecursionError):
            rec = None
        what = ("a line that is not JSON" if not isinstance(rec, dict) else
                "a malformed work line" if "work" in rec else
                "a malformed anchor set" if "set" in rec else
                "an anchor record that names no readable anchors (or has fields of the wrong type)")
        log.warning("%s line %d: skipped %s: %.80r", self.path, self.line_no, what, line)

    def take(self, rec: dict) -> bool:
        self.lines += 1
        if "work" in rec:
            if not self.works.take(rec):
                return False
            self.work_lines += 1
            self.last_head = rec["work"]
            return True
        if "set" in rec:
            return self.resolver.add_set(rec)
        got = self.resolver.resolve(rec)
        if got is None:  # names no readable anchors
            return False
        for item_id in got["items"]:
            old = self.records.get(item_id)
            if old is not None and old is not got:  # its older record no longer decides
                for path in {a["path"] for a in old["anchors"]}:
                    self.now_by_path.get(path, {}).pop(item_id, None)
                    self.globs.get(path, {}).pop(item_id, None)
            self.records[item_id] = got
        self.recorded.extend(got["items"])
        if isinstance(got.get("head"), str):
            self.heads.setdefault(got["head"], []).extend(got["items"])
        for a in got["anchors"]:
            if a.get("glob"):
                self.globs.setdefault(a["path"], {}).update(dict.fromkeys(got["items"]))
        for path in {a["path"] for a in got["anchors"] if not a.get("glob")}:
            self.by_path.setdefault(path, []).extend(got["items"])
            now = self.now_by_path.setdefault(path, {})
            for item_id in got["items"]:  # the newest last
                now.pop(item_id, None)
                now[item_id] = None
        for a in got["anchors"]:
            if isinstance(a.get("blob"), str):
                self.blobs[a["path"]] = a["blob"]
            if a.get("via") or a.get("glob"):
                continue
            if a.get("symbol"):
                self.by_symbol.setdefault(a["symbol"], {}).update(dict.fromkeys(got["items"]))
            else:
                self.file_items.setdefault(a["path"], {}).update(dict.fromkeys(got["items"]))
                if isinstance(a.get("blob"), str):
                    self.file_blobs.setdefault(a["path"], set()).add(a["blob"])
        self.last_head = got.get("head") if isinstance(got.get("head"), str) else self.last_head
        if isinstance(got.get("session"), str):
            self._add_session(got)
            self.works.join(self.last_head, got["session"], got["items"])
        return True

    def _add_session(self, rec: dict) -> None:
        got = self.sessions.setdefault(rec["session"], {"items": [], "head": rec.get("head"),
                                                        "at": rec.get("at"), "anchors": []})
        have, most = {a["path"] for a in got["anchors"]}, current().max_session_files
        for a in rec["anchors"]:
            if a["path"] not in have and len(have) < most and not a.get("glob"):
                have.add(a["path"])
                got["anchors"].append({"path": a["path"], "blob": a.get("blob"), "via": "session"})


def book(spec_dir: str | Path) -> AnchorBook:
    """The (cached, refreshed) anchors of one spec folder."""
    return tail(AnchorBook, anchors_file(spec_dir))


def append(spec_dir: str | Path, recs: Iterable[dict]) -> None:
    """Append records (anchors inline, as ``encode`` takes them), writing each set not yet in the
    file once; compacts the file when most of it no longer decides anything."""
    path = anchors_file(spec_dir)
    real_dir(path.parent, create=True)
    with folder_lock(path.parent, name=LOCK_NAME):  # a compaction never drops an append
        known = set(book(spec_dir).sets)  # read under the lock: no compaction drops them meanwhile
        text = "".join(line for rec in recs for line in encode(rec, known))
        repair_tail(path)  # a torn last line must not swallow the first one written now
        append_line(path, text, sync=False)  # derived: reindex writes it again
    if book(spec_dir).wants_compaction():
        compact(spec_dir)


def _items_named(data: bytes) -> set[str]:
    """The item ids the anchor records in ``data`` name (whole lines only)."""
    out: set[str] = set()
    for line in data[:data.rfind(b"\n") + 1].splitlines():
        try:
            rec = json.loads(line)
        except (ValueError, RecursionError):
            continue
        items = rec.get("items") if isinstance(rec, dict) else None
        if isinstance(items, list):
            out.update(i for i in items if isinstance(i, str))
    return out


def needed(lines: list[bytes], live: set[str] | None = None) -> list[str]:
    """The lines a reader of ``lines`` needs, in this format: the last record naming each item
    (of ``live`` ones, when given) and those that add a file to their session's list
    (``AnchorBook``), in order, each after the sets it names."""
    resolver, recs = _Resolver(), []
    dropped, most = 0, current().max_session_files
    works = Works()
    for line in lines:
        try:
            rec = json.loads(line)
        except ValueError:
            rec = None
        if isinstance(rec, dict) and "work" in rec:
            if works.take(rec):
                recs.append(rec)  # every work line is kept, where it was
            else:
                dropped += 1
            continue
        if isinstance(rec, dict) and "set" in rec and resolver.add_set(rec):
            continue
        got = resolver.resolve(rec) if isinstance(rec, dict) else None
        dropped += got is None
        if got is not None:
            recs.append(got)
    if dropped:
        log.warning("anchors compaction: %d unreadable line(s) left out", dropped)
    last = {item_id: i for i, rec in enumerate(recs) if "work" not in rec for item_id in rec["items"]}
    keep = {i for item_id, i in last.items() if live is None or item_id in live}
    keep |= {i for i, rec in enumerate(recs) if "work" in rec}
    files: dict[str, set] = {}
    for i, rec in enumerate(recs):
        if "work" in rec or not isinstance(rec.get("session"), str):
            continue
        have = files.setdefault(rec["session"], set())
        new = {a["path"] for a in rec["anchors"]} - have
        if new and len(have) < most:
            keep.add(i)
            have.update(new)
    known: set[str] = set()
    return [line for i in sorted(keep) for line in encode(recs[i], known)]


def compact(spec_dir: str | Path,
            live: set[str] | Callable[[], set[str]] | None = None) -> tuple[int, int]:
    """Rewrite ``anchors.jsonl`` with only the lines readers need -> (bytes before, after).

    ``live``: the items whose records are kept (None: every item's). Given as a function (the
    ids the spec's files hold), it is asked after the file's size is noted, outside the lock
    (it reads files whose locks writers take before this one); a record appended past that size
    names an item written since, and is kept whatever ``live`` said.
    """
    path = anchors_file(spec_dir)
    asked, mark = callable(live), None
    if callable(live):
        mark = file_stat(path)
        live = live()
    with folder_lock(path.parent, name=LOCK_NAME):
        try:
            with open_file(path) as fh:
                data = fh.read()
                ino = os.fstat(fh.fileno()).st_ino
        except FileNotFoundError:
            return 0, 0
        if asked and mark is not None and mark.st_ino != ino:
            live = None  # replaced meanwhile: offsets mean nothing, keep every item's record
        elif asked and live is not None:
            start = data.rfind(b"\n", 0, mark.st_size if mark else 0) + 1  # from a line's start
            live = live | _items_named(data[start:])
        body = data[:data.rfind(b"\n") + 1]  # a torn last line is dropped
        out = "".join(needed(body.splitlines(), live)).encode("utf-8")
        if len(out) < len(data):
            atomic_write_bytes(path, out)
        CACHES.compacted[str(path)] = min(len(out), len(data))
    return len(data), min(len(out), len(data))
