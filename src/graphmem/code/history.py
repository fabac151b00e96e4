"""What happened to a file since an anchor was taken: commits that touched it, and lines kept.

``History`` counts, for a path and the HEAD an anchor recorded, the commits since that HEAD that
touched the path (``git log -M --name-status`` read once, then extended by ``old..HEAD`` after
each commit: one subprocess per new HEAD, never one per hit). Git's rename detection (``-M``: a
file renamed and edited in one commit, as long as half of it is kept) gives ``follow``: where a
path an anchor saw is now. History is read as a line,
newest ``max_commits`` commits (``code_tuning.py``), ``--topo-order``: on a merge-heavy history a
commit of a merged branch counts as "since" when git lists it after the anchor's HEAD, which is the usual reading
of "since this was learned". An anchor older than the window counts as ``None`` (unknown).

``kept_shares`` gives, per (old blob, new blob), the share of the old blob's lines still in the
new one, cached forever per pair: a whole-file anchor is only ``changed`` when most of what it saw
is rewritten. Blob ids name their content, so each blob's line counts are kept too (``line_blobs``
of them, least recently used out first): after a commit only the files it changed are read
(from the loose object store, else one ``git cat-file --batch`` for all of them), never an
anchored blob twice.
"""

from __future__ import annotations

import bisect
import hashlib
import os
import stat
import subprocess
import zlib
from collections import Counter
from pathlib import Path

from .code_caches import CACHES
from .code_tuning import current


def blob_id(data: bytes) -> str:
    """Git's blob id of ``data``."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


_OPEN_FLAGS = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)


def read_regular(path: str | Path, limit: int | None = None
                 ) -> tuple[bytes, os.stat_result] | None:
    """The bytes of a regular file and its ``fstat``; None when it is anything else (a FIFO,
    socket or device, or a link to one), unreadable, or over ``limit`` bytes. Opened without
    blocking and checked on the open descriptor: a FIFO swapped in after an earlier ``stat``
    is never read (reading it waits for a writer that may never come)."""
    try:
        fd = os.open(path, _OPEN_FLAGS)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode) or limit is not None and st.st_size > limit:
            return None
        with os.fdopen(fd, "rb", closefd=False) as fh:
            data = fh.read() if limit is None else fh.read(limit + 1)
    except OSError:
        return None
    finally:
        os.close(fd)
    if limit is not None and len(data) > limit:  # grew since the fstat
        return None
    return data, st


def git_dir(root: Path) -> Path | None:
    """The git folder of the work tree holding ``root`` (a worktree's or submodule's own)."""
    for folder in (root, *root.parents):
        dotgit = folder / ".git"
        if dotgit.is_dir():
            return dotgit
        if dotgit.is_file():  # a worktree or submodule: "gitdir: <path>"
            text = dotgit.read_text(errors="replace").strip()
            if text.startswith("gitdir:"):
                d = Path(text[7:].strip())
                return d if d.is_absolute() else (folder / d).resolve()
    return None


def common_dir(gitdir: Path) -> Path:
    """The repository's shared git folder (a linked worktree's ``commondir``, else ``gitdir``)."""
    try:
        rel = (gitdir / "commondir").read_text(errors="replace").strip()
    except OSError:
        return gitdir
    return (gitdir / rel) if rel else gitdir


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
        self.renamed: dict[str, list[tuple[int, str]]] = {}  # old path -> (place, new path)
        self.next = 0

    def _take(self, log: bytes) -> list[tuple[str, list[str], list[list[str]]]]:
        """Parse ``git log --name-status`` output (newest first) -> [(commit, parents, rows)],
        oldest first; a row is ``[status, path]`` or ``[R<score>, old path, new path]``."""
        commits = []
        for block in log.split(b"\x00\x00")[1:]:
            lines = block.decode("utf-8", "surrogateescape").split("\n")
            ids = lines[0].split()
            if ids:
                rows = [x.split("\t") for x in lines[1:] if "\t" in x]
                commits.append((ids[0], ids[1:], rows))
        commits.reverse()
        return commits

    def _add(self, commits: list[tuple[str, list[str], list[list[str]]]]) -> None:
        for sha, _, rows in commits:
            if sha in self.pos:
                continue
            self.pos[sha] = self.next
            for row in rows:
                for p in row[1:]:  # a rename touches its old and its new path
                    self.touched.setdefault(p, []).append(self.next)
                if row[0].startswith("R") and len(row) == 3:
                    self.renamed.setdefault(row[1], []).append((self.next, row[2]))
            self.next += 1

    def update(self, head: str) -> None:
        """Bring the line up to ``head``: one ``git log`` of what is new when ``head`` is a
        chain of commits on top of the last one (each with one parent), else the whole window
        again (an amend, a reset, another branch, a merge: a line extended then would keep
        commits HEAD no longer has, or order a merged branch unlike a rebuild)."""
        if head == self.head:
            return
        fmt = ["log", "-M", "--name-status", "--format=%x00%x00%H %P"]
        most = current().max_commits
        if self.head is not None:
            # a chain has one order: without --topo-order git stops at the last HEAD instead
            # of ordering the whole history first (2.5 ms instead of 10-20 on pytest's replay)
            new = self._take(_git(self.root, *fmt, f"--max-count={most}",
                                  f"{self.head}..{head}") or b"")
            if _chain(new, self.head, head):
                self._add(new)  # commits on top of the last HEAD: the line a rebuild would read
                self.head = head
                return
        self.pos, self.touched, self.renamed, self.next = {}, {}, {}, 0
        self._add(self._take(_git(self.root, *fmt, "--topo-order", f"--max-count={most}",
                                  head) or b""))
        self.head = head

    def commits_since(self, since: str | None, path: str) -> int | None:
        """Commits after ``since`` touching ``path`` (None when ``since`` is not in the window)."""
        at = self.pos.get(since or "")
        if at is None or at < self.next - current().max_commits:  # out of the window a rebuild reads
            return None
        places = self.touched.get(path, [])
        return len(places) - bisect.bisect_right(places, at)


    def follow(self, since: str | None, path: str) -> str | None:
        """Where ``path`` is now by the renames git saw after ``since`` (a chain of them
        followed), or None when it was not renamed since (or ``since`` is out of the window)."""
        at = self.pos.get(since or "")
        if at is None or at < self.next - current().max_commits:
            return None
        now = path
        while True:  # each step moves forward in time: the walk ends
            later = [(place, new) for place, new in self.renamed.get(now, ()) if place > at]
            if not later:
                return None if now == path else now
            at, now = min(later)


def _chain(new: list[tuple[str, list[str], list[list[str]]]], old: str, head: str) -> bool:
    """Whether ``new`` (oldest first) is a chain of one-parent commits from ``old`` to ``head``."""
    prev = old
    for sha, parents, _ in new:
        if parents != [prev]:
            return False
        prev = sha
    return bool(new) and prev == head


def history(root: str | Path, head: str | None) -> History | None:
    """The (cached, updated) history of the repository at ``root`` up to ``head``."""
    if not head:
        return None
    key = str(root)
    with CACHES.histories_lock:
        h = CACHES.histories.get(key)
        if h is None:
            h = CACHES.histories[key] = History(Path(root))
        h.update(head)
    return h


def kept_shares(root: str | Path, pairs: set[tuple[str, str]],
                where: dict[str, str] | None = None) -> dict[tuple[str, str], float | None]:
    """For each (old blob, new blob): the share of the old lines still in the new one (as a
    multiset of lines: moved lines count as kept), None when a blob cannot be read (outside git,
    or an object git no longer has). ``where``: blob -> a path of the work tree that may hold
    it (see ``line_counts``)."""
    kept = CACHES.kept
    out = {p: kept[p] for p in pairs if p in kept}
    todo = [p for p in pairs if p not in kept]
    if not todo:
        return out
    counts = line_counts(root, {b for p in todo for b in p}, where)
    if len(kept) > current().max_pairs:
        kept.clear()
    for old, new in todo:
        la, lb = counts.get(old), counts.get(new)
        if la is None or lb is None:
            share = None
        else:
            share = sum((la & lb).values()) / sum(la.values()) if la else 1.0
        kept[(old, new)] = out[(old, new)] = share
    return out


def line_counts(root: str | Path, blobs: set[str],
                where: dict[str, str] | None = None) -> dict[str, Counter]:
    """Blob id -> the multiset of its stripped, non-empty lines (unreadable blobs left out).

    A blob is read from the work tree file ``where`` names for it when that file's bytes are
    the blob (its id checked: an unstaged edit, or a checkout filter, falls through), else
    from the loose object store, else with one ``git cat-file --batch`` for the rest; each
    readable blob once per process while it stays among the ``line_blobs`` used last (blob ids
    name their content)."""
    out: dict[str, Counter] = {}
    todo = []
    for b in blobs:
        got = CACHES.lines.get(b)
        if got is None:
            todo.append(b)
        else:
            out[b] = got
    if not todo:
        return out
    for b, text in blob_texts(root, set(todo), where).items():
        out[b] = CACHES.lines.put(b, Counter(x.strip() for x in text.splitlines() if x.strip()))
    return out


def blob_texts(root: str | Path, blobs: set[str], where: dict[str, str] | None = None,
               limit: int | None = None) -> dict[str, str]:
    """Blob id -> its text (blobs over ``limit`` bytes, or that git lacks, left out): from the
    work tree file ``where`` names for it when its bytes are the blob, else from the loose
    object store, else with one ``git cat-file --batch`` for the rest (``limit``:
    ``max_blob_bytes`` unless given)."""
    root, where = Path(root), where or {}
    limit = current().max_blob_bytes if limit is None else limit
    texts = {b: t for b in blobs if (t := _worktree(root, where.get(b), b, limit)) is not None}
    texts.update({b: t for b in blobs if b not in texts and (t := _loose(root, b, limit)) is not None})
    rest = sorted(b for b in blobs if b not in texts)
    if rest:
        texts.update({b: t for b, t in cat_file(root, rest, limit).items() if t is not None})
    return texts


def _worktree(root: Path, path: str | None, blob: str, limit: int) -> str | None:
    """The text of ``root / path`` when its bytes are ``blob`` (None otherwise)."""
    got = read_regular(root / path, limit) if path else None  # a FIFO there is not read
    if got is None or blob_id(got[0]) != blob:
        return None
    return got[0].decode("utf-8", "replace")


def _loose(root: Path, blob: str, limit: int) -> str | None:
    """A loose blob's text read from the object store (None when packed or absent)."""
    key, objects = str(root), CACHES.objects
    if key not in objects:
        gitdir = git_dir(root)
        objects[key] = common_dir(gitdir) / "objects" if gitdir is not None else None
    folder = objects[key]
    if folder is None or len(blob) != 40:
        return None
    try:
        data = zlib.decompress((folder / blob[:2] / blob[2:]).read_bytes())
    except (OSError, zlib.error):
        return None
    head, _, body = data.partition(b"\0")
    if not head.startswith(b"blob ") or len(body) > limit:
        return None
    return body.decode("utf-8", "replace")


def cat_file(root: str | Path, names: list[str], limit: int | None = None
             ) -> dict[str, str | None]:
    """Objects by name (a blob id or ``<commit>:<path>``) -> text, with one ``git cat-file
    --batch``. A ``<commit>:<path>`` git says is missing is None (the file is new since that
    commit); objects over ``limit`` bytes (``max_blob_bytes`` unless given), and names git
    cannot answer for, are left out."""
    limit = current().max_blob_bytes if limit is None else limit
    raw = _git(Path(root), "cat-file", "--batch", data="".join(n + "\n" for n in names).encode())
    out: dict[str, str | None] = {}
    raw, i = raw or b"", 0
    for name in names:
        nl = raw.find(b"\n", i)
        if nl < 0:
            break
        head, i = raw[i:nl], nl + 1
        size = head.rsplit(b" ", 1)[-1]
        if not size.isdigit():  # "<name> missing" (or ambiguous): no content follows
            if head.endswith(b" missing") and ":" in name:
                out[name] = None
            continue
        if int(size) <= limit:
            out[name] = raw[i:i + int(size)].decode("utf-8", "replace")
        i += int(size) + 1
    return out


def renames(root: str | Path, since: str | None, head: str,
            max_commits: int = 5_000) -> list[tuple[str, str, str]]:
    """The file renames git sees in the commits after ``since`` up to ``head`` (all of the
    window without ``since``) -> [(old path, new path, commit time ISO)], oldest first."""
    span = f"{since}..{head}" if since else head
    raw = _git(Path(root), "log", "-M", "--diff-filter=R", "--name-status", "-z",
               f"--max-count={max_commits}", "--format=%x00%x00%H %cI", span, timeout=60)
    out: list[tuple[str, str, str]] = []
    when = ""
    tokens = (raw or b"").decode("utf-8", "surrogateescape").split("\0")
    i = 0
    while i < len(tokens):
        tok = tokens[i].strip("\n")
        i += 1
        if len(tok) > 41 and tok[40] == " " and all(c in "0123456789abcdef" for c in tok[:40]):
            when = tok[41:]
        elif tok.startswith("R") and i + 1 < len(tokens):
            out.append((tokens[i], tokens[i + 1], when))
            i += 2
    out.reverse()
    return out
