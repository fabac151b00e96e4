"""Optional git hooks that refresh anchor states in the background after commits, merges,
checkouts and rebases (``graphmem hooks install``); after all but a commit the local index catches
up with the memory files git brought in (``graphmem reindex``). Installing also registers
graphmem's merge driver for memory JSON files (``files/merge.py``).

Each hook runs the user's own hook first (an existing hook is kept, renamed ``<hook>.graphmem-user``,
and its exit status is the hook's), then starts ``graphmem anchors refresh`` detached, so the git
command never waits for it. Reads never depend on the hooks: freshness is computed from git at
read time; the refresh only writes anchors that are missing, each spec's
``memory/anchor_states.json`` (what is stale, for people and tools), and renames to the graph.
Last, every hook runs ``graphmem agents-md --refresh``: the section graphmem wrote into AGENTS.md,
CLAUDE.md or a ``.mdc`` rule is re-rendered in the files that already carry its markers (no file
without them is touched; an unchanged section is not written, so the tree stays clean), unless
``GRAPHMEM_AGENTS_MD_REFRESH=false``.
``graphmem hooks uninstall`` removes graphmem's hooks and puts the user's back.
"""

from __future__ import annotations

import os
import shlex
import stat
import subprocess
import sys
from pathlib import Path

from graphmem.errors import NotFoundError, ValidationError

HOOKS = ("post-commit", "post-merge", "post-checkout", "post-rewrite")
MARKER = "# graphmem-hook"
USER_SUFFIX = ".graphmem-user"


def hooks_dir(project_dir: Path) -> Path:
    """The folder git runs this repository's hooks from (``core.hooksPath`` respected)."""
    try:
        out = subprocess.run(["git", "-C", str(project_dir), "rev-parse", "--git-path", "hooks"],
                             capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError) as exc:
        raise NotFoundError(f"cannot run git: {exc}") from None
    if out.returncode != 0 or not out.stdout.strip():
        from graphmem.identity import broken_link, enclosing

        missing = broken_link(enclosing(Path(project_dir).resolve()) or Path(project_dir))
        if missing is not None:  # a worktree whose repository moved or pruned it
            raise ValidationError(
                f"{project_dir} is a worktree whose .git file points to {missing}, which does "
                f"not exist; mend the link first (`graphmem doctor --project-dir {project_dir}` "
                "says how)", field="project_dir")
        raise ValidationError(f"{project_dir} is not a git repository (hooks need one)",
                              field="project_dir")
    path = Path(out.stdout.strip())
    return path if path.is_absolute() else (project_dir / path).resolve()


HERE = '"$(git rev-parse --show-toplevel)"'  # the work tree git runs the hook for


def _toplevel(project_dir: Path) -> Path | None:
    try:
        out = subprocess.run(["git", "-C", str(project_dir), "rev-parse", "--show-toplevel"],
                             capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return Path(out.stdout.strip()).resolve() if out.returncode == 0 and out.stdout.strip() \
        else None


def script(project_dir: Path) -> str:
    """The hook's shell text: the user's hook, then the refresh, detached. The work trees of one
    repository share its hooks: installed for a whole work tree, each refreshes the one committed
    in; installed for a folder inside one (a project of a monorepo), that folder."""
    where = HERE if _toplevel(project_dir) == project_dir else shlex.quote(str(project_dir))
    cmd = " ".join(shlex.quote(x) for x in (sys.executable, "-m", "graphmem.cli", "anchors",
                                            "refresh", "--project-dir")) + " " + where
    # a merge, checkout or rebase may bring memory files in: the index catches up (what did not
    # change is kept as it is); a commit brings nothing graphmem has not indexed already
    cmd += '; case "$(basename "$0")" in post-commit) ;; *) ' + " ".join(
        shlex.quote(x) for x in (sys.executable, "-m", "graphmem.cli", "reindex",
                                 "--project-dir")) + " " + where + " ;; esac"
    # then the marked section of AGENTS.md / CLAUDE.md / .mdc rules, from the memory caught up
    cmd += "; " + " ".join(shlex.quote(x) for x in (sys.executable, "-m", "graphmem.cli",
                                                    "agents-md", "--refresh", "--project-dir")) \
        + " " + where
    return (f"#!/bin/sh\n{MARKER}: refreshes graphmem's anchor states in the background.\n"
            "# `graphmem hooks uninstall` removes it (and restores a hook it chained to).\n"
            "status=0\n"
            f'if [ -x "$0{USER_SUFFIX}" ]; then "$0{USER_SUFFIX}" "$@"; status=$?; fi\n'
            f"( {{ {cmd}; }} </dev/null >/dev/null 2>&1 & )\n"
            "exit $status\n")


def _ours(path: Path) -> bool:
    try:
        return MARKER in path.read_text(errors="replace")
    except OSError:
        return False


def install(project_dir: str | Path) -> dict:
    """Write the hooks and register the merge driver -> ``{"hooks_dir", "installed": [...],
    "chained": [...], "merge_driver", "attributes"}``.

    A user's hook is chained (kept as ``<hook>.graphmem-user`` and run first); installing
    again replaces graphmem's own hooks only. Refused when a hook is not a regular file or a
    chained copy is already there beside a foreign hook (nothing is changed then).
    """
    root = Path(project_dir).resolve()
    folder = hooks_dir(root)
    plan = []
    for name in HOOKS:
        path, user = folder / name, folder / (name + USER_SUFFIX)
        if path.is_symlink() or (path.exists() and not path.is_file()):
            raise ValidationError(f"{path} is not a regular file; graphmem will not replace it "
                                  "(remove it or chain it yourself)", field="project_dir")
        foreign = path.exists() and not _ours(path)
        if foreign and user.exists():
            raise ValidationError(f"{path} is a hook graphmem did not write, and {user.name} "
                                  "already exists: refusing to overwrite either", field="project_dir")
        plan.append((name, path, user, foreign))
    folder.mkdir(parents=True, exist_ok=True)
    text = script(root)
    installed, chained = [], []
    for name, path, user, foreign in plan:
        if foreign:
            os.replace(path, user)
            chained.append(name)
        tmp = path.with_name(f".{name}.{os.getpid()}.tmp")
        tmp.write_text(text)
        tmp.chmod(tmp.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
        os.replace(tmp, path)
        installed.append(name)
    from graphmem.files.merge import register_driver, write_attributes

    register_driver(root, sys.executable)  # git does not clone merge drivers: every clone's config
    own = root / ".graphmem"  # the project memory writes its attributes with its first memory
    attributes = str(write_attributes(own)) if own.is_dir() and not own.is_symlink() else None
    return {"hooks_dir": str(folder), "installed": installed, "chained": chained,
            "merge_driver": "graphmem", "attributes": attributes}


def uninstall(project_dir: str | Path) -> dict:
    """Remove graphmem's hooks, restoring chained user hooks -> ``{"removed", "restored"}``."""
    folder = hooks_dir(Path(project_dir).resolve())
    from graphmem.files.merge import unregister_driver

    unregister_driver(Path(project_dir).resolve())
    removed, restored = [], []
    for name in HOOKS:
        path, user = folder / name, folder / (name + USER_SUFFIX)
        if path.is_file() and _ours(path):
            path.unlink()
            removed.append(name)
            if user.exists():
                os.replace(user, path)
                restored.append(name)
    return {"hooks_dir": str(folder), "removed": removed, "restored": restored}
