"""Drift between the files and the graph counts every kind of item, session turns included."""

from __future__ import annotations

from graphmem import Memory, Settings
from graphmem.graph import server


def test_drift_is_zero_when_turns_and_notes_are_in_both(monkeypatch, spec_dir):
    monkeypatch.setenv("GRAPHMEM_GRAPH", "on")
    monkeypatch.setenv("GRAPHMEM_LOCAL_EMBEDDING_MODEL", "wordllama")
    try:
        with Memory(spec_dir) as m:
            assert m.append_gotcha("Run migrations before the workers start").graph == "written"
            sid = m.start_session()
            m.record_turn(sid, "user", "Why does the deploy hang at the migration step?")
            m.record_step(sid, "run_tests", "ok", {"passed": 12})
            m.end_session(sid)
            drift = m.drift()
            kinds = {i.kind for i in m.items()}
        assert {"gotcha", "turn", "step"} <= kinds
        assert drift["graph"] == "on" and drift["files"] == drift["in_graph"] >= 3
        assert drift["missing"] == [] and drift["extra"] == []
    finally:
        server.EmbeddedServer(Settings.load()).stop()


def test_deleting_a_session_removes_its_items_from_the_graph(monkeypatch, spec_dir):
    monkeypatch.setenv("GRAPHMEM_GRAPH", "on")
    monkeypatch.setenv("GRAPHMEM_LOCAL_EMBEDDING_MODEL", "wordllama")
    try:
        with Memory(spec_dir) as m:
            m.append_gotcha("Keep the staging password out of the repo")
            sid = m.start_session()
            m.record_turn(sid, "user", "The nightly export job silently skips archived tenants")
            before = m.drift()
            m.delete_session(sid)
            hits = m.search("nightly export archived tenants")
            drift = m.drift()
        assert before["in_graph"] == before["files"] == 2  # the gotcha and the turn
        assert not [h for h in hits if h.session == sid]
        assert drift["in_graph"] == drift["files"] == 1
        assert drift["extra"] == [] and drift["missing"] == []
    finally:
        server.EmbeddedServer(Settings.load()).stop()
