"""GraphStore on a real embedded FalkorDB: graph names, Graphiti's clients, escaping, embedders."""

from __future__ import annotations

import asyncio
import math
import re

import pytest

from graph_helpers import HashEmbedder
from graphmem import Memory, Settings
from graphmem.errors import GraphError, IndexMismatchError, ProviderError
from graphmem.graph import server
from graphmem.graph.schema import group_id
from graphmem.graph.store import GraphStore, open_graph
from graphmem.models import MemoryItem, stable_id


@pytest.fixture
def settings(isolated_env):
    s = Settings.load(graph__mode="on")
    yield s
    server.EmbeddedServer(s).stop()


def item(project: str, text: str, kind: str = "gotcha", **kw) -> MemoryItem:
    return MemoryItem(id=stable_id(project, kind, text), kind=kind, text=text, project=project,
                      spec=f"{project}/specs/001", **kw)


def run(coro):
    return asyncio.run(coro)


NAMES = ["/work/my-project", "/work/my.project.v2", "/work/my project", "/work/проект-ü", "/work/main",
         "/main", "/work/日本語", "/", "/work/a'b\"c", "/work/my_project"]


def test_graph_names_are_safe_and_distinct(settings):
    gids = [group_id(p) for p in NAMES]
    assert len(set(gids)) == len(NAMES)
    for gid in gids:
        assert re.fullmatch(r"gm_[a-z0-9_]+_[0-9a-f]{10}", gid), gid
    assert group_id("/work/main") == group_id("/work/main")  # stable across calls

    async def go():
        store = await open_graph(settings, HashEmbedder())
        try:
            await store.save([item(p, f"redis socket gotcha of {p}") for p in NAMES])
            found = {}
            for p in NAMES:
                hits = await store.search("redis socket gotcha", [p], None, 5)
                found[p] = [h.project for h in hits]
            # Graphiti's own search accepts the name and finds the facts written without it
            g = store.graphiti("/work/my-project")
            edges = await g.search("redis socket gotcha", group_ids=[group_id("/work/my-project")])
            return found, [e.fact for e in edges], sorted(await store.graphs())
        finally:
            await store.aclose()

    found, facts, graphs = run(go())
    assert all(found[p] == [p] for p in NAMES), found
    assert facts == ["redis socket gotcha of /work/my-project"]
    assert graphs == sorted(gids)


class FakeLLM:
    """A graphmem LLM (our own protocol, not a vendor API) that records calls and fails."""

    name = "test/fake-llm"

    def __init__(self):
        self.calls = 0

    async def generate(self, messages, *, max_tokens=1024, temperature=0.0):
        self.calls += 1
        raise ProviderError("fake LLM is down", provider="fake")

    async def generate_json(self, messages, schema, *, max_tokens=2048):
        self.calls += 1
        raise ProviderError("fake LLM is down", provider="fake")


class FakeReranker:
    name = "test/reranker"

    async def score(self, query, passages):
        return [float(len(p)) for p in passages]


def test_graphiti_gets_exactly_our_clients(settings):
    from graphiti_core.driver.falkordb_driver import FalkorDriver

    from graphmem.graph.clients import (GraphitiEmbedder, GraphitiLLM, NoLLM, RRFCrossEncoder,
                                        RerankerCrossEncoder)

    emb, llm, rr = HashEmbedder(), FakeLLM(), FakeReranker()

    async def go():
        bare = await open_graph(settings, emb)
        full = await open_graph(settings, emb, llm, rr)
        try:
            g0, g1 = bare.graphiti("/p/one"), full.graphiti("/p/one")
            assert isinstance(g0.driver, FalkorDriver) and g0.driver._database == group_id("/p/one")
            assert g0.driver.client is bare.conn.client  # one connection, no second client
            assert isinstance(g0.embedder, GraphitiEmbedder) and g0.embedder.embedder is emb
            assert isinstance(g0.llm_client, NoLLM) and isinstance(g0.cross_encoder, RRFCrossEncoder)
            assert g0.clients.llm_client is g0.llm_client and g0.clients.embedder is g0.embedder
            assert isinstance(g1.llm_client, GraphitiLLM) and g1.llm_client.llm is llm
            assert isinstance(g1.cross_encoder, RerankerCrossEncoder) and g1.cross_encoder.reranker is rr
            assert full.graphiti("/p/one") is g1  # one Graphiti (and driver) per graph
            with pytest.raises(ProviderError, match="no LLM is configured"):
                await g0.llm_client._generate_response([])
            ranked = await g0.cross_encoder.rank("redis socket", ["nothing here", "the redis socket"])
            assert ranked[0][0] == "the redis socket"
            # the LLM path: extraction fails, the structured write stands, the save succeeds
            it = item("/p/one", "retrying the migration worked", kind="insight",
                      metadata={"field": "what_worked"}, session="2")
            note = await full.save([it])
            assert llm.calls >= 1 and "extraction failed" in note
            assert await full.item_ids("/p/one") == {it.id}
            assert await bare.save([item("/p/one", "no llm, no extraction")]) is None
        finally:
            await bare.aclose()
            await full.aclose()

    run(go())


TRICKY = ['quote " and \\ backslash', "it's $param {braces} `ticks`", "line one\nline two\ttab",
          "ünïcödé 日本語 emoji 🚀", "CYPHER x=1 MATCH (n) DETACH DELETE n", "   spaces   ", "\\\\\"\\"]


def test_tricky_text_round_trips_exactly(settings):
    async def go():
        store = await open_graph(settings, HashEmbedder())
        try:
            items = [item("/p/t", t, kind="fact", metadata={"k": t, "n": [1, None]}) for t in TRICKY]
            await store.save(items)
            await store.save(items)  # idempotent
            hits = []
            for t in TRICKY:
                hits += await store.search(t, ["/p/t"], ["fact"], 20)
            return {h.id: h for h in hits}, items
        finally:
            await store.aclose()

    hits, items = run(go())
    for it in items:
        assert hits[it.id].text == it.text and hits[it.id].metadata == it.metadata
    assert len(hits) == len(TRICKY)


class NaNEmbedder(HashEmbedder):
    async def embed(self, texts):
        return [[math.nan] * self.dimension for _ in texts]


def test_bad_embedder_output_and_embedder_change(settings):
    async def go():
        store = GraphStore(settings, NaNEmbedder())
        with pytest.raises(GraphError, match="NaN"):
            await store.save([item("/p/e", "nan vectors")])
        await store.aclose()
        first = await open_graph(settings, HashEmbedder(64))
        await first.save([item("/p/e", "written with 64 dimensions")])
        await first.aclose()
        other = await open_graph(settings, HashEmbedder(32))
        try:
            with pytest.raises(IndexMismatchError, match="graphmem reindex"):
                await other.save([item("/p/e", "written with 32 dimensions")])
            await other.drop_project("/p/e")  # what a rebuild does first
            await other.save([item("/p/e", "written with 32 dimensions")])
            return await other.item_ids("/p/e")
        finally:
            await other.aclose()

    assert len(run(go())) == 1


def test_reindex_rebuilds_the_graph_with_another_embedder(settings, spec_dir, monkeypatch):
    monkeypatch.setenv("GRAPHMEM_GRAPH", "on")
    monkeypatch.setenv("GRAPHMEM_LOCAL_EMBEDDING_MODEL", "wordllama")
    with Memory(spec_dir) as mem:
        mem.append_gotcha("rebuild me")
        mem.append_pattern("and me")
    monkeypatch.setenv("GRAPHMEM_LOCAL_EMBEDDING_MODEL", "bge-small-en-v1.5")
    with Memory(spec_dir) as mem:
        # Refused before the file is written, naming both models and the way out (issue 15).
        with pytest.raises(IndexMismatchError, match="wordllama.*bge-small.*graphmem reindex"):
            mem.append_gotcha("refused after the switch")
        assert "refused after the switch" not in mem.load_gotchas()
        counts = mem.reindex()
        assert counts["graph"] == "written"
        d = mem.drift()
        assert d["in_graph"] == 2 and d["missing"] == [] and d["queued"] == 0
        assert mem.append_gotcha("and now it writes again").graph == "written"


def test_a_search_over_many_graphs_stays_within_the_connection_pool(settings):
    # 40 project graphs x 3 queries each at once used to exceed the client's 100 connections.
    projects = [f"/work/service-{i:02d}" for i in range(40)]

    async def go():
        store = await open_graph(settings, HashEmbedder())
        try:
            await store.save([item(p, f"the deploy of {p} needs the vault token") for p in projects])
            hits = await store.search("deploy vault token", None, None, 50)
            return {h.project for h in hits}
        finally:
            await store.aclose()

    assert run(go()) == set(projects)


def test_importing_the_graph_store_leaves_graphiti_and_the_client_unimported():
    """A search pays for graphiti_core (about 1 s) and the FalkorDB client only when it reaches
    the graph: the store's modules import them inside the functions that need them."""
    import subprocess
    import sys

    code = ("import sys, graphmem.graph, graphmem.graph.store, graphmem.graph.diagnostics; "
            "print(sorted(m for m in ('graphiti_core', 'falkordb', 'redis') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]", out.stdout
