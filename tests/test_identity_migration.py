"""A home written by the release before project keys migrates without duplicates; reindex is
idempotent for every spelling of a project folder; clear --spec-dir alone removes the hits."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile
import io
from pathlib import Path

import pytest

from graphmem import Memory
from graphmem.settings import Settings

from conftest import run_cli

REPO = Path(__file__).resolve().parent.parent
OLD_RELEASE = "21f2209"  # main before project keys: projects keyed by absolute path
GOTCHAS = ["Stripe retries a webhook for three days, so handlers must be idempotent",
           "The orders table is partitioned by month; queries need the created_at range"]
OLD_WRITER = """
import sys
from graphmem import Memory
spec = sys.argv[1]
with Memory(spec) as m:  # the old default project: two levels above the spec
    for g in {gotchas!r}:
        m.append_gotcha(g)
    m.save_session_insights(1, {{"what_worked": ["Idempotency keys on every payment call"]}})
    m.update_codebase_map({{"src/payments/webhooks.py": "Stripe webhook handler"}})
    print(m.search("webhook", limit=1)[0].project)
"""


def old_release(tmp_path: Path) -> Path:
    """The source of the previous release, from this repository's history (or skip)."""
    if shutil.which("git") is None or not (REPO / ".git").exists():
        pytest.skip("needs git and this repository's history to run the previous release")
    out = subprocess.run(["git", "-C", str(REPO), "archive", OLD_RELEASE, "src", "providers"],
                         capture_output=True)
    if out.returncode != 0:
        pytest.skip(f"release {OLD_RELEASE} is not in this repository's history")
    dest = tmp_path / "old-release"
    with tarfile.open(fileobj=io.BytesIO(out.stdout)) as tar:
        tar.extractall(dest, filter="data")
    # its own providers too: the editable install maps graphmem.providers to this tree's, which
    # read settings the old release does not have (found before that mapping is consulted)
    (dest / "src" / "graphmem" / "providers").symlink_to(dest / "providers")
    return dest / "src"


def repo_with_spec(root: Path) -> Path:
    root.mkdir(parents=True)
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    subprocess.run(["git", "remote", "add", "origin", "git@example.com:team/shop.git"], cwd=root,
                   check=True)
    spec = root / "auto-claude" / "specs" / "001-checkout"
    spec.mkdir(parents=True)
    return spec


def texts(hits) -> list[str]:
    return [h.text for h in hits]


def test_a_home_of_the_previous_release_migrates_without_duplicates(tmp_path):
    src = old_release(tmp_path)
    spec = repo_with_spec(tmp_path / "shop")
    home = tmp_path / "home"
    env = {**os.environ, "PYTHONPATH": str(src), "GRAPHMEM_HOME": str(home), "GRAPHMEM_GRAPH": "off"}
    old = subprocess.run([sys.executable, "-c", OLD_WRITER.format(gotchas=GOTCHAS), str(spec)],
                         env=env, capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert old.returncode == 0, old.stderr
    assert old.stdout.strip() == str(spec.parent.parent)  # the old key: the auto-claude folder

    settings = Settings.load(home=str(home))
    with Memory(spec, settings=settings) as m:
        hits = m.search("webhook handler idempotent payments", scope="all", limit=50)
        projects = m.aio.derived.local.index.projects()
        count = m.aio.derived.local.index.count()
    assert len(texts(hits)) == len(set(texts(hits))) == count == 4  # each item once
    assert {h.project for h in hits} == {"example.com/team/shop"}
    assert [(p["path"], p["legacy"]) for p in projects] == [("example.com/team/shop", 0)]
    assert all(not Path(h.source).is_absolute() for h in hits)

    # Every spelling of the folder reindexes the same project: nothing is added or duplicated.
    root = spec.parent.parent.parent
    (tmp_path / "link").symlink_to(root)
    for spelling in (str(root), str(root) + "/", str(tmp_path / "link"), str(root / "auto-claude")):
        r = run_cli("reindex", "--project-dir", spelling, "--json", env={"GRAPHMEM_HOME": str(home)})
        assert r.returncode == 0, r.stderr
        assert '"items": 4' in r.stdout and '"removed": 0' in r.stdout, (spelling, r.stdout)
    with Memory(spec, settings=settings) as m:
        assert m.aio.derived.local.index.count() == 4
        assert len(m.aio.derived.local.index.projects()) == 1


def test_reindex_spellings_of_a_plain_folder_are_one_project(tmp_path):
    """Without git: a symlink, a trailing slash and a sub-folder of a registered project."""
    root = tmp_path / "plain"
    spec = root / "specs" / "001"
    spec.mkdir(parents=True)
    with Memory(spec, root) as m:
        for g in GOTCHAS:
            m.append_gotcha(g)
    (tmp_path / "alias").symlink_to(root)
    for spelling in (str(root), str(root) + "/", str(tmp_path / "alias"), str(root / "specs")):
        r = run_cli("reindex", "--project-dir", spelling, "--json")
        assert r.returncode == 0 and '"items": 2' in r.stdout and '"removed": 0' in r.stdout, \
            (spelling, r.stdout, r.stderr)
    with Memory(spec, root) as m:
        assert m.aio.derived.local.index.count() == 2
        assert [p["root"] for p in m.aio.derived.local.index.projects()] == [str(root)]


def test_clear_with_only_the_spec_folder_removes_the_hits(tmp_path):
    spec = repo_with_spec(tmp_path / "shop")
    with Memory(spec, tmp_path / "shop") as m:  # written naming the project
        m.append_gotcha(GOTCHAS[0])
    r = run_cli("clear", "--spec-dir", str(spec), "--yes")
    assert r.returncode == 0, r.stderr
    with Memory(None, tmp_path / "shop") as m:
        assert m.search("stripe webhook", scope="project", limit=5) == []


def _graphs(settings: Settings) -> dict[str, int]:
    """Graph name -> item nodes, on the home's embedded server (outside graphmem's code path)."""
    from graphmem.graph import server

    client = server.sync_client(server.EmbeddedServer(settings).endpoint())
    try:
        names = client.execute_command("GRAPH.LIST")
        return {g: client.execute_command("GRAPH.RO_QUERY", g, "MATCH (n:Entity) WHERE "
                                          "n.gm_kind IS NOT NULL RETURN count(n)")[1][0][0]
                for g in names}
    finally:
        client.close()


def test_the_previous_release_graph_is_rebuilt_under_the_project_key(tmp_path, monkeypatch):
    from graphmem.cli.doctor import run_doctor
    from graphmem.graph.schema import group_id

    src = old_release(tmp_path)
    spec = repo_with_spec(tmp_path / "shop")
    home = tmp_path / "home"
    graph_env = {"GRAPHMEM_HOME": str(home), "GRAPHMEM_GRAPH": "on",
                 "GRAPHMEM_LOCAL_EMBEDDING_MODEL": "wordllama"}
    old = subprocess.run([sys.executable, "-c", OLD_WRITER.format(gotchas=GOTCHAS), str(spec)],
                         env={**os.environ, **graph_env, "PYTHONPATH": str(src)},
                         capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert old.returncode == 0, old.stderr
    settings = Settings.load(env=graph_env)
    old_graph, new_graph = group_id(str(spec.parent.parent)), group_id("example.com/team/shop")
    assert _graphs(settings) == {old_graph: 4}  # the old release's graph, named by the path

    with Memory(spec, settings=settings) as m:
        hits = m.search("webhook handler idempotent payments", scope="all", limit=50)
        drift = m.drift()
    assert len(hits) == len({h.id for h in hits}) == 4
    assert _graphs(settings) == {new_graph: 4}  # rebuilt under the key; the old one dropped
    assert drift["missing"] == drift["extra"] == []
    for var, value in graph_env.items():
        monkeypatch.setenv(var, value)
    rows = run_doctor(spec, None)["sections"]["graph"]  # doctor --spec-dir checks this graph
    assert [r["status"] for r in rows if r["name"] in ("drift", "embedder")] == ["ok", "ok"], rows
