"""A worktree whose ``.git`` file points to a folder that no longer exists (its repository
moved, or no longer lists it) is keyed by that missing path: ``graphmem doctor`` says so, says
how to mend the link, and, once mended, reports the repository's key again."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

from conftest import run_cli
from graphmem import Memory

REMOTE = "git@github.com:acme/shop.git"


def git(*args: str) -> None:
    subprocess.run(["git", *args], check=True, capture_output=True)


def worktree(tmp_path: Path) -> tuple[Path, Path, Path]:
    """A repository with an origin and a worktree holding a spec with one gotcha."""
    main, wt = tmp_path / "main", tmp_path / "wt"
    git("init", "-q", str(main))
    git("-C", str(main), "remote", "add", "origin", REMOTE)
    git("-C", str(main), "-c", "user.name=t", "-c", "user.email=t@example.invalid", "commit",
        "-q", "--allow-empty", "-m", "start")
    git("-C", str(main), "worktree", "add", "-q", str(wt))
    spec = wt / "specs" / "001"
    spec.mkdir(parents=True)
    with Memory(spec) as mem:
        mem.append_gotcha("Refunds are idempotent by order id")
        assert mem.project.key == "github.com/acme/shop"
    return main, wt, spec


def project_rows(folder: Path) -> dict[str, dict]:
    out = run_cli("doctor", "--project-dir", str(folder), "--json")
    assert out.returncode == 0, out.stderr
    return {r["name"]: r for r in json.loads(out.stdout)["sections"]["project"]}


def test_doctor_names_a_worktree_whose_repository_moved_and_how_to_mend_it(tmp_path):
    main, wt, spec = worktree(tmp_path)
    assert "git link" not in project_rows(wt)
    assert project_rows(wt)["key"]["detail"].startswith("github.com/acme/shop (from the origin")
    main.rename(tmp_path / "main2")
    rows = project_rows(wt)
    link = rows["git link"]
    assert link["status"] == "warn"
    assert f"{wt}/.git points to {main}/.git/worktrees/wt, which does not exist" in link["detail"]
    assert f"worktree repair {wt}" in link["detail"] and "graphmem reindex" in link["detail"]
    assert rows["key"]["detail"].startswith(f"{main}/.git/worktrees/wt (from the missing folder")
    git("-C", str(tmp_path / "main2"), "worktree", "repair", str(wt))  # the advice, followed
    rows = project_rows(wt)
    assert "git link" not in rows and rows["key"]["detail"].startswith("github.com/acme/shop")
    found = run_cli("search", "refunds idempotent", "--spec-dir", str(spec), "--json")
    assert found.returncode == 0 and "idempotent" in found.stdout, found.stderr


def test_doctor_says_when_the_repository_no_longer_lists_the_worktree(tmp_path):
    main, wt, _ = worktree(tmp_path)
    shutil.rmtree(main / ".git" / "worktrees" / "wt")  # what `git worktree prune` does
    link = project_rows(wt)["git link"]["detail"]
    assert f"git -C {main} worktree add" in link and f"delete {wt}/.git" in link


def test_hooks_and_anchors_refresh_name_a_broken_worktree_link(tmp_path):
    main, wt, _ = worktree(tmp_path)
    main.rename(tmp_path / "main2")
    hooks = run_cli("hooks", "install", "--project-dir", str(wt))
    assert hooks.returncode == 2 and "Traceback" not in hooks.stderr
    assert f".git file points to {main}/.git/worktrees/wt, which does not exist" in hooks.stderr
    assert "graphmem doctor" in hooks.stderr and "not a git repository" not in hooks.stderr
    refresh = run_cli("anchors", "refresh", "--project-dir", str(wt))
    assert refresh.returncode == 0, refresh.stderr
    assert f"points to {main}/.git/worktrees/wt" in refresh.stdout and "graphmem doctor" in refresh.stdout


OLD_WRITER = """
import sys
from graphmem import Memory
with Memory(sys.argv[1]) as m:
    m.append_gotcha("Refunds post to the ledger before the gateway")
    print(m.project.key)
"""


def test_a_pruned_worktree_keeps_its_repository_key_and_its_memories_move_there(
        tmp_path, monkeypatch):
    # Before: a worktree its repository pruned was keyed by the missing folder its .git names,
    # so its memories left the repository's project. Now it keeps the repository's key, and the
    # rows an earlier build wrote under the missing path are moved (rebuilt from the files).
    import os
    import sys

    import test_identity_migration as migration
    from graphmem.settings import Settings

    monkeypatch.setattr(migration, "OLD_RELEASE", "41f8f42")  # the build before this change
    src = migration.old_release(tmp_path)
    main, wt, spec = worktree(tmp_path)
    shutil.rmtree(main / ".git" / "worktrees" / "wt")  # what `git worktree prune` does
    home = Path(os.environ["GRAPHMEM_HOME"])
    env = {**os.environ, "PYTHONPATH": str(src), "GRAPHMEM_GRAPH": "off"}
    old = subprocess.run([sys.executable, "-c", OLD_WRITER, str(spec)], env=env,
                         capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert old.returncode == 0, old.stderr
    assert old.stdout.strip() == f"{main}/.git/worktrees/wt"  # the old key: a missing folder

    with Memory(spec, settings=Settings.load(home=str(home))) as mem:
        assert mem.project.key == "github.com/acme/shop"
        hits = mem.search("refunds ledger gateway idempotent", scope="all", limit=10)
        keys = [p["path"] for p in mem.aio.derived.local.index.projects()]
    assert sorted(h.text for h in hits) == ["Refunds are idempotent by order id",
                                            "Refunds post to the ledger before the gateway"]
    assert {h.project for h in hits} == {"github.com/acme/shop"}  # each once, one key
    assert keys == ["github.com/acme/shop"]
    rows = project_rows(wt)
    assert rows["key"]["detail"].startswith("github.com/acme/shop (from the origin remote)")
    assert "keep the repository's key" in rows["git link"]["detail"]
