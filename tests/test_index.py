"""The local index on its own: hashing, embedder bookkeeping, registry, tokenising, deletes."""

from __future__ import annotations

import asyncio
import hashlib
from pathlib import Path

import pytest

from graphmem.errors import IndexMismatchError, ProviderError
from graphmem.index.backend import LocalBackend
from graphmem.index.query import search_local
from graphmem.index.store import LocalIndex, group_id
from graphmem.index.text import tokenize
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


def test_registry_lists_projects_with_group_ids(tmp_path: Path):
    idx = LocalIndex(tmp_path / "home", None)
    run(idx.upsert([item("/work/alpha", "a"), item("/work/beta", "b")]))
    projects = {p["path"]: p for p in idx.projects()}
    assert set(projects) == {"/work/alpha", "/work/beta"}
    assert projects["/work/alpha"]["name"] == "alpha"
    assert projects["/work/alpha"]["group_id"] == group_id("/work/alpha") != group_id("/work/beta")
    assert projects["/work/beta"]["last_seen"] > 0


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
