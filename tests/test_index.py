"""The local index on its own: hashing, embedder bookkeeping, registry, tokenising, deletes."""

from __future__ import annotations

import asyncio
import hashlib
import subprocess
import sys
from pathlib import Path

import pytest

from graphmem.errors import IndexMismatchError, ProviderError
from graphmem.index.local_backend import LocalBackend
from graphmem.index.local_search import search_local
from graphmem.index.local_index import LocalIndex
from graphmem.index.text import tokenize
from graphmem.index.tuning import Tuning
from graphmem.models import MemoryItem, stable_id
from graphmem.settings import Settings


class HashEmbedder:
    """Deterministic bag-of-words vectors: texts sharing words point the same way."""

    def __init__(self, name: str = "test/hash", dimension: int = 16, fail: bool = False):
        self.name, self.dimension, self.fail = name, dimension, fail
        self.seen: list[str] = []

    async def embed(self, texts):
        if self.fail:
            raise ProviderError("embedding service unavailable", provider=self.name)
        self.seen.extend(texts)
        out = []
        for t in texts:
            v = [0.0] * self.dimension
            for w in t.lower().split():
                v[hashlib.sha1(w.encode()).digest()[0] % self.dimension] += 1.0
            out.append(v)
        return out


def item(project: str, text: str, kind: str = "gotcha", spec: str | None = "s1", **meta) -> MemoryItem:
    return MemoryItem(id=stable_id(project, spec or "", kind, text), kind=kind, text=text,
                      project=project, spec=spec, metadata=meta, source=f"{project}/{kind}.md")


def run(coro):
    return asyncio.run(coro)


def test_unchanged_text_is_never_embedded_twice(tmp_path: Path):
    emb = HashEmbedder()
    idx = LocalIndex(tmp_path / "home", emb)
    a, b = item("/p", "cache keys must include the tenant"), item("/p", "retry on 429 only")
    run(idx.upsert([a, b]))
    run(idx.upsert([a, b]))  # the same items again
    same_text_other_id = item("/q", "retry on 429 only")
    run(idx.upsert([same_text_other_id]))
    assert sorted(emb.seen) == sorted([a.text, b.text])
    assert idx.stats()["items"] == 3 and idx.stats()["vectors"] == 2
    changed = a.model_copy(update={"text": "cache keys must include the tenant id"})
    run(idx.upsert([changed]))
    assert emb.seen[-1] == changed.text and idx.count() == 3
    # the old text's vector went with it; the shared "retry" vector stays for its two items
    assert idx.stats()["vectors"] == 2
    run(idx.upsert([changed.model_copy(update={"text": "retry on 429 only"})]))
    assert idx.stats()["vectors"] == 1 and idx.count() == 3


def test_other_embedder_is_refused_until_reindex(tmp_path: Path):
    home = tmp_path / "home"
    items = [item("/p", "cache keys must include the tenant")]
    run(LocalIndex(home, HashEmbedder("test/a", 16)).upsert(items))
    other = LocalIndex(home, HashEmbedder("test/b", 8))
    with pytest.raises(IndexMismatchError, match="graphmem reindex"):
        run(other.upsert(items))
    with pytest.raises(IndexMismatchError, match="test/a:16"):
        run(search_local(other, "tenant", projects=None))
    backend = LocalBackend(Settings.load(home=str(home)), embedder=HashEmbedder("test/b", 8))
    counts = run(backend.reindex("/p", items))
    assert counts["embedded"] == 1
    hits = run(search_local(backend.index, "tenant cache", projects=["/p"]))
    assert [h.text for h in hits] == [items[0].text]
    assert backend.index.stats()["embedder"] == "test/b:8"


def test_embedding_failure_still_indexes_words_and_refills_later(tmp_path: Path):
    home = tmp_path / "home"
    broken = LocalIndex(home, HashEmbedder(fail=True))
    run(broken.upsert([item("/p", "the staging database is read-only on Fridays")]))
    assert broken.last_embed_error and broken.stats()["vectors"] == 0
    hits = run(search_local(broken, "staging database", projects=["/p"]))
    assert hits and hits[0].text.startswith("the staging database")
    healed = LocalIndex(home, HashEmbedder())
    assert run(healed.refill_vectors()) == 1 and healed.stats()["vectors"] == 1


def test_registry_lists_projects(tmp_path: Path):
    idx = LocalIndex(tmp_path / "home", None)
    run(idx.upsert([item("/work/alpha", "a"), item("/work/beta", "b")]))
    projects = {p["path"]: p for p in idx.projects()}
    assert set(projects) == {"/work/alpha", "/work/beta"}
    assert projects["/work/alpha"]["name"] == "alpha"
    assert "group_id" not in projects["/work/alpha"]  # the graph's group id is the graph's
    assert projects["/work/beta"]["last_seen"] > 0


def test_an_index_of_the_previous_schema_opens_without_the_group_id_column(tmp_path: Path):
    """Schema 3 stored a per-project group id that no one read (and that differed from the
    graph's); opening such an index drops the column and keeps every row and mark."""
    import sqlite3

    from graphmem.index import db

    home = tmp_path / "home"
    home.mkdir()
    conn = sqlite3.connect(db.db_path(home), isolation_level=None)
    conn.execute("CREATE TABLE schema_versions (component TEXT NOT NULL, version INTEGER NOT NULL, "
                 "applied_at REAL NOT NULL, PRIMARY KEY (component, version))")
    for version, script in db.MIGRATIONS["search"][:3]:  # what the previous release applied
        for stmt in db._split(script):
            conn.execute(stmt)
        conn.execute("INSERT INTO schema_versions VALUES ('search', ?, 0)", (version,))
    conn.execute("INSERT INTO projects(path, name, group_id, last_seen, root, legacy) "
                 "VALUES ('/work/old', 'old', 'gm_0123456789abcdef', 1.0, '/work/old', 0)")
    conn.close()
    idx = LocalIndex(home, None)
    cols = [r[1] for r in idx.conn.execute("PRAGMA table_info(projects)")]
    assert "group_id" not in cols and {"path", "root", "legacy"} <= set(cols)
    assert [p["path"] for p in idx.projects()] == ["/work/old"]
    idx.mark_caught_up("/work/old")
    run(idx.upsert([item("/work/old", "an item written after the migration")]))
    assert _ids(idx, "migration") and idx.caught_up("/work/old")


def test_a_failure_inside_reset_vectors_leaves_the_index_as_it_was(tmp_path: Path):
    """Forgetting the vectors is one transaction: a failure half-way (here a trigger standing in
    for a full disk) rolls back, and the connection can write again."""
    import sqlite3

    from graphmem.index import db

    home = tmp_path / "home"
    idx = LocalIndex(home, HashEmbedder())
    run(idx.upsert([item("/p", "alpha beta"), item("/p", "gamma delta")]))
    before = idx.stats()
    assert before["vectors"] == 2 and before["embedder"] == "test/hash:16"
    other = sqlite3.connect(db.db_path(home), isolation_level=None)
    other.execute("CREATE TRIGGER no_floor BEFORE UPDATE ON search_meta WHEN NEW.key = 'floor' "
                  "BEGIN SELECT RAISE(ABORT, 'disk full'); END")
    with pytest.raises(sqlite3.Error, match="disk full"):
        idx.reset_vectors()
    assert idx.stats() == before  # no vector and no embedder mark lost
    other.execute("DROP TRIGGER no_floor")
    other.close()
    run(idx.upsert([item("/p", "epsilon zeta")]))  # no transaction was left open
    assert idx.stats()["vectors"] == 3


def test_delete_spec_and_kinds(tmp_path: Path):
    idx = LocalIndex(tmp_path / "home", None)
    run(idx.upsert([item("/p", "alpha note", spec="s1"), item("/p", "alpha other", spec="s2"),
                    item("/p", "alpha pattern", kind="pattern", spec="s2")]))
    assert idx.delete(project="/p", spec="s1") == 1
    assert idx.delete(project="/p", kinds=["pattern"]) == 1
    assert [h.text for h in run(search_local(idx, "alpha", projects=["/p"]))] == ["alpha other"]
    assert idx.delete(project="/nowhere") == 0


def test_tokenize_keeps_paths_and_identifiers_whole_and_split():
    terms = tokenize("See src/graphmem/index/db.py and SpecStore.max_item_bytes, don't rerun")
    assert "src/graphmem/index/db.py" in terms and "db.py" in terms
    assert {"graphmem", "index", "spec", "store", "byte"} <= set(terms)
    assert "and" not in terms and "rerun" in terms


def test_neighbours_give_turns_context(tmp_path: Path):
    """A turn answering a question is found through the question asked just before it."""
    idx = LocalIndex(tmp_path / "home", None)
    turns = ["user: which port does the staging proxy listen on?", "assistant: 8443, since March",
             "user: thanks", "user: unrelated chatter about lunch", "assistant: sure"]
    items = [MemoryItem(id=f"t{i}", kind="turn", text=t, project="/p", spec="s", session="a",
                        metadata={"i": i}) for i, t in enumerate(turns)]
    run(idx.upsert(items))
    hits = run(search_local(idx, "staging proxy port", projects=["/p"], limit=3))
    assert hits[0].id == "t0" and "t1" in [h.id for h in hits[:2]]


def _ids(idx, query, **kw):
    return [h.id for h in run(search_local(idx, query, projects=None, **kw))]


def test_writes_after_a_search_are_seen_without_a_rebuild_and_a_new_process_loads_the_base(
        tmp_path: Path, monkeypatch):
    from graphmem.index import snapshot

    home = tmp_path / "home"
    idx = LocalIndex(home, HashEmbedder())
    run(idx.upsert([item("/p", f"note {i} about topic{i}") for i in range(30)]))
    assert _ids(idx, "topic7", limit=1) == [stable_id("/p", "s1", "gotcha", "note 7 about topic7")]
    base = idx.snapshot().base

    def no_rebuild(index):  # from here on only the delta may be read
        raise AssertionError("base rebuilt")
    monkeypatch.setattr(snapshot, "build_base", no_rebuild)
    fresh = item("/p", "the deploy key rotates every ninety days")
    run(idx.upsert([fresh]))
    assert _ids(idx, "deploy key rotation", limit=1) == [fresh.id]
    changed = fresh.model_copy(update={"text": "the signing key never rotates"})
    run(idx.upsert([changed]))  # same id, new text: the base/delta copy of the old text is hidden
    assert "ninety" not in " ".join(h.text for h in run(search_local(idx, "ninety days",
                                                                     projects=None)))
    victim = stable_id("/p", "s1", "gotcha", "note 3 about topic3")
    idx.delete(project="/p", ids=[victim])
    assert victim not in _ids(idx, "topic3")
    assert idx.snapshot().base is base
    other = LocalIndex(home, HashEmbedder())  # another process: loads the saved base + delta
    for q in ("topic7", "signing key", "topic3", "note about"):
        assert _ids(other, q) == _ids(idx, q)


def test_a_big_delta_is_merged_into_a_new_saved_base(tmp_path: Path):
    from graphmem.index import snapshot

    idx = LocalIndex(tmp_path / "home", None, tuning=Tuning(min_delta=5))
    run(idx.upsert([item("/p", f"first batch {i}") for i in range(10)]))
    first = idx.snapshot().base
    run(idx.upsert([item("/p", f"second batch {i} zebra") for i in range(20)]))
    view = idx.snapshot()
    assert view.base is not first and view.base.gen == idx.generation() and view.n == 30
    saved = snapshot.load(idx)
    assert saved is not None and saved.gen == view.base.gen
    assert len(_ids(idx, "zebra", limit=50)) == 20


def test_a_saved_base_of_another_database_is_ignored(tmp_path: Path):
    from graphmem.index import db

    home = tmp_path / "home"
    idx = LocalIndex(home, None)
    run(idx.upsert([item("/p", "alpha beta gamma")]))
    assert _ids(idx, "alpha")
    idx.close()
    for f in home.glob(db.db_path(home).name + "*"):
        f.unlink()  # the database is rebuilt from files; the cache folder is left behind
    script = (  # a new process, as after a user deleted the database
        "import asyncio, sys; from graphmem.index.local_index import LocalIndex; "
        "from graphmem.index.local_search import search_local; from graphmem.models import MemoryItem; "
        "idx = LocalIndex(sys.argv[1]); asyncio.run(idx.upsert([MemoryItem(id='x', kind='gotcha', "
        "text='delta epsilon', project='/p')])); "
        "print([len(asyncio.run(search_local(idx, q, projects=None))) for q in ('alpha', 'epsilon')])")
    out = subprocess.run([sys.executable, "-c", script, str(home)], capture_output=True, text=True)
    assert out.stdout.strip() == "[0, 1]", out.stderr


def test_partitioned_vectors_find_what_an_exact_scan_finds(tmp_path: Path):
    """Above a size the vectors are probed by list; the top hits must match an exact scan."""
    topics = ["billing", "auth", "cache", "queue", "deploy", "search", "upload", "metrics"]
    items = [item("/p", f"{topics[i % 8]} {topics[(i * 3) % 8]} service note {i}")
             for i in range(400)]
    exact = LocalIndex(tmp_path / "a", HashEmbedder(dimension=32))
    run(exact.upsert(items))
    assert exact.snapshot().partition is None  # built before the thresholds change
    probed = LocalIndex(tmp_path / "b", HashEmbedder(dimension=32),
                        tuning=Tuning(ivf_min_rows=100, exact_limit=50))
    run(probed.upsert(items))
    assert probed.snapshot().partition is not None
    for q in ("billing cache", "deploy upload service", "metrics", "note 17"):
        got = run(search_local(probed, q, projects=None, limit=5))
        want = run(search_local(exact, q, projects=None, limit=5))
        # equal scores rank by row order, which the partition changes: compare scores
        assert [h.score for h in got] == pytest.approx([h.score for h in want], abs=0.02), q
        assert got[0].text.split()[:2] == want[0].text.split()[:2], q
