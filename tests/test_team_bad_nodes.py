"""Nodes a teammate (or any program holding the password) wrote straight into the shared graph:
too big, malformed, without a vector, with paths out of the project or with spoofed metadata.
Each costs one warning, once; no search fails or grows with them (issue 35, findings 1 and 3).
"""

from __future__ import annotations

import json

import pytest

from conftest import run_cli
from graphmem.graph import schema
from test_team import A_NOTES, _mem, team  # noqa: F401  (the fixture: the compose server, two homes)


def _node(srv, key: str, uuid: str, text: str, *, kind: str = "gotcha", meta: str = "{}",
          source: str = "", spec: str = "auto-claude/specs/001-a", when: str = "timestamp()",
          time_: str = "2026-01-01T00:00:00+00:00", vector: bool = True) -> None:
    """A node written with the team password, as anyone holding it can, in graphmem's shape."""
    # the vector of an item already there: the graph's embedder and dimension
    vec = ", name_embedding: o.name_embedding" if vector else ""
    query = (f"CYPHER t={json.dumps(text)} m={json.dumps(meta)} s={json.dumps(source)} "
             f"p={json.dumps(spec)} MATCH (o:Entity) WHERE o.gm_kind IS NOT NULL WITH o LIMIT 1 "
             f"CREATE (:Entity:Gotcha {{uuid: '{uuid}', gm_kind: '{kind}', summary: $t, name: $t, "
             f"gm_hash: '{uuid}-h', gm_project: '{key}', gm_spec: $p, gm_session: '', "
             f"gm_time: '{time_}', gm_meta: $m, gm_source: $s, gm_written: {when}{vec}}})")
    srv.client().execute_command("GRAPH.QUERY", schema.group_id(key), query)


def _search(repos, envs, who: str, query: str, scope: str = "project"):
    out = run_cli("search", query, "--project-dir", str(repos[who]), "--scope", scope, "--json",
                  env={**envs[who], "GRAPHMEM_MAX_ITEM_BYTES": "20000"})
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout), out.stderr


def test_an_oversized_node_is_refused_once_and_the_pull_moves_on(team):
    """A node over GRAPHMEM_MAX_ITEM_BYTES is never taken in (nor sent whole): one warning on
    the first search, none after, and the good items around it are taken in."""
    srv, repos, envs = team
    with _mem(repos, "a", envs, "001-a") as a:
        a.append_gotcha(A_NOTES[0])
        key = a.aio.project.key
    _node(srv, key, "big-1", "webhook retries " * 3000)  # 48 kB of text, limit 20 kB
    with _mem(repos, "a", envs, "001-a") as a:
        a.append_gotcha("webhook retries are logged to the audit table")
    first, err1 = _search(repos, envs, "b", "webhook retries")
    second, err2 = _search(repos, envs, "b", "webhook retries")
    assert err1.count("big-1") == 1 and "GRAPHMEM_MAX_ITEM_BYTES" in err1
    assert "big-1" not in err2  # refused once, not on every search
    every, _ = _search(repos, envs, "b", "webhook retries", scope="all")  # the graph's own search
    for hits in (first, second, every):
        texts = [h["text"] for h in hits]
        assert "webhook retries are logged to the audit table" in texts
        assert A_NOTES[0] in texts and all(len(t) < 20000 for t in texts)


def test_a_malformed_node_warns_once_even_when_it_stays_in_the_feed(team):
    """A node stamped in the future stays after every cursor: it is refused once, by its
    content hash, not on every search."""
    srv, repos, envs = team
    with _mem(repos, "a", envs, "001-a") as a:
        a.append_gotcha(A_NOTES[1])
        key = a.aio.project.key
    _node(srv, key, "junk-2", "payments worker vault", kind="bogus", meta="{broken",
          when="timestamp() + 864000000")
    hits1, err1 = _search(repos, envs, "b", "payments worker vault")
    hits2, err2 = _search(repos, envs, "b", "payments worker vault")
    assert err1.count("junk-2") == 1 and "junk-2" not in err2
    assert [h["text"] for h in hits2][:1] == [A_NOTES[1]]


def test_nodes_without_a_vector_or_a_time_do_not_break_an_every_project_search(team):
    """``--scope all`` searches the graph itself: a node with no vector (no cosine) and one
    with a time that is not ISO 8601 are no reason to fail it; a node that is not an item is
    no candidate (and no warning on every search)."""
    srv, repos, envs = team
    with _mem(repos, "a", envs, "001-a") as a:
        a.append_gotcha(A_NOTES[2])
        key = a.aio.project.key
    _node(srv, key, "novec-3", "invoice chromium renderer leaks memory", vector=False,
          time_="yesterday")
    _node(srv, key, "junk-3", "invoice chromium renderer", kind="bogus")
    for _ in range(2):
        hits, err = _search(repos, envs, "b", "invoice chromium renderer", scope="all")
        texts = [h["text"] for h in hits]
        assert A_NOTES[2] in texts and "invoice chromium renderer leaks memory" in texts
        assert "Traceback" not in err and "junk-3" not in err  # not an item: no candidate


@pytest.mark.parametrize("field,value", [
    ("source", "../../../../etc/shadow"), ("source", "/etc/shadow"),
    ("spec", "auto-claude/../../../../etc"), ("spec", "/etc")])
def test_a_node_pointing_outside_the_project_is_refused(team, field, value):
    """A teammate cannot make this machine's hits point at a file outside its clone."""
    srv, repos, envs = team
    with _mem(repos, "a", envs, "001-a") as a:
        a.append_gotcha(A_NOTES[0])
        key = a.aio.project.key
    _node(srv, key, "escape-1", "stripe webhooks retry shadow copy", **{field: value})
    for scope in ("project", "all"):
        hits, err = _search(repos, envs, "b", "stripe webhooks retry shadow", scope=scope)
        for h in hits:
            assert h["local_path"] is None or h["local_path"].startswith(str(repos["b"]))
            assert "etc" not in (h["spec"] or "") + h["source"]
        if scope == "project":  # taken into this home's index: refused, with one warning
            assert "escape-1" not in [h["id"] for h in hits]
            assert err.count("escape-1") == 1 and "inside the project" in err


def test_validity_and_freshness_of_a_node_are_recomputed_here(team):
    """Metadata a search computes on this machine (validity, freshness) is never taken from a
    node: a spoofed "current" or "superseded" mark does not reach the hit, nor a time to come."""
    srv, repos, envs = team
    with _mem(repos, "a", envs, "001-a") as a:
        a.append_gotcha(A_NOTES[1])
        key = a.aio.project.key
    spoof = {"author": "mallory", "validity": {"state": "superseded", "by": "x"},
             "freshness": {"state": "current", "reason": "trust me"}, "removed": "no"}
    _node(srv, key, "spoof-1", "vault secrets rotate weekly for the payments worker",
          meta=json.dumps(spoof), time_="2999-01-01T00:00:00+00:00")
    for scope in ("project", "all"):
        hits, _ = _search(repos, envs, "b", "vault secrets rotate payments worker", scope=scope)
        (hit,) = [h for h in hits if h["id"] == "spoof-1"]
        assert hit["metadata"].get("author") == "mallory"  # shown as claimed
        assert "validity" not in hit["metadata"] and "removed" not in hit["metadata"]
        assert (hit["metadata"].get("freshness") or {}).get("reason") != "trust me"
        assert hit["time"] < "2100"  # a time to come is taken as now


def test_big_items_are_spread_over_pulls_by_their_size(team):
    """Items under the limit but big cost time to index here: one pull takes in at most its
    budget of characters (at least one item), the cursor keeps the place, and ``sync`` takes
    in the rest."""
    from graphmem import _sync
    from graphmem.facade import team as team_mod

    srv, repos, envs = team
    with _mem(repos, "a", envs, "001-a") as a:
        # named, not numbered: notes differing only in a number are one fact whose value
        # changed (issue 34), and each replaced one would be sent to the graph again
        for name in ("alpha", "bravo", "charlie"):
            assert a.append_gotcha(f"bulk note {name} " + "ledger " * 4000).graph == "written"
    with _mem(repos, "b", envs, "002-b") as b:
        first = _sync.run(team_mod.pull(b.aio, chars=50_000))
        assert first["items"] == 1 and first["more"] is True
        second = _sync.run(team_mod.pull(b.aio, chars=50_000))
        assert second["items"] == 1 and second["more"] is True
        assert b.sync()["pulled"]["items"] == 1
        hits = b.search("bulk note ledger", scope="project", limit=10)
        assert sorted(h.text.split()[2] for h in hits) == ["alpha", "bravo", "charlie"]


def _refused_listed(repos, envs, who: str) -> str:
    """What ``graphmem doctor`` says of the graph nodes ``who``'s home refused ('' for none)."""
    out = run_cli("doctor", "--project-dir", str(repos[who]), "--json", env=envs[who])
    rows = json.loads(out.stdout)["sections"]["index"]
    return " ".join(r["detail"] for r in rows if r["name"] == "refused graph nodes")


def test_a_refused_node_its_writer_mends_is_taken_in_and_no_longer_listed(team):
    """Doctor lists a refused node until it changes into an item that passes: then it is taken
    in at the next search, with no warning, and no longer listed."""
    srv, repos, envs = team
    with _mem(repos, "a", envs, "001-a") as a:
        a.append_gotcha(A_NOTES[0])
        key = a.aio.project.key
    _node(srv, key, "big-2", "ledger rounding " * 3000)
    hits, err1 = _search(repos, envs, "b", "ledger rounding")
    assert err1.count("big-2") == 1 and "big-2" not in [h["id"] for h in hits]
    assert "big-2" in _refused_listed(repos, envs, "b")
    srv.client().execute_command(
        "GRAPH.QUERY", schema.group_id(key), "MATCH (n:Entity {uuid: 'big-2'}) SET "
        "n.summary = 'ledger rounding is half-even', n.name = n.summary, "
        "n.gm_hash = 'big-2-v2', n.gm_written = timestamp()")
    hits, err2 = _search(repos, envs, "b", "ledger rounding")
    assert "big-2" in [h["id"] for h in hits] and "big-2" not in err2
    assert _refused_listed(repos, envs, "b") == ""
