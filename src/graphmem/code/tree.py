"""The project's code as it is now: its files with their blob ids, HEAD, and the symbols defined.

A ``Snapshot`` is cached against the repository's state: in git, HEAD plus the mtime of
``.git/index`` (both read from files, no subprocess), so a search reuses it until a commit,
checkout or ``git add`` (edits not yet added are seen from the next one); outside git, a walk of
the folder reused while its watch holds or for ``walk_ttl`` seconds (``code_tuning.py``), files
re-hashed only when their size or mtime moved. Blob ids are git's
(``sha1("blob <size>\\0" + bytes)``) everywhere, from ``git ls-files -s`` in a repository and
computed from the bytes outside one, so an anchor means the same thing in both.

In git, files that are untracked but not ignored (``git ls-files -o --exclude-standard``) are
part of the snapshot too, hashed from their bytes as outside git: a memory about a new file not
yet committed is anchored and gets freshness. Their list is kept with a ``Watch``
(``tree_watch.py``): the stats of the directories git reads, of each untracked file and of every
ignore source, taken at the listing. It is listed again only when a folder or ignore file
changed (or a file the index tracked left it while staying on disk), a stat check of a few
hundred paths instead of a walk of the work tree; an untracked file whose stat changed is
hashed again alone; a commit reuses the list too. The racy-git rule guards a change in the
same tick as the listing. A watch of more than ``check_each_read`` paths is checked only once
the list is ``untracked_ttl`` seconds old (reused unchecked until then, as before the watch);
past ``max_watched`` paths there is no watch and the list is listed again after the
TTL; a caller can ask for a fresh listing
(``untracked_age=0``: a write naming a path that is a file on disk but not in the snapshot).
Outside git the walk keeps a watch of the folders and files it read the same way, so a read
(``max_age=0``) walks again only after a change.
"""

from __future__ import annotations

import os
import re
import stat
import subprocess
import threading
import time
from functools import cached_property
from pathlib import Path

from .code_caches import CACHES
from .code_tuning import current
from .history import blob_id, blob_texts, common_dir, git_dir, read_regular
from .symbols import Symbol, language_of, parse_symbols
from .tree_watch import Watch, folders, settled, untracked_watch, walk_watch

SKIP_DIRS = {".git", "node_modules", ".venv", "venv", "__pycache__", ".tox", ".mypy_cache",
             "dist", "build", ".pytest_cache", ".auto-claude"}
MEMORY_LAYOUT = ("codebase_map.json", "patterns.md", "gotchas.md", "session_insights", "episodes",
                 "anchors.jsonl")


def _read(path: Path) -> str:
    try:
        return path.read_text(errors="replace").strip()
    except OSError:
        return ""


def _git_state(gitdir: Path) -> tuple:
    """(HEAD's target, its commit if a loose ref holds it, the index file's mtime, inode and
    size) — read from files."""
    head = _read(gitdir / "HEAD")
    commit = head
    if head.startswith("ref:"):
        ref = head[4:].strip()
        base = common_dir(gitdir)
        commit = _read(gitdir / ref) or _read(base / ref) or f"packed:{ref}"
        if commit.startswith("packed:"):
            try:
                commit += ":" + str((base / "packed-refs").stat().st_mtime_ns)
            except OSError:
                pass
    try:  # git replaces the index file on every write: a new inode even within one mtime tick
        st = (gitdir / "index").stat()
        index = (st.st_mtime_ns, st.st_ino, st.st_size)
    except OSError:
        index = None
    return (head, commit, index)


class Snapshot:
    """The files (path -> blob id) and HEAD of one project folder at one repository state."""

    def __init__(self, root: Path, head: str | None, files: dict[str, str], git: bool):
        self.root, self.head, self.files, self.git = root, head, files, git
        self.made = time.monotonic()
        self.previous: Snapshot | None = None  # the one this replaced: definitions are updated
        self.untracked: dict[str, str] = {}  # in git: untracked, not ignored files (in ``files``)
        self.untracked_at = self.made
        self.watch: Watch | None = None  # what its untracked list (or outside git, walk) read
        self.state: tuple | None = None  # in git: the repository state it was read at

    @property
    def tracked(self) -> list[str]:
        """The paths of the index (in git; every file outside it)."""
        return [p for p in self.files if p not in self.untracked]

    @cached_property
    def tracked_dirs(self) -> set[str]:
        """The folders holding a tracked file (root-relative, '' the root)."""
        return folders(self.tracked)

    def outdated(self) -> bool:
        """Whether the repository's HEAD or index moved since this snapshot was read (read
        from files, no subprocess; always False outside git)."""
        gitdir = git_dir(self.root) if self.git else None
        return gitdir is not None and self.state is not None and _git_state(gitdir) != self.state

    @cached_property
    def by_blob(self) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        for path, blob in self.files.items():
            out.setdefault(blob, []).append(path)
        return out

    @cached_property
    def by_basename(self) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        for path in self.files:
            out.setdefault(path.rsplit("/", 1)[-1], []).append(path)
        return out

    def symbols(self, path: str) -> list[Symbol]:
        """The symbols defined in ``path`` now (parsed once per blob)."""
        blob = self.files.get(path)
        if blob is None or language_of(path) is None:
            return []
        cache = CACHES.symbols_by_blob
        found = cache.get(blob)
        if found is None:
            found = parse_symbols(path, self._text(path, blob))
            if len(cache) > current().max_cached_blobs:
                cache.clear()
            cache[blob] = found
        return found

    def _text(self, path: str, blob: str) -> str:
        """The text of ``blob`` (the file's state in this snapshot): in git, the blob itself
        (read from the file when it holds that blob, else from git: an edit not yet added is
        not it); outside git, the file. Empty when unreadable or over ``max_parse_bytes``.
        Parsed symbols are kept by blob, so they must be the blob's."""
        limit = current().max_parse_bytes
        if self.git:
            text = blob_texts(self.root, {blob}, {blob: path}, limit).get(blob, "")
        else:
            got = read_regular(self.root / path, limit)
            text = got[0].decode("utf-8", "replace") if got is not None else ""
        return text.replace("\r\n", "\n").replace("\r", "\n")

    @cached_property
    def definitions(self) -> dict[str, list[tuple[str, Symbol]]]:
        """Symbol name -> [(path, symbol)]; methods under ``C.m`` and their own name ``m``.

        Built from the previous snapshot's table when it has one, re-reading only the files
        whose blob changed (a commit touches a few files of thousands)."""
        prev, self.previous = self.previous, None
        if prev is not None and "definitions" in prev.__dict__:
            out: dict[str, list[tuple[str, Symbol]]] = {k: list(v) for k, v in prev.definitions.items()}
            changed = {p for p in prev.files.keys() | self.files.keys()
                       if prev.files.get(p) != self.files.get(p)}
            for path in changed:
                for sym in prev.symbols(path):
                    for name in (sym.name, sym.short) if sym.kind == "method" else (sym.name,):
                        rows = [r for r in out.get(name, ()) if r[0] != path]
                        if rows:
                            out[name] = rows
                        else:
                            out.pop(name, None)
            self._add(out, changed)
            return out
        out = {}
        self._add(out, self.files)
        return out

    def _add(self, out: dict[str, list[tuple[str, Symbol]]], paths) -> None:
        for path in paths:
            for sym in self.symbols(path):
                out.setdefault(sym.name, []).append((path, sym))
                if sym.kind == "method":
                    out.setdefault(sym.short, []).append((path, sym))


def snapshot(root: str | Path, max_age: float | None = None,
             untracked_age: float | None = None) -> Snapshot:
    """The current snapshot of the project at ``root`` (cached against the repository state;
    outside git, a walk reused while its watch holds or for ``max_age`` seconds, ``walk_ttl``
    unless given: reads pass 0, writes reuse one; in git, the untracked files listed again only
    when their watch shows a change, or, without a watch, when older than ``untracked_age``; 0
    lists them again)."""
    root, tuning = Path(root), current()
    max_age = tuning.walk_ttl if max_age is None else max_age
    forced = untracked_age is not None and untracked_age <= 0
    ttl = tuning.untracked_ttl if untracked_age is None else untracked_age
    gitdir = git_dir(root)
    key: tuple = ("git", str(gitdir), _git_state(gitdir)) if gitdir else ("walk",)
    with CACHES.snapshots_lock:
        hit = CACHES.snapshots.get(str(root))
    if hit and hit[0] == key and not gitdir:
        if time.monotonic() - hit[1].made < max_age or _holds(hit[1].watch):
            return hit[1]
    kept = _kept_list(hit[1], ttl) if gitdir and hit and hit[1].git and not forced else None
    snap = None
    if gitdir and hit and hit[0] == key:  # the same commit and index: only untracked files moved
        if kept is not None and kept[0] is hit[1].untracked and kept[1] is hit[1].watch:
            return hit[1]
        snap = _with_untracked(hit[1], *(kept or _untracked(root, gitdir, hit[1].tracked_dirs)))
        if snap is hit[1]:
            return snap
    elif gitdir:  # a new commit or index: the untracked list is reused while it holds
        snap = _git_snapshot(root, gitdir, key[2][1], hit[1] if hit and kept else None, kept)
    if snap is None:
        snap = _walk_snapshot(root)
    if gitdir and snap.git:
        snap.state = key[2]
    if hit is not None:
        snap.previous = hit[1]
        hit[1].previous = None  # keep one generation only
        if snap.git and snap.head and snap.head != hit[1].head:
            _warm_history(root, snap.head)
    with CACHES.snapshots_lock:
        CACHES.snapshots[str(root)] = (key, snap)
    return snap


def _holds(watch: Watch | None) -> bool:
    return watch is not None and watch.holds()


def _kept_list(snap: Snapshot, ttl: float) -> tuple[dict[str, str], Watch | None] | None:
    """``snap``'s untracked files (path -> blob id) and their watch as they are now, without
    ``git ls-files -o``: its watch's folders and ignore files hold (checked at every read up to
    ``check_each_read`` paths, past that once the list is ``ttl`` seconds old) and the files
    edited since are hashed again; or, without a watch (too many paths), it was listed less
    than ``ttl`` seconds ago. None when git must list them again."""
    watch, tuning = snap.watch, current()
    young = time.monotonic() - snap.untracked_at < ttl
    if watch is None or young and watch.size > tuning.check_each_read:
        return (snap.untracked, watch) if young else None
    if not watch.names_hold():
        return None
    snap.untracked_at = time.monotonic()  # as good as a listing made now
    edited = watch.edited()
    if not edited:
        return snap.untracked, watch
    if len(snap.untracked) >= tuning.max_walk_files:
        return None  # a file dropped or added would move the cut: git lists them in order
    started = time.time_ns()
    files = dict(snap.untracked)
    for path in edited:  # the same names: only these files' bytes may have changed
        blob = _hash(os.path.join(snap.root, path), tuning.max_parse_bytes)
        if blob is None:
            files.pop(path, None)
        else:
            files[path] = blob
    return files, watch.with_files(edited, started)


def _warm_history(root: Path, head: str) -> None:
    """Read the commits of a new HEAD in the background (freshness counts commits per file):
    a search after a write finds them read, or waits on the same lock instead of running git."""
    from .history import history  # git log runs only for code memory

    threading.Thread(target=history, args=(root, head), daemon=True,
                     name="graphmem-history").start()


def _git_snapshot(root: Path, gitdir: Path, commit: str = "", listed: Snapshot | None = None,
                  kept: tuple[dict[str, str], Watch | None] | None = None) -> Snapshot | None:
    """The snapshot of the index at ``commit``, with the untracked files (those ``kept`` of
    the ``listed`` snapshot, when given: its list still holds, and no file it tracked left the
    index while staying on disk, which would make it untracked)."""
    try:
        head = commit if re.fullmatch(r"[0-9a-f]{40}", commit or "") else subprocess.run(
            ["git", "-C", str(root), "rev-parse", "-q", "--verify", "HEAD"],
            capture_output=True, text=True, timeout=10).stdout.strip() or None
        out = subprocess.run(["git", "-C", str(root), "ls-files", "-s", "-z"], capture_output=True,
                             timeout=20)
    except (OSError, subprocess.SubprocessError):
        return None
    if out.returncode != 0:
        return None
    files: dict[str, str] = {}
    for rec in out.stdout.split(b"\0"):
        if not rec:
            continue
        meta, _, path = rec.partition(b"\t")
        parts = meta.split()
        if len(parts) >= 3 and parts[0] != b"160000":  # not a submodule
            files[path.decode("utf-8", "surrogateescape")] = parts[1].decode()
    snap = Snapshot(root, head, files, git=True)
    if listed is not None and any(p not in files and os.path.lexists(root / p)
                                  for p in listed.tracked):
        listed = None  # untracked now (``git rm --cached``), or ignored: git decides
    if listed is None or kept is None:
        return _with_untracked(snap, *_untracked(root, gitdir, snap.tracked_dirs))
    merged = _with_untracked(snap, {p: b for p, b in kept[0].items() if p not in files}, kept[1])
    merged.untracked_at = listed.untracked_at  # as old as the list it took
    return merged


def _untracked(root: Path, gitdir: Path, tracked_dirs: set[str]
               ) -> tuple[dict[str, str], Watch | None]:
    """Files git does not track and does not ignore -> blob ids of their bytes (at most
    ``max_walk_files``, each at most ``max_parse_bytes``; a spec's memory folder left out),
    and the watch telling when that list may have changed (None: none could be made)."""
    started, tuning = time.time_ns(), current()
    try:
        out = subprocess.run(["git", "-C", str(root), "ls-files", "-o", "--exclude-standard",
                              "-z"], capture_output=True, timeout=20)
    except (OSError, subprocess.SubprocessError):
        return {}, None
    if out.returncode != 0:
        return {}, None
    files: dict[str, str] = {}
    listed: list[str] = []
    hashed: list[str] = []
    memory_dirs: dict[str, bool] = {}
    for raw in out.stdout.split(b"\0"):
        path = raw.decode("utf-8", "surrogateescape")
        if not path:
            continue
        listed.append(path)
        folder = path.rsplit("/", 1)[0] if "/" in path else ""
        if _in_memory_folder(root, folder, memory_dirs):
            continue
        blob = _hash(os.path.join(root, path), tuning.max_parse_bytes)  # no big data file read
        if not path.endswith("/"):  # a nested repository, not a file
            hashed.append(path)
        if blob is not None:
            files[path] = blob
            if len(files) >= tuning.max_walk_files:
                break  # git lists in order: the files after it are left out the same way
    return files, untracked_watch(root, gitdir, tracked_dirs, listed, hashed, started)


def _in_memory_folder(root: Path, folder: str, seen: dict[str, bool]) -> bool:
    """Whether ``folder`` (relative) is, or lies in, a spec's ``memory/`` folder."""
    if folder in seen:
        return seen[folder]
    parts = folder.split("/") if folder else []
    inside = any(name == "memory" and _memory_folder(os.path.join(root, *parts[:i + 1]), name)
                 for i, name in enumerate(parts))
    seen[folder] = inside
    return inside


def _with_untracked(snap: Snapshot, untracked: dict[str, str], watch: Watch | None
                    ) -> Snapshot:
    """``snap`` when its untracked files are ``untracked`` (listed now), else a new snapshot of
    the same commit and index with them; either way watched by ``watch``."""
    if untracked == snap.untracked:
        snap.untracked_at = time.monotonic()
        snap.watch = watch
        return snap
    tracked = {p: b for p, b in snap.files.items() if p not in snap.untracked}
    new = Snapshot(snap.root, snap.head, {**untracked, **tracked}, git=True)
    new.untracked = {p: b for p, b in untracked.items() if p not in tracked}
    new.watch = watch
    if "tracked_dirs" in snap.__dict__:  # the same index
        new.tracked_dirs = snap.tracked_dirs
    return new


def _hash(path: str, max_bytes: int | None = None) -> str | None:
    """The blob id of a regular file's bytes (None over ``max_bytes``), kept by (path, size,
    mtime) once that mtime is older than the read by more than the racy margin."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    if not stat.S_ISREG(st.st_mode) or max_bytes is not None and st.st_size > max_bytes:
        return None  # a FIFO, socket or device (or a link to one): reading it may never end
    blob = CACHES.blob_by_stat.get((path, st.st_size, st.st_mtime_ns))
    if blob is None:
        now = time.time_ns()
        got = read_regular(path, max_bytes)  # a FIFO swapped in since the stat is not read
        if got is None:
            return None
        data, st = got
        blob = blob_id(data)
        if settled(st.st_mtime_ns, now):  # else a write in the same tick keeps this stat
            CACHES.blob_by_stat[(path, st.st_size, st.st_mtime_ns)] = blob
    return blob


def _memory_folder(path: str, name: str) -> bool:
    """A spec's ``memory/`` folder holds memories, not the project's code."""
    return name == "memory" and any(os.path.exists(os.path.join(path, n)) for n in MEMORY_LAYOUT)


def _walk_snapshot(root: Path) -> Snapshot:
    """The files under ``root`` (not a git work tree), and the watch of what the walk read."""
    started, most = time.time_ns(), current().max_walk_files
    files: dict[str, str] = {}
    dirs_read: list[str] = []
    names_seen: list[str] = []
    for folder, dirs, names in os.walk(root):
        dirs_read.append(folder)
        memory = [os.path.join(folder, d) for d in dirs if _memory_folder(os.path.join(folder, d), d)]
        dirs_read += memory  # left out while it holds memories: watched for when it stops
        dirs[:] = [d for d in dirs if d not in SKIP_DIRS and not d.startswith(".graphmem")
                   and os.path.join(folder, d) not in memory]
        for name in names:
            p = os.path.join(folder, name)
            names_seen.append(p)
            blob = _hash(p)
            if blob is None:
                continue
            files[os.path.relpath(p, root).replace(os.sep, "/")] = blob
            if len(files) >= most:
                break
        else:
            continue
        break
    snap = Snapshot(root, None, files, git=False)
    snap.watch = walk_watch(dirs_read, names_seen, started)
    return snap
