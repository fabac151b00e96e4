"""Team memory on one password-protected FalkorDB server (the compose server line, on TCP).

Two homes (two GRAPHMEM_HOMEs, as two machines) with two clones of one repository at different
paths (origin in ssh and https spelling: one project key). What A writes, B finds in ``project``
scope from its own local index, ranked as A ranks it; hits say who wrote them and where; A's
clear reaches B through tombstones; B reads only what changed.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from compose_helpers import ComposeServer
from conftest import run_cli
from graphmem import Memory
from graphmem.settings import Settings


def _clone(root: Path, remote: str, email: str | None = None) -> Path:
    root.mkdir(parents=True)
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    subprocess.run(["git", "remote", "add", "origin", remote], cwd=root, check=True)
    if email:
        subprocess.run(["git", "config", "user.email", email], cwd=root, check=True)
    return root


@pytest.fixture
def team(tmp_path):
    """The compose server line, and two clones of one repository at different paths (ssh and
    https spellings of its origin), each with its own home: machine A and machine B."""
    srv = ComposeServer(tmp_path)
    repos = {"a": _clone(tmp_path / "a" / "shop", "git@github.com:acme/shop.git", "alice@example.com"),
             "b": _clone(tmp_path / "b" / "work" / "shop", "https://github.com/acme/shop")}

    def env(name: str, **extra: str) -> dict[str, str]:
        return {"GRAPHMEM_HOME": str(tmp_path / f"home-{name}"), "GRAPHMEM_GRAPH": "on",
                "GRAPHMEM_FALKORDB_URL": srv.url, "GRAPHMEM_HOST": f"machine-{name}",
                "GRAPHMEM_LOCAL_EMBEDDING_MODEL": "wordllama", "GRAPHMEM_SEARCH_SERVER": "off",
                **extra}

    envs = {"a": env("a"), "b": env("b", GRAPHMEM_AUTHOR="bob@example.com")}
    yield srv, repos, envs
    srv.stop()


def _mem(repos: dict, who: str, envs: dict, spec: str | None = None) -> Memory:
    """``who``'s Memory: a spec of its own clone (no project_dir: the clone is found), or the
    whole project."""
    settings = Settings.load(env=envs[who])
    if spec is None:
        return Memory(None, repos[who], settings=settings)
    spec_dir = repos[who] / "auto-claude" / "specs" / spec
    spec_dir.mkdir(parents=True, exist_ok=True)
    return Memory(spec_dir, settings=settings)


A_NOTES = ["stripe webhooks retry for three days, so handlers must be idempotent",
           "the payments worker reads STRIPE_SECRET from the vault, never from .env",
           "invoice PDFs are rendered by a headless chromium in the pdf service"]


def test_b_finds_a_writes_ranked_locally_with_author_and_host(team):
    srv, repos, envs = team
    with _mem(repos, "b", envs, "002-b") as b:
        assert b.append_pattern("feature flags live in config/flags.yaml").graph == "written"
        before = b.search("stripe webhook retries", scope="project")
        assert not [h for h in before if "stripe" in h.text]  # nothing from A yet
    with _mem(repos, "a", envs, "001-a") as a:
        for note in A_NOTES:
            assert a.append_gotcha(note).graph == "written"
        a.update_codebase_map({"payments/webhooks.py": "stripe webhook handler with retries"})
        a_hits = a.search("stripe webhook retries", scope="project")
    with _mem(repos, "b", envs, "002-b") as b:
        b_hits = b.search("stripe webhook retries", scope="project")
        own = b.search("feature flags", scope="project")
    assert a_hits and [h.id for h in b_hits][:len(a_hits)] == [h.id for h in a_hits]
    assert all(h.backend == "local" for h in b_hits)  # taken into B's index, ranked there
    # the same ranker on the same items: B scores A's items as A does
    for ha, hb in zip(a_hits, b_hits):
        assert hb.score == pytest.approx(ha.score, rel=0.25)
    top = b_hits[0]
    assert top.metadata["author"] == "alice@example.com" and top.metadata["host"] == "machine-a"
    assert top.spec == "auto-claude/specs/001-a"  # relative: the same in every clone
    assert top.local_path.startswith(str(repos["b"]))  # where it would be in B's checkout
    assert own[0].metadata["author"] == "bob@example.com" and own[0].metadata["host"] == "machine-b"
    # the command line shows who wrote a hit and where
    cli = run_cli("search", "stripe webhook retries", "--project-dir", str(repos["b"]),
                  "--scope", "project", env=envs["b"])
    assert cli.returncode == 0, cli.stderr
    assert "(by alice@example.com on machine-a)" in cli.stdout


def test_only_changes_are_read_and_deletes_reach_the_other_home(team, monkeypatch):
    from graphmem import _sync
    from graphmem.facade import team as team_mod

    srv, repos, envs = team
    monkeypatch.setattr(team_mod, "MARGIN_MS", 0)  # count exactly what a pull reads
    with _mem(repos, "b", envs, "002-b") as b:
        b.append_pattern("feature flags live in config/flags.yaml")
    with _mem(repos, "a", envs, "001-a") as a:
        for note in A_NOTES:
            a.append_gotcha(note)
    with _mem(repos, "b", envs, "002-b") as b:
        first = _sync.run(team_mod.pull(b.aio))
        assert first["items"] == 3
        again = _sync.run(team_mod.pull(b.aio))
        assert again == {"items": 0, "deleted": 0, "read": 0, "more": False}  # nothing read
        with _mem(repos, "a", envs, "001-a") as a:
            a.append_gotcha("the ledger service rounds half to even")
        more = _sync.run(team_mod.pull(b.aio))
        assert more == {"items": 1, "deleted": 0, "read": 1, "more": False}
        assert [h.text for h in b.search("ledger rounding", scope="project")][0].startswith("the ledger")
        # A clears its spec: the files go, the graph leaves tombstones, B drops the items
        with _mem(repos, "a", envs, "001-a") as a:
            a.clear()
        hits = b.search("stripe webhook retries ledger", scope="project")
        assert not [h for h in hits if h.spec and h.spec.endswith("001-a")]
    # B's reindex leaves A's items in the shared graph, forgets pulled items and the cursor,
    # and takes them in again
    with _mem(repos, "a", envs, "001-a") as a:
        a.append_gotcha("queues are drained before deploys")
    with _mem(repos, "b", envs) as b:
        assert b.reindex()["graph"] == "written"
        hits = b.search("drained before deploys", scope="project")
        assert hits and hits[0].metadata.get("host") == "machine-a"
        assert b.search("feature flags", scope="project")[0].metadata.get("host") == "machine-b"
    with _mem(repos, "a", envs, "001-a") as a:
        d = a.drift()  # B's rebuild left A's items in the shared graph
        assert d["in_graph"] == 1 and d["missing"] == []


def test_no_pull_without_a_shared_server(tmp_path, spec_dir, monkeypatch):
    """With the embedded server (one home) there is nothing to take in: no query is sent."""
    from graphmem import _sync
    from graphmem.facade import team as team_mod

    monkeypatch.setenv("GRAPHMEM_GRAPH", "on")
    with Memory(spec_dir) as mem:
        assert _sync.run(team_mod.pull(mem.aio)) is None


def test_author_comes_from_the_setting_then_git_then_login(tmp_path):
    from graphmem.facade import team as team_mod

    repo = tmp_path / "r"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    subprocess.run(["git", "-C", str(repo), "config", "user.email", "carol@example.com"], check=True)
    s = Settings.load(env={"GRAPHMEM_HOME": str(tmp_path / "h")})
    assert team_mod.author(s, repo) == "carol@example.com"
    s2 = Settings.load(env={"GRAPHMEM_HOME": str(tmp_path / "h"), "GRAPHMEM_AUTHOR": "dan"})
    assert team_mod.author(s2, repo) == "dan"
    assert team_mod.author(s, tmp_path / "missing")  # the login name, never empty
    import socket

    assert team_mod.host(s) == socket.gethostname()


def test_drift_counts_only_this_machines_items_as_extra(team):
    """A teammate's items in a spec this machine also has (B's clone lacks A's file) are not
    'no longer in files'; this machine's own are."""
    srv, repos, envs = team
    with _mem(repos, "a", envs, "003-shared") as a:
        a.append_gotcha("retries back off exponentially")
        spec = a.spec_dir
    with _mem(repos, "b", envs, "003-shared") as b:
        d = b.drift()
        assert d["in_graph"] == 1 and d["extra"] == [] and d["missing"] == []
    (spec / "memory" / "gotchas.md").unlink()
    with _mem(repos, "a", envs, "003-shared") as a:
        assert len(a.drift()["extra"]) == 1  # A's own item, gone from A's files: A's drift


def test_pull_reads_past_a_small_result_set_limit(team):
    """The change feed and the item fetch page past a server's RESULTSET_SIZE."""
    from graphmem import _sync
    from graphmem.facade import team as team_mod

    srv, repos, envs = team
    srv.client().execute_command("GRAPH.CONFIG", "SET", "RESULTSET_SIZE", "5")
    with _mem(repos, "a", envs, "001-a") as a:
        a.update_codebase_map({f"src/part_{i:02d}.py": f"part {i} of the importer" for i in range(12)})
    with _mem(repos, "b", envs, "002-b") as b:
        assert _sync.run(team_mod.pull(b.aio))["items"] == 12
        assert len(b.search("part of the importer", scope="project", limit=20)) == 12


def test_a_deleted_session_leaves_the_other_home_too(team):
    """Turns recorded on A reach B's search; A's delete_session tombstones them for B."""
    srv, repos, envs = team
    with _mem(repos, "a", envs, "004-sessions") as a:
        sid = a.start_session()
        a.record_turn(sid, "user", "The nightly export job silently skips archived tenants")
    with _mem(repos, "b", envs, "004-sessions") as b:
        hits = b.search("nightly export archived tenants", scope="project")
        assert hits and hits[0].kind == "turn" and hits[0].metadata["host"] == "machine-a"
        with _mem(repos, "a", envs, "004-sessions") as a:
            a.delete_session(sid)
        hits = b.search("nightly export archived tenants", scope="project")
        assert not [h for h in hits if h.kind == "turn"]


@pytest.mark.parametrize("name", ["GRAPHMEM_AUTHOR", "GRAPHMEM_HOST"])
@pytest.mark.parametrize("bad", ["alice\nroot", "   ", "x" * 201, "tab\there"])
def test_garbage_author_or_host_is_a_config_error_naming_the_setting(tmp_path, name, bad):
    from graphmem.errors import ConfigError

    with pytest.raises(ConfigError, match=r"team\.(author|host)"):
        Settings.load(env={"GRAPHMEM_HOME": str(tmp_path), name: bad})


def test_a_foreign_node_in_the_shared_graph_is_skipped_not_fatal(team):
    """A node another program (or a broken version) wrote in the project's graph is skipped
    with a warning; B's search still answers and takes in the good items."""
    from graphmem.graph import schema

    srv, repos, envs = team
    with _mem(repos, "a", envs, "001-a") as a:
        a.append_gotcha(A_NOTES[0])
        key = a.aio.project.key
    srv.client().execute_command(
        "GRAPH.QUERY", schema.group_id(key),
        "CREATE (:Entity {uuid: 'junk-1', gm_kind: 'bogus', summary: 'not ours', gm_hash: 'x', "
        "gm_meta: '{broken', gm_time: 'yesterday', gm_written: timestamp()})")
    with _mem(repos, "b", envs, "002-b") as b:
        hits = b.search("stripe webhooks retry idempotent", scope="project")
    assert [h.text for h in hits][:1] == [A_NOTES[0]]
    assert all(h.id != "junk-1" for h in hits)


def test_a_big_first_pull_is_spread_over_searches_and_sync_finishes_it(team):
    """A pull embeds at most its budget of items, so joining a big project never blocks one
    search past its timeout; the cursor keeps the place, and ``sync`` takes in the rest."""
    from graphmem import _sync
    from graphmem.facade import team as team_mod

    srv, repos, envs = team
    with _mem(repos, "a", envs, "001-a") as a:
        a.update_codebase_map({f"src/mod_{i}.py": f"module {i} parses invoices" for i in range(7)})
    with _mem(repos, "b", envs, "002-b") as b:
        first = _sync.run(team_mod.pull(b.aio, budget=3))
        assert first["items"] == 3 and first["more"] is True
        second = _sync.run(team_mod.pull(b.aio, budget=3))
        assert second["items"] == 3 and second["more"] is True  # the next 3, not the first again
        synced = b.sync()
        assert synced["pulled"]["items"] == 1
        assert len(b.search("module parses invoices", scope="project", limit=20)) == 7
    with _mem(repos, "a", envs, "001-a") as a:
        a.append_gotcha("invoices are numbered per tenant")
    cli = run_cli("sync", "--spec-dir", str(repos["b"] / "auto-claude" / "specs" / "002-b"),
                  env=envs["b"])
    assert cli.returncode == 0 and "from teammates: took in 1 item(s)" in cli.stdout


def test_spec_scope_finds_a_teammates_items_of_the_same_spec(team):
    """The spec is named relative to the project root, so B's copy of a spec finds what A wrote
    in A's copy of it, and not what A wrote in another spec."""
    srv, repos, envs = team
    with _mem(repos, "a", envs, "005-billing") as a:
        a.append_gotcha("billing exports round totals per line, never per invoice")
    with _mem(repos, "a", envs, "006-other") as a:
        a.append_gotcha("billing exports in the other spec use CSV")
    with _mem(repos, "b", envs, "005-billing") as b:
        hits = b.search("billing exports", scope="spec")
    assert [h.text for h in hits] == ["billing exports round totals per line, never per invoice"]
    assert hits[0].local_path.startswith(str(repos["b"] / "auto-claude" / "specs" / "005-billing"))


def test_doctor_fix_restores_an_item_as_this_machines(team):
    """An item missing from the shared graph is written back by ``doctor --fix`` with this
    machine's author and host, so a later drift still counts it as this machine's."""
    from graphmem import _sync
    from graphmem.facade import repair
    from graphmem.graph import schema

    srv, repos, envs = team
    with _mem(repos, "a", envs, "007-fix") as a:
        a.append_gotcha("the fixer keeps who wrote it")
        key = a.aio.project.key
        srv.client().execute_command("GRAPH.QUERY", schema.group_id(key),
                                     "MATCH (n:Entity) WHERE n.gm_kind = 'gotcha' DETACH DELETE n")
        assert len(a.drift()["missing"]) == 1
        assert _sync.run(repair.fix_graph(a.aio))["added"] == 1
        (spec_file,) = [a.spec_dir / "memory" / "gotchas.md"]
        spec_file.unlink()  # gone from A's files: A's drift must see it as A's own, extra
        assert len(a.drift()["extra"]) == 1
