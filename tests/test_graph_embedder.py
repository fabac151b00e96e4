"""One embedder per shared graph: a teammate with another embedder is refused, by name, before
any file is written; searches say so instead of returning nothing; doctor shows it."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from graphmem import Memory
from graphmem.cli.doctor import run_doctor
from graphmem.errors import IndexMismatchError
from graphmem.graph import server
from graphmem.settings import Settings

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed")
GOTCHA = "Stripe retries a webhook for three days, so handlers must be idempotent"


def clone(root: Path, remote: str) -> Path:
    root.mkdir(parents=True)
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    subprocess.run(["git", "remote", "add", "origin", remote], cwd=root, check=True)
    spec = root / ".auto-claude" / "specs" / "001"
    spec.mkdir(parents=True)
    return spec


def test_a_teammate_with_another_embedder_is_refused(tmp_path, monkeypatch):
    a = clone(tmp_path / "a" / "shop", "git@github.com:acme/shop.git")
    b = clone(tmp_path / "b" / "shop", "https://github.com/acme/shop")
    env_a = {"GRAPHMEM_HOME": str(tmp_path / "home-a"), "GRAPHMEM_GRAPH": "on"}  # default model
    sa = Settings.load(env=env_a)
    embedded = server.EmbeddedServer(sa)
    try:
        ep = embedded.ensure()
        sb = Settings.load(env={"GRAPHMEM_HOME": str(tmp_path / "home-b"), "GRAPHMEM_GRAPH": "on",
                                "GRAPHMEM_FALKORDB_URL": f"unix://{ep.unix_socket}",
                                "GRAPHMEM_LOCAL_EMBEDDING_MODEL": "wordllama"})
        with Memory(a, settings=sa) as ma:
            assert ma.append_gotcha(GOTCHA).graph == "written"
            model_a = ma.aio.derived.local.embedder.name
        with Memory(b, settings=sb) as mb:
            with pytest.raises(IndexMismatchError) as info:
                mb.append_gotcha("Refunds are asynchronous")
            msg = str(info.value)
            assert model_a in msg and "wordllama" in msg and "(256-d)" in msg  # both models
            assert "GRAPHMEM_LOCAL_EMBEDDING_MODEL" in msg and "new graph" in msg  # the way out
            assert not (b / "memory" / "gotchas.md").exists()  # refused before the file
            with pytest.raises(IndexMismatchError, match="wordllama"):
                mb.search("webhook retries", scope="project")
            assert mb.search("webhook retries", scope="all") == []  # skipped, not a failure
        monkeypatch.setenv("GRAPHMEM_HOME", str(tmp_path / "home-b"))
        monkeypatch.setenv("GRAPHMEM_GRAPH", "on")
        monkeypatch.setenv("GRAPHMEM_FALKORDB_URL", f"unix://{ep.unix_socket}")
        monkeypatch.setenv("GRAPHMEM_LOCAL_EMBEDDING_MODEL", "wordllama")
        rows = run_doctor(b, None)["sections"]["graph"]
        emb = [r for r in rows if r["name"] == "embedder"]
        assert emb and emb[0]["status"] == "error" and model_a in emb[0]["detail"], rows
        with Memory(a, settings=sa) as ma:  # the shared graph was not touched
            assert [h.text for h in ma.search("webhook retries", scope="project", limit=1)] == [GOTCHA]
        for var in ("GRAPHMEM_FALKORDB_URL", "GRAPHMEM_LOCAL_EMBEDDING_MODEL"):
            monkeypatch.delenv(var)
        monkeypatch.setenv("GRAPHMEM_HOME", str(tmp_path / "home-a"))
        rows = run_doctor(a, None)["sections"]["graph"]
        assert [r["status"] for r in rows if r["name"] == "embedder"] == ["ok"], rows
    finally:
        embedded.stop()
