"""Whether what a listing of the work tree read has changed since, from ``stat`` alone.

A ``Watch`` keeps the stat (type, size, mtime in ns, inode; ``None`` for a path that was absent)
of every path whose change could change a listing, taken right after the listing ran: no
subprocess and no directory read while they all stat the same.

For git's list of untracked files (``untracked_watch``) the paths are those of git's own
"untracked cache": a new, removed or renamed entry changes its parent directory's mtime, so every
directory the listing could have read is watched (those of tracked files, those holding
untracked files, and the other directories git does not ignore: empty ones, ones holding only
ignored files; ``git check-ignore`` tells which, and a directory's link count tells which hold
subdirectories nothing listed explains, so only those are read), every ignore source (the
``.gitignore`` files in them and above the root up to the work tree's top, ``info/exclude``, the
global excludes file, the git config files that may name it): a change there lists again. Each
untracked file is watched apart (``files``): its change only asks for its blob id again.
Outside git (``walk_watch``) the walked directories and files.

The racy-git rule: a file system stamps mtimes from a clock that lags the wall clock by up to a
tick (a few ms here) and some stamp whole seconds, so a change in the same tick as the listing
can leave an mtime equal to what the listing saw. A folder or ignore file not safely older than
the moment the listing started (``settled``: by ``racy_fine_ns``, ``racy_coarse_ns`` for an
mtime of whole seconds) makes the watch never hold: the next read lists again, by which time
the change is older than the listing. Such a file is hashed again at the next read. Past
``max_watched`` paths no watch is made (its memory grows with the tree, its check nears a
listing's cost); the caller falls back to its time-to-live.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Iterable

from .code_caches import CACHES
from .code_tuning import CodeTuning, current
from .history import common_dir


def _sig(path: str) -> tuple | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_mode >> 12, st.st_size, st.st_mtime_ns, st.st_ino)


def settled(mtime_ns: int, at_ns: int, tuning: CodeTuning | None = None) -> bool:
    """Whether an mtime is safely older than the wall-clock moment ``at_ns`` (a change after
    that moment cannot have stamped it): by ``racy_fine_ns``, or ``racy_coarse_ns`` for a
    whole-second mtime (of ``tuning``, the one in force unless given)."""
    t = tuning or current()
    return mtime_ns < at_ns - (t.racy_coarse_ns if mtime_ns % 1_000_000_000 == 0 else t.racy_fine_ns)


class Watch:
    """The stats of the paths a listing depended on, taken after it started at ``started_ns``:
    ``stats`` (folders, ignore files: a change changes which files there are) and ``files``
    (root-relative -> stat: a change changes only that file's blob id); None for an absent path."""

    def __init__(self, stats: dict[str, tuple | None], started_ns: int, root: str = "",
                 files: dict[str, tuple | None] | None = None):
        self.stats, self.root, self.files = stats, root, files or {}
        t = current()
        self.racy = any(not settled(s[2], started_ns, t) for s in stats.values() if s)
        self.unsettled = {p for p, s in self.files.items() if s and not settled(s[2], started_ns, t)}

    @property
    def size(self) -> int:
        return len(self.stats) + len(self.files)

    def names_hold(self) -> bool:
        """Whether no folder or ignore file changed (never, for a racy watch)."""
        return not self.racy and all(_sig(p) == s for p, s in self.stats.items())

    def edited(self) -> list[str]:
        """The watched files whose stat changed, or was too recent to trust (racy)."""
        return [p for p, s in self.files.items()
                if p in self.unsettled or _sig(f"{self.root}/{p}") != s]

    def holds(self) -> bool:
        """Whether nothing watched changed."""
        return self.names_hold() and not self.edited()

    def with_files(self, paths: list[str], started_ns: int) -> "Watch":
        """This watch with the stats of ``paths`` (files of it, read again from
        ``started_ns``) taken now."""
        new = Watch({}, started_ns, self.root, {p: _sig(f"{self.root}/{p}") for p in paths})
        new.stats, new.racy = self.stats, self.racy
        new.unsettled |= self.unsettled - set(paths)
        new.files = {**self.files, **new.files}
        return new


def walk_watch(dirs: Iterable[str], files: Iterable[str], started_ns: int) -> Watch | None:
    """The watch of a folder walk: the directories it read and the files it hashed."""
    paths = [*dirs, *files]
    if len(paths) > current().max_watched:
        return None
    return Watch({p: _sig(p) for p in paths}, started_ns)


def untracked_watch(root: Path, gitdir: Path, tracked_dirs: set[str], listed: Iterable[str],
                    hashed: Iterable[str], started_ns: int) -> Watch | None:
    """The watch of ``git ls-files -o --exclude-standard`` run in ``root`` from ``started_ns``:
    ``tracked_dirs`` (``folders`` of the tracked files), ``listed`` (its output: a ``dir/`` is a
    nested repository, not read by git) and ``hashed`` (the listed files whose bytes the snapshot
    holds) are root-relative. None past ``max_watched`` paths or when git cannot say what it
    ignores."""
    listed, most = list(listed), current().max_watched
    opaque = {p.rstrip("/") for p in listed if p.endswith("/")}
    dirs = folders(listed, set(tracked_dirs))
    base = str(root)
    stats: dict[str, tuple | None] = {}
    frontier = _scan(base, dirs, dirs | opaque, stats)
    while frontier:  # directories with nothing listed in them: git read them unless it ignores them
        if len(stats) > most:
            return None
        ignored = _ignored(root, frontier)
        if ignored is None:
            return None
        kept = {d for d in frontier - ignored if not os.path.lexists(f"{base}/{d}/.git")}
        dirs |= kept
        frontier = _scan(base, kept, dirs | opaque, stats)
    for p in _ignore_sources(root, gitdir):
        stats[p] = _sig(p)
    files = {p: _sig(f"{base}/{p}") for p in hashed}
    return Watch(stats, started_ns, base, files) if len(stats) + len(files) <= most else None


def folders(paths: Iterable[str], dirs: set[str] | None = None) -> set[str]:
    """``dirs`` with every folder that holds one of ``paths`` (root-relative, '' the root)."""
    dirs = {""} if dirs is None else dirs
    for path in paths:
        parent = path.rstrip("/").rpartition("/")[0]
        while parent not in dirs:
            dirs.add(parent)
            parent = parent.rpartition("/")[0]
    return dirs


def _scan(base: str, dirs: Iterable[str], known: set[str], stats: dict) -> set[str]:
    """Stat ``dirs`` (root-relative) and the ``.gitignore`` in each into ``stats``; return their
    subdirectories not in ``known`` (none named ``.git``). A folder is read only when its link
    count says it holds more subfolders than ``known`` has (2 + subfolders on most file systems;
    1, always read, where it is not counted)."""
    children: dict[str, int] = {}
    for d in known:
        if d:
            parent = d.rpartition("/")[0]
            children[parent] = children.get(parent, 0) + 1
    out: set[str] = set()
    for d in dirs:
        path = f"{base}/{d}" if d else base
        try:
            st = os.stat(path)
        except OSError:
            stats[path] = None
            continue
        stats[path] = (st.st_mode >> 12, st.st_size, st.st_mtime_ns, st.st_ino)
        if st.st_nlink == 2 + children.get(d, 0):
            ignore = _sig(f"{path}/.gitignore")
            if ignore is not None:
                stats[f"{path}/.gitignore"] = ignore
            continue
        try:
            entries = list(os.scandir(path))
        except OSError:
            continue
        for e in entries:
            rel = f"{d}/{e.name}" if d else e.name
            if e.name == ".gitignore":
                stats[e.path] = _sig(e.path)
            elif e.name != ".git" and rel not in known and e.is_dir(follow_symlinks=False):
                out.add(rel)
    return out


def _ignored(root: Path, paths: set[str]) -> set[str] | None:
    """Which of ``paths`` (root-relative folders, none holding a tracked file: the index is not
    read) git ignores; None when git fails."""
    try:
        out = subprocess.run(["git", "-C", str(root), "check-ignore", "--no-index", "-z",
                              "--stdin"],
                             input="\0".join(sorted(paths)).encode("utf-8", "surrogateescape"),
                             capture_output=True, timeout=20)
    except (OSError, subprocess.SubprocessError):
        return None
    if out.returncode not in (0, 1):  # 1: none ignored
        return None
    return {p.decode("utf-8", "surrogateescape") for p in out.stdout.split(b"\0") if p}


def _ignore_sources(root: Path, gitdir: Path) -> list[str]:
    """The ignore files outside the watched directories, present or not: ``.gitignore`` above
    ``root`` up to the work tree's top, ``info/exclude``, the global excludes file and the
    config files that may name it."""
    out: list[str] = []
    for folder in () if (root / ".git").exists() else root.parents:
        out.append(str(folder / ".gitignore"))
        if (folder / ".git").exists():
            break
    common = common_dir(gitdir)
    home = Path.home()
    xdg = Path(os.environ.get("XDG_CONFIG_HOME") or home / ".config") / "git"
    configs = [str(common / "config"), str(gitdir / "config.worktree"), str(home / ".gitconfig"),
               str(xdg / "config"), "/etc/gitconfig"]
    out += [str(common / "info" / "exclude"), str(xdg / "ignore"), *configs]
    key = (str(root), *(_sig(p) for p in configs))
    memo = CACHES.excludes_named  # (root, config files' stats) -> core.excludesFile
    named = memo.get(key)
    if named is None:  # read again only when a config file changed
        try:
            named = subprocess.run(["git", "-C", str(root), "config", "--path", "--get",
                                    "core.excludesFile"], capture_output=True, text=True,
                                   timeout=10).stdout.strip()
        except (OSError, subprocess.SubprocessError):
            named = ""
        if len(memo) > current().excludes_memo:
            memo.clear()
        memo[key] = named
    if named:
        out.append(named if os.path.isabs(named) else str(root / named))
    return out
