"""Teammates neither delete nor overwrite what another home wrote (issue 35, finding 3): a clear
or a reindex reaches only this home's nodes (by its writer: two homes on one machine differ),
and a teammate's item of the same id never replaces this home's own index row."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import time

from graphmem import Memory, _sync
from graphmem.graph import schema
from graphmem.settings import Settings
from test_team import _clone, _mem, team  # noqa: F401  (the fixture: the compose server, two homes)


def _graph_ids(srv, key: str) -> dict[str, str]:
    """uuid -> text of the project graph's items, read straight from the server."""
    res = srv.client().execute_command(
        "GRAPH.QUERY", schema.group_id(key),
        "MATCH (n:Entity) WHERE n.gm_kind IS NOT NULL RETURN n.uuid, n.summary")
    return {r[0]: r[1] for r in res[1]}


def _rows(srv, key: str, query: str) -> list:
    return srv.client().execute_command("GRAPH.QUERY", schema.group_id(key), query)[1]


def _tombstones(srv, key: str) -> set[str]:
    res = srv.client().execute_command("GRAPH.QUERY", schema.group_id(key),
                                       "MATCH (t:GraphmemTombstone) RETURN t.uuid")
    return {r[0] for r in res[1]}


def test_clear_removes_only_this_homes_items_of_a_spec_of_the_same_name(team):
    """A and B each have a spec named 003-same (committed spec folders share names); A's clear
    leaves B's items in the shared graph, untombstoned, and B's drift sees nothing missing."""
    srv, repos, envs = team
    with _mem(repos, "a", envs, "003-same") as a:
        a.append_gotcha("A: the importer skips blank rows")
        key = a.aio.project.key
    with _mem(repos, "b", envs, "003-same") as b:
        b.append_gotcha("B: the exporter writes UTF-8 with a BOM")
        b.search("exporter", scope="project")  # takes A's item in
    before = _graph_ids(srv, key)
    (a_id,) = [u for u, t in before.items() if t.startswith("A:")]
    (b_id,) = [u for u, t in before.items() if t.startswith("B:")]
    with _mem(repos, "a", envs, "003-same") as a:
        a.clear()
    after = _graph_ids(srv, key)
    assert a_id not in after and b_id in after
    assert a_id in _tombstones(srv, key) and b_id not in _tombstones(srv, key)
    assert _rows(srv, key, f"MATCH (a)-[:RELATES_TO]->(n {{uuid: '{b_id}'}}) "
                 "WHERE a.gm_anchor IS NOT NULL RETURN a.uuid")  # B's anchor stays
    with _mem(repos, "a", envs, "006-only-a") as a:  # a spec only A has: nothing of it is left
        a.append_gotcha("A: only A writes here")
        a.clear()
    assert not _rows(srv, key, "MATCH (n) WHERE n.gm_spec = 'auto-claude/specs/006-only-a' "
                     "RETURN n.uuid")
    with _mem(repos, "b", envs, "003-same") as b:
        assert b.drift()["missing"] == []
        texts = [h.text for h in b.search("importer exporter rows BOM", scope="project")]
    assert "B: the exporter writes UTF-8 with a BOM" in texts
    assert "A: the importer skips blank rows" not in texts  # A's clear reached B


def test_a_teammates_item_of_the_same_id_never_replaces_my_own(team):
    """A and B map the same file in a spec of the same name: one id. B's pull leaves B's own
    row (and text) alone, and A's clear does not take B's memory out of B's search."""
    srv, repos, envs = team
    with _mem(repos, "b", envs, "004-same") as b:
        b.update_codebase_map({"payments/refunds.py": "B: refunds are queued for the nightly batch"})
    with _mem(repos, "a", envs, "004-same") as a:
        a.update_codebase_map({"payments/refunds.py": "A: refunds call the gateway at once"})
    with _mem(repos, "b", envs, "004-same") as b:
        hits = b.search("refunds payments", scope="project")
        assert [h.text for h in hits if h.kind == "file"] == [
            "payments/refunds.py: B: refunds are queued for the nightly batch"]
    with _mem(repos, "a", envs, "004-same") as a:
        a.clear()
    with _mem(repos, "b", envs, "004-same") as b:
        hits = b.search("refunds payments", scope="project")
        assert [h.text for h in hits if h.kind == "file"] == [
            "payments/refunds.py: B: refunds are queued for the nightly batch"]
        assert b.drift()["extra"] == []


def test_two_homes_on_one_machine_keep_each_others_items_on_reindex(tmp_path, team):
    """Two homes with the same host name (the compose README's many agents on one machine):
    one's reindex leaves the other's items in the shared graph."""
    srv, repos, envs = team
    shared = {k: v for k, v in envs["a"].items() if k != "GRAPHMEM_HOST"}  # both: the hostname
    envs2 = {"a": shared, "b": {**shared, "GRAPHMEM_HOME": str(tmp_path / "home-a2")}}
    repo2 = _clone(tmp_path / "a2" / "shop", "git@github.com:acme/shop.git")
    spec1 = repos["a"] / "auto-claude" / "specs" / "010-one"
    spec2 = repo2 / "auto-claude" / "specs" / "011-two"
    for spec in (spec1, spec2):
        spec.mkdir(parents=True)
    with Memory(spec1, settings=Settings.load(env=envs2["a"])) as one:
        one.append_gotcha("agent one: the cache is warmed before the deploy")
        key = one.aio.project.key
    with Memory(spec2, settings=Settings.load(env=envs2["b"])) as two:
        two.append_gotcha("agent two: migrations run in a single transaction")
    assert len(_graph_ids(srv, key)) == 2
    with Memory(None, repo2, settings=Settings.load(env=envs2["b"])) as two:
        assert two.reindex()["graph"] == "written"
    texts = set(_graph_ids(srv, key).values())
    assert texts == {"agent one: the cache is warmed before the deploy",
                     "agent two: migrations run in a single transaction"}
    with Memory(spec1, settings=Settings.load(env=envs2["a"])) as one:
        assert one.drift()["missing"] == []


def test_a_node_rewritten_over_my_item_does_not_replace_my_row(team):
    """Even a node rewritten in the graph over my item (same id) leaves my own row as my files
    hold it: the pull takes in no id this home's files hold."""
    from graphmem.facade import team as team_mod

    srv, repos, envs = team
    with _mem(repos, "b", envs, "005-mine") as b:
        b.append_gotcha("B: the scheduler runs in UTC")
        key = b.aio.project.key
        (b_id,) = _graph_ids(srv, key)
    srv.client().execute_command("GRAPH.QUERY", schema.group_id(key),
                                 f"MATCH (n:Entity {{uuid: '{b_id}'}}) SET n.summary = 'rewritten', "
                                 "n.gm_hash = 'other', n.gm_written = timestamp()")
    with _mem(repos, "b", envs, "005-mine") as b:
        _sync.run(team_mod.pull(b.aio))
        (row,) = b.aio.derived.local.index.rows_by_id([b_id])
        assert row["text"] == "B: the scheduler runs in UTC" and row["project"] == key


def _count(home: str, sql: str) -> int:
    """One count from a home's index, read-only (0 while the database or table is missing)."""
    try:
        db = sqlite3.connect(f"file:{home}/index.sqlite3?mode=ro", uri=True)
        try:
            return db.execute(sql).fetchone()[0]
        finally:
            db.close()
    except sqlite3.Error:
        return 0


def test_sync_that_loses_the_server_mid_pull_exits_non_zero(team):
    """``graphmem sync`` whose server goes away while it takes in a big first pull says so on
    stderr and exits 1; what it took in stays."""
    srv, repos, envs = team
    n = 2000  # eight pulls of 256: the server is stopped after the first one landed
    with _mem(repos, "a", envs, "001-a") as a:
        a.update_codebase_map({f"src/part_{i:04d}.py": f"part {i} of the importer" for i in range(n)})
    spec_b = repos["b"] / "auto-claude" / "specs" / "002-b"
    spec_b.mkdir(parents=True)
    home = envs["b"]["GRAPHMEM_HOME"]
    proc = subprocess.Popen([sys.executable, "-m", "graphmem.cli", "sync", "--spec-dir",
                             str(spec_b)], env={**os.environ, **envs["b"]},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and proc.poll() is None \
            and not _count(home, "SELECT count(*) FROM team_cursors"):
        time.sleep(0.005)
    srv.stop()
    out, err = proc.communicate(timeout=120)
    assert 0 < _count(home, "SELECT count(*) FROM search_items") < n  # stopped mid-pull
    assert proc.returncode == 1, out + err
    assert "sync did not finish" in err and "teammates' writes" in err
