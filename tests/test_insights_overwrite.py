"""Saving a session's insights again replaces what search and the graph know of that session
(issue 14 finding 10); both tests failed on the old code (the old insights stayed searchable)."""

from __future__ import annotations

from graphmem import Memory, Settings
from graphmem.graph import server

FIRST = {"what_worked": ["caching the parser tables with an lru dict"],
         "discoveries": {"gotchas_encountered": ["the lexer drops tabs silently"],
                         "files_understood": {"src/lexer.py": "tokenizer with tab handling"},
                         "patterns_found": []}}
SECOND = {"what_worked": ["streaming the tokens instead of buffering"]}


def _texts(hits) -> list[str]:
    return [h.text for h in hits]


def test_saving_a_session_again_drops_its_old_insights_from_search(monkeypatch, spec_dir):
    monkeypatch.setenv("GRAPHMEM_LOCAL_EMBEDDING_MODEL", "wordllama")
    with Memory(spec_dir) as m:
        m.save_session_insights(1, FIRST)
        m.append_gotcha("the lexer drops tabs silently")  # also in gotchas.md: must stay
        assert "caching the parser tables with an lru dict" in _texts(m.search("parser tables lru"))
        m.save_session_insights(1, SECOND)
        found = _texts(m.search("caching parser tables lru dict tokenizer lexer tabs", limit=20))
        assert "streaming the tokens instead of buffering" in _texts(m.search("streaming tokens"))
    assert "caching the parser tables with an lru dict" not in found
    assert "src/lexer.py: tokenizer with tab handling" not in found
    assert "the lexer drops tabs silently" in found  # gotchas.md still holds it
    with Memory(spec_dir) as m:  # and a fresh process agrees: nothing left for a replay to add
        assert "caching the parser tables with an lru dict" not in _texts(
            m.search("caching parser tables lru dict", limit=20))


def test_saving_a_session_again_drops_its_old_insights_from_the_graph(monkeypatch, spec_dir):
    monkeypatch.setenv("GRAPHMEM_GRAPH", "on")
    monkeypatch.setenv("GRAPHMEM_LOCAL_EMBEDDING_MODEL", "wordllama")
    try:
        with Memory(spec_dir) as m:
            assert m.save_session_insights(1, FIRST).graph == "written"
            m.save_session_insights(1, SECOND)
            drift = m.drift()
        assert drift["extra"] == [] and drift["missing"] == []
        assert drift["in_graph"] == drift["files"] == 1
    finally:
        server.EmbeddedServer(Settings.load()).stop()


def test_overwrite_and_clear_with_the_index_locked_never_raise(monkeypatch, spec_dir, isolated_env):
    import sqlite3

    from graphmem.index import db

    monkeypatch.setenv("GRAPHMEM_LOCAL_EMBEDDING_MODEL", "wordllama")
    monkeypatch.setenv("GRAPHMEM_INDEX_BUSY_TIMEOUT", "0.3")
    with Memory(spec_dir) as m:
        m.save_session_insights(1, FIRST)
    holder = sqlite3.connect(db.db_path(isolated_env), isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    try:
        with Memory(spec_dir) as m:
            report = m.save_session_insights(1, SECOND)  # old rows cannot be dropped right now
        assert (report.files, report.index) == ("written", "failed")
    finally:
        holder.execute("ROLLBACK")
    with Memory(spec_dir) as m:  # replayed: the new version in, the old one out
        found = _texts(m.search("caching parser tables lru dict streaming tokens", limit=20))
    assert "streaming the tokens instead of buffering" in found
    assert "caching the parser tables with an lru dict" not in found
    holder.execute("BEGIN IMMEDIATE")
    try:
        with Memory(spec_dir) as m:
            m.clear()  # the files go; the index rows wait for doctor --fix
        assert not (spec_dir / "memory" / "session_insights").exists()
    finally:
        holder.execute("ROLLBACK")
        holder.close()
