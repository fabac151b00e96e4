"""Opening files without following links, and private folders for what graphmem derives.

A memory folder lives in a project, and git checks symbolic links out: a cloned repository can
ship ``memory/gotchas.md`` pointing at ``~/.bashrc``. So under a memory folder no link is ever
followed: files are opened with ``O_NOFOLLOW`` (the last component) and every folder between the
spec folder and the file is checked with ``lstat`` (the components above it). Either kind of link
is refused with a ``StorageError`` naming it; nothing is read or written through it.

``GRAPHMEM_HOME`` and the folders graphmem makes for its sockets hold derived copies of that
memory, so they are the user's alone: created 0700, checked for owner and mode before use.
"""

from __future__ import annotations

import errno
import logging
import os
import stat
from pathlib import Path

from ..errors import StorageError

log = logging.getLogger("graphmem.files")

_NOFOLLOW = os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK  # NONBLOCK: a planted FIFO never hangs us


def _link_error(path: Path | str) -> StorageError:
    return StorageError(f"{path} is a symbolic link; graphmem never follows links inside a memory "
                        "folder (remove the link, or replace it with a real file or folder)")


def real_dir(path: Path, create: bool = False, mode: int = 0o777) -> bool:
    """True when ``path`` is a real folder, False when absent (created first when ``create``,
    with ``mode`` less the umask).

    A link, or something else than a folder, in its place is a ``StorageError``.
    """
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        if not create:
            return False
        try:
            os.mkdir(path, mode)
        except FileNotFoundError:  # its parent is missing too (a spec folder made on first use)
            Path(path).parent.mkdir(parents=True, exist_ok=True)
            os.makedirs(path, mode, exist_ok=True)
        except FileExistsError:
            pass  # another process made it meanwhile: check what it is
        st = os.lstat(path)
    if stat.S_ISLNK(st.st_mode):
        raise _link_error(path)
    if not stat.S_ISDIR(st.st_mode):
        raise StorageError(f"{path} is not a folder")
    return True


def real_dirs(*paths: Path, create: bool = False, mode: int = 0o777) -> bool:
    """``real_dir`` of each path, outermost first; False at the first one that is absent."""
    return all(real_dir(p, create, mode) for p in paths)


def is_link(path: Path | str) -> bool:
    """True (and a warning naming it) for a link met while listing a memory folder: listings skip
    links, so one planted link does not stop a search or a rebuild; opening one by name refuses it."""
    if not os.path.islink(path):
        return False
    log.warning("graphmem: skipping %s: a symbolic link (links inside a memory folder are never "
                "followed)", path)
    return True


def file_stat(path: Path) -> os.stat_result | None:
    """``lstat`` of a file graphmem keeps: None when absent, a ``StorageError`` when a link."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return None
    if stat.S_ISLNK(st.st_mode):
        raise _link_error(path)
    return st


def open_fd(path: Path | str, flags: int, mode: int = 0o600) -> int:
    """``os.open`` that refuses a link or anything but a regular file (FileNotFoundError passes).
    A file it creates is the owner's alone (0600), as atomic writes' temp files are."""
    try:
        fd = os.open(path, flags | _NOFOLLOW, mode)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise _link_error(path) from None
        if exc.errno == errno.EISDIR:
            raise StorageError(f"{path} is a folder, not a file") from None
        if exc.errno == errno.ENXIO:  # a FIFO or socket with nobody on the other end
            raise StorageError(f"{path} is not a regular file") from None
        raise
    try:  # O_NONBLOCK means nothing to a regular file, so it can stay set
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise StorageError(f"{path} is not a regular file")
    except BaseException:
        os.close(fd)
        raise
    return fd


def open_file(path: Path | str, mode: str = "rb"):
    """A binary file object opened through ``open_fd``: ``rb``, ``rb+`` or ``ab``."""
    flags = {"rb": os.O_RDONLY, "rb+": os.O_RDWR, "ab": os.O_WRONLY | os.O_APPEND | os.O_CREAT}[mode]
    return os.fdopen(open_fd(path, flags), mode)


def read_bytes(path: Path | str) -> bytes:
    """The whole file, never through a link (FileNotFoundError when absent)."""
    with open_file(path) as f:
        return f.read()


# ---- private folders --------------------------------------------------------------------------
def private_dir(path: Path) -> Path:
    """Make ``path`` (and missing parents) 0700, or tighten it to 0700 when it is ours already.

    For graphmem's own folders (``GRAPHMEM_HOME`` and below). A folder another user owns is a
    ``StorageError`` naming it: its owner could read or replace what graphmem puts there.
    """
    path = Path(path)
    missing, folder = [], path
    while not os.path.lexists(folder):
        missing.append(folder)
        folder = folder.parent
    for folder in reversed(missing):  # mkdir's mode, not the umask: the umask is process-wide
        try:
            os.mkdir(folder, 0o700)
        except FileExistsError:
            pass
        except OSError as exc:
            raise StorageError(f"cannot create {folder}: {exc}") from None
    st = os.stat(path)  # GRAPHMEM_HOME itself may be a link the user made: its target counts
    if st.st_uid != os.getuid():
        raise StorageError(f"{path} belongs to uid {st.st_uid}, not to you (uid {os.getuid()}); "
                           "graphmem keeps its data only in folders you own")
    if st.st_mode & 0o077:
        os.chmod(path, stat.S_IMODE(st.st_mode) & 0o700)
    return path


def shared_tmp_dir(path: Path) -> Path:
    """A per-user folder in a shared place such as ``/tmp``: created 0700, or verified.

    An existing one must be a real folder (not a link), owned by us, with no group or other
    permission bits; anything else is refused with a ``StorageError`` naming it, because another
    user who made it first could read or replace what graphmem puts there. (A fresh random
    folder per call would not do: every process of a home must find the same socket.)
    """
    path = Path(path)
    try:
        os.mkdir(path, 0o700)
        os.chmod(path, 0o700)  # the umask may have taken bits away; mkdir never adds any
    except FileExistsError:
        pass
    st = os.lstat(path)
    problem = None
    if stat.S_ISLNK(st.st_mode):
        problem = "is a symbolic link"
    elif not stat.S_ISDIR(st.st_mode):
        problem = "is not a folder"
    elif st.st_uid != os.getuid():
        problem = f"belongs to uid {st.st_uid}, not to you (uid {os.getuid()})"
    elif st.st_mode & 0o077:
        problem = f"has mode {stat.S_IMODE(st.st_mode):04o}, open to other users"
    if problem:
        raise StorageError(f"refusing to use {path}: it {problem}. Remove it (or set "
                           "XDG_RUNTIME_DIR to a private folder) and try again")
    return path


def tighten(path: Path, mode: int) -> None:
    """Take group and other bits away from an existing file or folder of ours (missing is fine)."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    if not stat.S_ISLNK(st.st_mode) and st.st_uid == os.getuid() and stat.S_IMODE(st.st_mode) & ~mode:
        os.chmod(path, stat.S_IMODE(st.st_mode) & mode)
