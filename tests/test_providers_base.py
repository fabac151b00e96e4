"""Declared capabilities (``graphmem.providers.base``): what the built-ins declare, what is derived
for a plug-in that declares only ``embed``, the one registry table both feed, and callers that use
the declared API (query vectors, pair scoring, consolidation's judge of sameness)."""

from __future__ import annotations

import asyncio
import textwrap
from importlib.metadata import EntryPoint

import pytest

from graphmem import providers
from graphmem.errors import ConfigError, ValidationError
from graphmem.health import Row
from graphmem.index import local_search as query_module
from graphmem.index import rerank
from graphmem.index.tuning import Tuning
from graphmem.providers import base
from graphmem.settings import Settings

PLUGIN = '''
from graphmem.providers.base import Embedder, PairScorer


class PrefixedEmbedder(Embedder):
    """Declares only ``embed`` and a query prefix; everything else is derived."""

    name = "declared/prefixed"
    dimension = 2
    query_prefix = "query: "

    def __init__(self):
        self.seen = []

    async def embed(self, texts):
        self.seen.extend(texts)
        return [[1.0, float(len(t))] for t in texts]


class CountingScorer(PairScorer):
    name = "declared/pairs"

    def __init__(self):
        self.batches = []

    def count_tokens(self, query, passages):
        return [len(p.split()) for p in passages]

    def score_pairs(self, query, passages):
        self.batches.append(list(passages))
        return [float("postgres" in p) for p in passages]

    async def score(self, query, passages):
        raise AssertionError("a PairScorer is driven pair by pair")


def make_embedder(settings):
    return PrefixedEmbedder()


def make_reranker(settings):
    return CountingScorer()
'''

NO_DIMENSION = '''
class Vague:
    name = "vague/v1"

    async def embed(self, texts):
        return [[0.0] for _ in texts]


def make_embedder(settings):
    return Vague()
'''


@pytest.fixture
def plugins(tmp_path, monkeypatch):
    """Two installed third-party distributions declaring ``graphmem.providers`` entry points."""
    site = tmp_path / "site"
    site.mkdir()
    (site / "gm_declared.py").write_text(PLUGIN)
    (site / "gm_vague.py").write_text(NO_DIMENSION)
    info = site / "gm_declared-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: gm-declared\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(textwrap.dedent("""\
        [graphmem.providers]
        declared = gm_declared
        vague = gm_vague
        """))
    monkeypatch.syspath_prepend(str(site))
    yield
    providers.clear_cache()


def test_builtins_and_plugins_are_rows_of_one_table(plugins):
    table = providers.registry()
    assert all(isinstance(ep, EntryPoint) and ep.group == "graphmem.providers"
               for ep in table.values())
    assert table["openai"].value == "graphmem.providers.openai"  # a built-in
    assert table["declared"].value == "gm_declared"  # a plug-in, loaded the same way
    assert providers.load_provider("declared").__name__ == "gm_declared"
    assert {"declared", "vague", "local", "voyage"} <= set(providers.known_providers())


def test_a_declared_plugin_gets_the_derived_query_embedding(plugins):
    settings = Settings.load(env={"GRAPHMEM_EMBEDDER_PROVIDER": "declared"})
    emb = providers.get_embedder(settings)
    assert type(emb).__name__ == "PrefixedEmbedder"  # declared: returned as it is, not wrapped
    assert emb.token_encoder is None and emb.similarity_embedder() is emb
    vec = asyncio.run(emb.embed_query("where is the lock?"))
    assert vec == [1.0, float(len("query: where is the lock?"))]
    query_module.forget_query_vectors()
    asyncio.run(query_module.query_vector(emb, "which cache?"))  # what search asks for
    assert emb.seen[-1] == "query: which cache?"


def test_a_declared_pair_scorer_is_driven_pair_by_pair(plugins):
    tuning = Tuning(rerank_deadline=600.0)  # a busy machine must not cut the run short
    settings = Settings.load(env={"GRAPHMEM_RERANKER": "declared"})
    scorer = providers.get_reranker(settings)
    texts = ["billing runs on postgres", "search runs on elasticsearch", "deploys use argo"]
    got = asyncio.run(rerank.score(scorer, "which database", texts, tuning))
    assert got == [1.0, 0.0, 0.0]
    step = tuning.rerank_batch
    assert scorer.batches == [texts[i:i + step] for i in range(0, 3, step)]


def test_an_undeclared_object_is_wrapped_once_with_the_derived_methods():
    class Duck:  # the earlier duck-typed interface: name, dimension, embed
        name, dimension, extra = "duck/v1", 1, "kept"

        async def embed(self, texts):
            return [[float(len(t))] for t in texts]

    emb = base.as_embedder(Duck())
    assert isinstance(emb, base.Embedder) and emb.name == "duck/v1" and emb.extra == "kept"
    assert asyncio.run(emb.embed_query("abc")) == [3.0]
    assert base.as_embedder(emb) is emb and base.as_embedder(None) is None
    assert not isinstance(emb, base.InProcessEmbedder)  # no capability it did not declare


def test_embed_query_without_an_embedder_names_the_argument():
    """The module-level helper refuses None with the library's error, not an AttributeError."""
    with pytest.raises(ValidationError) as err:
        asyncio.run(base.embed_query(None, "which cache?"))
    assert err.value.field == "embedder"


def test_a_plugin_embedder_without_a_dimension_is_a_config_error(plugins):
    settings = Settings.load(env={"GRAPHMEM_EMBEDDER_PROVIDER": "vague"})
    with pytest.raises(ConfigError, match="'vague'.*dimension"):
        providers.get_embedder(settings)


def test_an_embedder_must_implement_embed():
    class Empty(base.Embedder):
        name, dimension = "empty", 1

    with pytest.raises(TypeError, match="embed"):
        Empty()


def test_the_builtins_declare_what_they_can_do():
    from graphmem.providers import anthropic, local, local_colbert, ollama, openai, voyage

    assert issubclass(local.BgeEmbedder, base.InProcessEmbedder)
    assert issubclass(local.WordLlamaEmbedder, base.InProcessEmbedder)
    assert issubclass(local_colbert.ColbertMeanEmbedder, base.InProcessEmbedder)
    assert issubclass(local_colbert.ColbertEncoder, base.TokenEncoder)
    assert issubclass(local.CrossEncoderReranker, base.PairScorer)
    for cls in (openai.OpenAIEmbedder, ollama.OllamaEmbedder, voyage.VoyageEmbedder):
        assert issubclass(cls, base.Embedder) and not issubclass(cls, base.InProcessEmbedder)
    for cls in (openai.OpenAIChat, anthropic.AnthropicLLM, ollama.OllamaLLM):
        assert issubclass(cls, base.LLM)
    # Voyage embeds queries its own way (input_type: query); the others inherit the derived one.
    assert voyage.VoyageEmbedder.embed_query is not base.Embedder.embed_query
    assert openai.OpenAIEmbedder.embed_query is base.Embedder.embed_query


def test_the_default_local_embedder_declares_its_token_encoder():
    settings = Settings.load(env={})
    emb = providers.get_embedder(settings)
    from graphmem.providers.local_colbert import make_late_encoder

    assert emb.token_encoder is make_late_encoder(settings)  # one pass: vector and tokens
    assert emb.similarity_embedder().name == "local/bge-small-en-v1.5"
    q = "which animal joined the family?"
    assert emb.token_encoder.recalled_query(q) is None
    vec = emb.embed_query_sync(q)
    assert emb.token_encoder.recalled_query(q) is not None  # remembered for the late stage
    assert asyncio.run(emb.embed_query(q)) == vec


def test_the_providers_health_rows_are_a_leaf_type():
    from graphmem.providers.doctor_check import check

    rows = check(Settings.load(env={"GRAPHITI_EMBEDDER_PROVIDER": "ollama"}))
    assert rows and all(isinstance(r, Row) for r in rows)
    assert Row("problem", "error", "ollama embedder needs OLLAMA_EMBEDDING_DIM") in rows
    assert rows[0].as_dict() == {"name": "llm", "status": "ok",
                                 "detail": "none (structured writes and plain summaries only)"}
