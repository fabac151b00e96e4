"""What happened to a file since an anchor was taken: commits that touched it, and lines kept.

``History`` counts, for a path and the HEAD an anchor recorded, the commits since that HEAD that
touched the path (``git log --name-only`` read once, then extended by ``old..HEAD`` after each
commit: one subprocess per repository state, never one per hit). History is read as a line,
newest ``MAX_COMMITS`` commits, ``--topo-order``: on a merge-heavy history a commit of a merged
branch counts as "since" when git lists it after the anchor's HEAD, which is the usual reading
of "since this was learned". An anchor older than the window counts as ``None`` (unknown).

``kept_share(old_blob, new_blob)`` is the share of the old blob's lines still in the new one
(``difflib`` over the two blobs read with one ``git cat-file --batch``), cached forever per
pair: a file-level anchor is only ``changed`` when most of what the memory saw is rewritten.
"""

from __future__ import annotations

import bisect
import difflib
import subprocess
import threading
from pathlib import Path

MAX_COMMITS = 20_000
MAX_BLOB_BYTES = 512_000
MAX_PAIRS = 50_000
_lock = threading.Lock()
_histories: dict[str, "History"] = {}
_kept: dict[tuple[str, str], float | None] = {}


def _git(root: Path, *args: str, data: bytes | None = None, timeout: float = 30) -> bytes | None:
    try:
        out = subprocess.run(["git", "-C", str(root), *args], input=data, capture_output=True,
                             timeout=timeout)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout if out.returncode == 0 else None


class History:
    """Commits of one repository, oldest first, with the paths each touched."""

    def __init__(self, root: Path):
        self.root = root
        self.head: str | None = None
        self.pos: dict[str, int] = {}          # commit -> its place, growing with time
        self.touched: dict[str, list[int]] = {}  # path -> places of the commits touching it
        self.next = 0

    def _take(self, log: bytes) -> None:
        """Add ``git log`` output (newest first) to the end of the line."""
        commits: list[tuple[str, list[str]]] = []
        for block in log.split(b"\x00\x00")[1:] if log.startswith(b"\x00\x00") else []:
            lines = block.decode("utf-8", "surrogateescape").split("\n")
            commits.append((lines[0].strip(), [x for x in lines[1:] if x]))
        for sha, paths in reversed(commits):
            if sha in self.pos:
                continue
            self.pos[sha] = self.next
            for p in paths:
                self.touched.setdefault(p, []).append(self.next)
            self.next += 1

    def update(self, head: str) -> None:
        """Bring the line up to ``head`` (incrementally when it descends from the last one)."""
        if head == self.head:
            return
        fmt = ["log", "--topo-order", "--no-renames", "--name-only", "--format=%x00%x00%H"]
        log = None
        if self.head is not None:
            log = _git(self.root, *fmt, f"{self.head}..{head}")
            if log is not None and _git(self.root, "merge-base", "--is-ancestor", self.head,
                                        head) is None:
                log = None  # a reset or checkout elsewhere: read it again
        if log is None:
            self.pos, self.touched, self.next = {}, {}, 0
            log = _git(self.root, *fmt, f"--max-count={MAX_COMMITS}", head) or b""
        self._take(log)
        self.head = head

    def commits_since(self, since: str | None, path: str) -> int | None:
        """Commits after ``since`` touching ``path`` (None when ``since`` is not in the window)."""
        at = self.pos.get(since or "")
        if at is None:
            return None
        places = self.touched.get(path, [])
        return len(places) - bisect.bisect_right(places, at)


def history(root: str | Path, head: str | None) -> History | None:
    """The (cached, updated) history of the repository at ``root`` up to ``head``."""
    if not head:
        return None
    key = str(root)
    with _lock:
        h = _histories.get(key)
        if h is None:
            h = _histories[key] = History(Path(root))
        h.update(head)
    return h


def kept_shares(root: str | Path, pairs: set[tuple[str, str]]) -> dict[tuple[str, str], float | None]:
    """For each (old blob, new blob): the share of the old lines the new one keeps (None when a
    blob cannot be read, e.g. outside git or an object git no longer has)."""
    out = {p: _kept[p] for p in pairs if p in _kept}
    todo = [p for p in pairs if p not in _kept]
    if not todo:
        return out
    blobs = sorted({b for p in todo for b in p})
    raw = _git(Path(root), "cat-file", "--batch", data="".join(b + "\n" for b in blobs).encode())
    texts = _parse_batch(raw or b"", blobs)
    if len(_kept) > MAX_PAIRS:
        _kept.clear()
    for old, new in todo:
        a, b = texts.get(old), texts.get(new)
        if a is None or b is None:
            share = None
        else:
            la, lb = a.splitlines(), b.splitlines()
            if not la:
                share = 1.0
            else:
                sm = difflib.SequenceMatcher(None, la, lb, autojunk=False)
                share = sum(m.size for m in sm.get_matching_blocks()) / len(la)
        _kept[(old, new)] = out[(old, new)] = share
    return out


def _parse_batch(raw: bytes, blobs: list[str]) -> dict[str, str]:
    """``git cat-file --batch`` output -> blob id -> text (missing and big ones left out)."""
    out: dict[str, str] = {}
    i = 0
    for blob in blobs:
        nl = raw.find(b"\n", i)
        if nl < 0:
            break
        head = raw[i:nl].split()
        i = nl + 1
        if len(head) != 3:  # "<id> missing"
            continue
        size = int(head[2])
        if size <= MAX_BLOB_BYTES:
            out[blob] = raw[i:i + size].decode("utf-8", "replace")
        i += size + 1
    return out
