"""Which project a spec belongs to, and the key that names that project on every machine.

Root (where the project is checked out on this machine), first that applies:
  1. the explicit ``project_dir``, lifted to the project that encloses it (below);
  2. the project enclosing the spec folder: the nearest folder above it holding ``.git`` (a
     repository, worktree or submodule) or a committed ``.graphmem/project.toml``;
  3. the reference default, ``spec_dir.parent.parent``.
Symlinks are resolved, so every spelling of a folder (link, trailing slash, sub-folder) is one root.

Key (stable across machines and checkouts), first that applies:
  1. the ``GRAPHMEM_PROJECT_ID`` setting (``Settings.project_id``): every project of the process;
  2. ``id = "..."`` in ``<root>/.graphmem/project.toml`` (commit it to name a project once);
  3. the ``origin`` remote, normalised: ``git@host:o/r.git``, ``ssh://git@host/o/r`` and
     ``https://host/o/r/`` are all ``host/o/r``;
  4. a repository without ``origin``: its main work tree's path (all its worktrees agree);
     a worktree whose repository pruned it (its ``.git`` names a missing
     ``<repo>/worktrees/<name>``) still gets its repository's key, as while it was listed;
  5. the root's absolute path (what older releases used, so their graphs keep their names).
The folder name is only the display name. Paths stored in items are relative to the root.
"""

from __future__ import annotations

import os
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable
from urllib.parse import urlsplit

from .errors import ConfigError

ID_FILE = Path(".graphmem") / "project.toml"
MAX_ID = 200
_CASELESS_HOSTS = {"github.com", "gitlab.com", "bitbucket.org"}  # paths there ignore case


@dataclass(frozen=True)
class Project:
    """One project as seen from this machine: local root, portable key, display name."""

    root: Path
    key: str
    name: str
    origin: str  # how the key was found: setting, file, remote, worktree, path
    # the key earlier builds gave it, when different: a worktree its repository pruned was keyed
    # by the missing folder its .git file names (``derived_sync.adopt`` moves its rows)
    former_key: str | None = None

    def rel(self, path: str | Path) -> str:
        """``path`` relative to the root (POSIX separators; the root itself is ``.``); absolute
        when outside the root."""
        p = Path(path)
        try:
            rel = p.relative_to(self.root) if p.is_absolute() else p
        except ValueError:
            return str(p)
        return rel.as_posix()


def resolve_project(spec_dir: str | Path | None, project_dir: str | Path | None = None, *,
                    project_id: str | None = None,
                    known_roots: Iterable[str | Path] = ()) -> Project:
    """The project of a spec (or of a project folder when ``spec_dir`` is None).

    ``known_roots``: project roots already registered on this machine; a folder inside one of
    them (and in no repository) is that project, so a sub-folder is never a second project.
    """
    if project_dir is not None:
        start = _resolve(project_dir)
        root = enclosing(start) or _registered(start, known_roots) or start
    elif spec_dir is not None:
        spec = _resolve(spec_dir)
        own = spec.name == ".graphmem"  # a project's own memory folder (``scope.py``)
        root = enclosing(spec) or _registered(spec, known_roots) or (
            spec.parent if own else spec.parent.parent)
    else:
        raise ConfigError("a spec or project folder is needed to name a project")
    key, origin = _key(root, project_id)
    former = _pruned_key(root) if origin in ("remote", "worktree") else None
    return Project(root=root, key=key, name=root.name or str(root), origin=origin,
                   former_key=former if former != key else None)


def _resolve(path: str | Path) -> Path:
    return Path(os.path.realpath(os.path.expanduser(path)))


def enclosing(start: Path) -> Path | None:
    """The nearest folder at or above ``start`` that holds ``.git`` or the committed id file."""
    folder, id_file = str(start), str(ID_FILE)  # os.path: this runs on every Memory opened
    while True:
        if os.path.lexists(os.path.join(folder, ".git")) or \
                os.path.isfile(os.path.join(folder, id_file)):
            return Path(folder)
        parent = os.path.dirname(folder)
        if parent == folder:
            return None
        folder = parent


def _registered(start: Path, known_roots: Iterable[str | Path]) -> Path | None:
    best = None
    for r in known_roots:
        root = Path(r)
        if (start == root or root in start.parents) and (best is None or len(root.parts) > len(best.parts)):
            best = root
    return best


def _key(root: Path, project_id: str | None) -> tuple[str, str]:
    if project_id is not None and project_id != "":
        return check_id(project_id, "GRAPHMEM_PROJECT_ID"), "setting"
    id_file = root / ID_FILE
    if os.path.isfile(id_file):
        try:
            data = tomllib.loads(id_file.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
            raise ConfigError(f"cannot read {id_file}: {exc}") from None
        if "id" in data:
            if not isinstance(data["id"], str):
                raise ConfigError(f"{id_file}: id must be a string")
            return check_id(data["id"], str(id_file)), "file"
    common = git_common_dir(root)
    if common is not None:
        url = origin_url(common)
        if url:
            return normalise_remote(url), "remote"
        main = common.parent if common.name == ".git" else common
        return str(main), "worktree"
    return str(root), "path"


def check_id(value: str, where: str) -> str:
    """An explicit project id: 1-200 printable characters; a ConfigError naming ``where``."""
    value = value.strip()
    if not value or len(value) > MAX_ID or any(ord(c) < 32 or ord(c) == 127 for c in value):
        raise ConfigError(f"{where}: a project id must be 1 to {MAX_ID} printable characters, "
                          f"got {value[:40]!r}")
    return value


def git_common_dir(root: Path) -> Path | None:
    """The repository folder shared by every worktree of the repository at ``root`` (no git
    process: ``.git`` is read as a folder, or as a ``gitdir:`` file plus ``commondir``)."""
    dot = os.path.join(root, ".git")
    gitdir = dot if os.path.isdir(dot) else linked_gitdir(root)
    if gitdir is None:
        return None
    try:
        common = os.path.join(gitdir, "commondir")
        if os.path.isfile(common):
            with open(common, encoding="utf-8") as f:
                gitdir = os.path.join(gitdir, f.read().strip())
        elif not os.path.isdir(gitdir):
            gitdir = pruned_repository(gitdir) or gitdir  # keyed as while it was listed
    except OSError:
        return None
    return Path(os.path.realpath(gitdir))


def pruned_repository(gitdir: str | Path) -> str | None:
    """The repository a worktree's missing ``gitdir`` (``<repo>/worktrees/<name>``) belonged to,
    when that repository is still there: it no longer lists the worktree (``git worktree prune``
    removed its folder after the worktree moved)."""
    parent = os.path.dirname(os.path.normpath(gitdir))
    if os.path.basename(parent) != "worktrees":
        return None
    repo = os.path.dirname(parent)
    return repo if os.path.isfile(os.path.join(repo, "HEAD")) else None


def _pruned_key(root: Path) -> str | None:
    """What older releases keyed a pruned worktree by: the missing folder its .git names."""
    missing = broken_link(root)
    return None if missing is None or pruned_repository(missing) is None else \
        os.path.realpath(missing)


def broken_link(root: Path) -> Path | None:
    """The folder ``root/.git`` points to (``gitdir:``) when that folder does not exist: a
    worktree whose repository moved or no longer lists it. Git sees no repository there, and
    ``_key`` names the project by that missing folder's path."""
    gitdir = linked_gitdir(root)
    return None if gitdir is None or os.path.isdir(gitdir) else Path(gitdir)


def linked_gitdir(root: str | Path) -> str | None:
    """The git folder a ``root/.git`` file names (``gitdir: <path>``, absolute or relative to
    ``root``): a worktree's or submodule's own, which may be missing; None when ``.git`` is a
    folder, absent, unreadable or not such a file. (``code.history.git_dir`` reads the same
    line for itself: the code layer does not import this module.)"""
    dot = os.path.join(root, ".git")
    try:
        if not os.path.isfile(dot):
            return None
        with open(dot, encoding="utf-8", errors="replace") as f:
            line = f.read(4096).strip()
    except OSError:
        return None
    if not line.startswith("gitdir:"):
        return None
    return os.path.join(root, line.removeprefix("gitdir:").strip())


_SECTION = re.compile(r'^\[\s*remote\s+"origin"\s*\]', re.IGNORECASE)


def origin_url(common_dir: Path) -> str | None:
    """``remote.origin.url`` from a repository's ``config`` file, or None."""
    try:
        text = (common_dir / "config").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    inside = False
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line[0] in "#;":
            continue
        if line.startswith("["):
            inside = bool(_SECTION.match(line))
            continue
        if inside:
            name, _, value = line.partition("=")
            if name.strip().lower() == "url" and value.strip():
                return value.strip().strip('"')
    return None


_SCP = re.compile(r"^(?:[^@/\s]+@)?(?P<host>[^:/\s]+):(?P<path>(?!//).+)$")


def normalise_remote(url: str) -> str:
    """One spelling per remote: ``host/owner/repo`` (no user, port, scheme or ``.git``)."""
    url = url.strip()
    if "://" in url:
        parts = urlsplit(url)
        if parts.scheme == "file" or not parts.hostname:
            return "file:" + (parts.path.rstrip("/").removesuffix(".git") or "/")
        host, path = parts.hostname, parts.path
    elif (m := _SCP.match(url)) and not Path(url).is_absolute():
        host, path = m["host"], m["path"]
    else:  # a local path used as the remote
        return "file:" + url.rstrip("/").removesuffix(".git")
    host = host.lower()
    path = path.strip("/").removesuffix(".git").strip("/")
    if host in _CASELESS_HOSTS:
        path = path.lower()
    return f"{host}/{path}"
