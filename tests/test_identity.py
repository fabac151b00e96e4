"""One project wherever it is checked out: root, key, relative paths, and every entry point agrees."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from graphmem import Memory
from graphmem.errors import ConfigError
from graphmem.graph.schema import group_id
from graphmem.identity import normalise_remote, resolve_project
from graphmem.settings import Settings

from conftest import run_cli

needs_git = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
GOTCHA = "Stripe retries a webhook for three days, so handlers must be idempotent"


def git(*args: str, cwd: Path) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True,
                          text=True).stdout.strip()


def clone_like(root: Path, remote: str | None) -> Path:
    """A git repository at ``root`` (origin = ``remote``) with one spec in the auto-claude layout."""
    root.mkdir(parents=True)
    git("init", "-q", cwd=root)
    if remote:
        git("remote", "add", "origin", remote, cwd=root)
    spec = root / ".auto-claude" / "specs" / "001-checkout"
    spec.mkdir(parents=True)
    return spec


@pytest.mark.parametrize("url", [
    "git@github.com:Acme/Shop.git", "https://github.com/acme/shop", "https://github.com/acme/shop/",
    "ssh://git@github.com:22/acme/shop.git", "https://user:token@GitHub.com/acme/shop.git",
    "git+ssh://git@github.com/acme/shop"])
def test_every_spelling_of_a_remote_is_one_key(url):
    assert normalise_remote(url) == "github.com/acme/shop"


def test_remotes_that_differ_stay_apart():
    assert normalise_remote("git@git.example.com:team/a.git") == "git.example.com/team/a"
    assert normalise_remote("git@git.example.com:team/A.git") != "git.example.com/team/a"  # case kept
    assert normalise_remote("git@github.com:acme/shop.git") != normalise_remote("git@github.com:acme/shop2")
    assert normalise_remote("/srv/git/shop.git") == "file:/srv/git/shop"


@needs_git
def test_two_clones_at_different_paths_are_one_project(tmp_path):
    a = clone_like(tmp_path / "machine-a" / "work" / "shop", "git@github.com:acme/shop.git")
    b = clone_like(tmp_path / "machine-b" / "src" / "shop-clone", "https://github.com/acme/shop")
    home_a, home_b = Settings.load(home=str(tmp_path / "home-a")), Settings.load(home=str(tmp_path / "home-b"))
    with Memory(a, settings=home_a) as ma, Memory(b, settings=home_b) as mb:
        assert ma.project.key == mb.project.key == "github.com/acme/shop"
        assert ma.project.root == a.parent.parent.parent  # the work tree, not .auto-claude
        assert ma.project.name == "shop" and mb.project.name == "shop-clone"
        ma.append_gotcha(GOTCHA)
        mb.append_gotcha(GOTCHA)
        ha, hb = ma.search("webhook retries", limit=1), mb.search("webhook retries", limit=1)
    # Same item on both machines: same id, same stored (relative) paths, different local paths.
    assert ha[0].id == hb[0].id and ha[0].project == hb[0].project == "github.com/acme/shop"
    assert ha[0].spec == hb[0].spec == ".auto-claude/specs/001-checkout"
    assert ha[0].source == ".auto-claude/specs/001-checkout/memory/gotchas.md"
    assert ha[0].local_path == str(a / "memory" / "gotchas.md")
    assert hb[0].local_path == str(b / "memory" / "gotchas.md")
    assert group_id(ha[0].project) == group_id(hb[0].project)  # one graph on a shared server


@needs_git
def test_worktrees_of_a_repository_without_origin_are_one_project(tmp_path):
    spec = clone_like(tmp_path / "main", None)
    git("-c", "user.email=t@example.com", "-c", "user.name=t", "commit", "-q", "--allow-empty",
        "-m", "start", cwd=tmp_path / "main")
    git("worktree", "add", "-q", str(tmp_path / "wt"), cwd=tmp_path / "main")
    wt_spec = tmp_path / "wt" / ".auto-claude" / "specs" / "001-checkout"
    wt_spec.mkdir(parents=True)
    main, other = resolve_project(spec), resolve_project(wt_spec)
    assert other.root == tmp_path / "wt" and main.root == tmp_path / "main"
    assert main.key == other.key == str(tmp_path / "main")
    git("remote", "add", "origin", "git@example.com:team/shop.git", cwd=tmp_path / "main")
    assert resolve_project(wt_spec).key == "example.com/team/shop"  # worktrees share the config


@needs_git
def test_an_explicit_id_wins_and_bad_ids_name_their_source(tmp_path):
    spec = clone_like(tmp_path / "shop", "git@github.com:acme/shop.git")
    root = tmp_path / "shop"
    (root / ".graphmem").mkdir()
    (root / ".graphmem" / "project.toml").write_text('id = "acme-shop"\n')
    assert resolve_project(spec).key == "acme-shop"
    assert resolve_project(spec, project_id="override").key == "override"
    with Memory(spec, settings=Settings.load(env={"GRAPHMEM_PROJECT_ID": "from-env",
                                                  "GRAPHMEM_HOME": str(tmp_path / "h")})) as m:
        assert m.project.key == "from-env"
    with pytest.raises(ConfigError, match="GRAPHMEM_PROJECT_ID"):
        resolve_project(spec, project_id="bad\nid")
    (root / ".graphmem" / "project.toml").write_text("id = 3\n")
    with pytest.raises(ConfigError, match="project.toml"):
        resolve_project(spec)


def test_a_committed_id_file_marks_the_root_without_git(tmp_path):
    root = tmp_path / "proj"
    spec = root / "auto-claude" / "specs" / "001"
    spec.mkdir(parents=True)
    assert resolve_project(spec).root == root / "auto-claude"  # the reference default
    (root / ".graphmem").mkdir()
    (root / ".graphmem" / "project.toml").write_text('id = "team/proj"\n')
    p = resolve_project(spec)
    assert (p.root, p.key, p.rel(spec)) == (root, "team/proj", "auto-claude/specs/001")


@needs_git
def test_a_spec_alone_finds_what_was_written_with_the_project_folder(tmp_path):
    """Every entry point given only the spec folder agrees with a write that named the project
    (the issue's `graphmem search --spec-dir` / `sessions --spec-dir` after `make demo`)."""
    spec = clone_like(tmp_path / "shop", "git@github.com:acme/shop.git")
    root = tmp_path / "shop"
    with Memory(spec, root) as m:
        m.append_gotcha(GOTCHA)
        sid = m.start_session(model="m")
        m.record_turn(sid, "user", "why do stripe webhooks arrive twice?")
        m.end_session(sid)
    with Memory(spec) as m:  # the API
        assert m.project.root == root
        assert [h.text for h in m.search("stripe webhook retries", limit=1)] == [GOTCHA]
        assert sid in json.dumps(m.list_recent_sessions())
    r = run_cli("search", "stripe webhook retries", "--spec-dir", str(spec), "--json")  # the CLI
    assert r.returncode == 0, r.stderr
    hits = json.loads(r.stdout)
    hits = hits["hits"] if isinstance(hits, dict) else hits
    assert hits[0]["text"] == GOTCHA and hits[0]["project"] == "github.com/acme/shop"
    r = run_cli("sessions", "--spec-dir", str(spec), "--json")
    assert r.returncode == 0 and sid in r.stdout, r.stdout + r.stderr
    from graphmem import compat  # the reference's functions take only the spec folder

    compat.append_gotcha(spec, "Refunds are asynchronous; poll the refund status")
    with Memory(None, root / ".auto-claude") as m:  # a sub-folder names the same project
        assert m.project.root == root
        texts = [h.text for h in m.search("refund status polling", scope="project", limit=3)]
    assert "Refunds are asynchronous; poll the refund status" in texts


@needs_git
def test_the_mcp_server_started_on_a_spec_agrees(tmp_path):
    """An MCP server given only the spec folder searches the repository's project, and a tool
    may name the repository root (the implied project), not only two levels above the spec."""
    import anyio
    from mcp import Client

    from graphmem.serve.mcp_server import build_server

    spec = clone_like(tmp_path / "shop", "git@github.com:acme/shop.git")
    root = tmp_path / "shop"
    with Memory(spec, root) as m:
        m.append_gotcha(GOTCHA)

    def data(result) -> dict:
        assert not result.is_error, result.content
        return result.structured_content or json.loads(result.content[0].text)

    async def main():
        async with Client(build_server(spec)) as c:
            got = data(await c.call_tool("search_memory", {"query": "stripe webhook retries"}))
            assert got["hits"][0]["text"] == GOTCHA
            assert got["hits"][0]["project"] == "github.com/acme/shop"
            assert got["hits"][0]["local_path"] == str(spec / "memory" / "gotchas.md")
            whole = data(await c.call_tool("search_memory", {"query": "stripe webhook retries",
                                                              "project_dir": str(root)}))
            assert whole["hits"][0]["text"] == GOTCHA
    anyio.run(main)


def test_a_spec_at_the_project_root_keeps_its_own_scope(tmp_path):
    root = tmp_path / "proj"
    (root / ".graphmem").mkdir(parents=True)
    (root / ".graphmem" / "project.toml").write_text('id = "team/proj"\n')
    inner = root / "specs" / "001"
    inner.mkdir(parents=True)
    with Memory(root) as top, Memory(inner) as sub:
        top.append_gotcha("Top-level specs hold the release checklist")
        sub.append_gotcha("Inner specs hold the release notes draft")
        assert top.aio.spec_key == "." and sub.aio.spec_key == "specs/001"
        texts = [h.text for h in top.search("release", scope="spec", limit=5)]
    assert texts == ["Top-level specs hold the release checklist"]  # not the whole project
