"""The provider registry: names, entry-point plugins, validation of every problem at once, caching,
and the providers section of ``graphmem doctor``."""

from __future__ import annotations

import asyncio
import json
import textwrap

import pytest

from conftest import run_cli
from graphmem import providers
from graphmem.errors import ConfigError
from graphmem.settings import Settings

PLUGIN = '''
class HashEmbedder:
    name = "fakehash/v1"
    dimension = 3

    def __init__(self, settings):
        self.settings = settings

    async def embed(self, texts):
        return [[float(len(t)), 1.0, 0.0] for t in texts]


def make_embedder(settings):
    return HashEmbedder(settings)


def validate(settings, role):
    return []
'''


@pytest.fixture
def plugin(tmp_path, monkeypatch):
    """An installed third-party distribution declaring ``graphmem.providers`` entry points."""
    site = tmp_path / "site"
    (site / "gm_fake_provider").mkdir(parents=True)
    (site / "gm_fake_provider" / "__init__.py").write_text(PLUGIN)
    (site / "gm_broken_provider.py").write_text("raise ImportError('needs the frobnicate extra')\n")
    info = site / "gm_fake_provider-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: gm-fake-provider\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(textwrap.dedent("""\
        [graphmem.providers]
        fakehash = gm_fake_provider
        openai = gm_fake_provider
        broken = gm_broken_provider
        """))
    monkeypatch.syspath_prepend(str(site))
    yield
    providers.clear_cache()


def test_entry_point_provider_is_found_and_used(plugin):
    assert "fakehash" in providers.known_providers()
    settings = Settings.load(env={"GRAPHMEM_EMBEDDER_PROVIDER": "fakehash"})
    assert providers.validate(settings) == []
    emb = providers.get_embedder(settings)
    assert emb.name == "fakehash/v1" and emb.settings is settings
    assert asyncio.run(emb.embed(["abcd"])) == [[4.0, 1.0, 0.0]]
    assert "fakehash" in providers.providers_for("embedder")
    assert "fakehash" not in providers.providers_for("llm")


def test_plugin_cannot_replace_a_builtin(plugin):
    assert providers.load_provider("openai").__name__ == "graphmem.providers.openai"


def test_plugin_that_fails_to_import_is_named(plugin):
    with pytest.raises(ConfigError, match="broken.*frobnicate"):
        providers.load_provider("broken")


def test_unknown_name_lists_the_known_ones(plugin):
    settings = Settings.load(env={"GRAPHITI_EMBEDDER_PROVIDER": "cohere"})
    with pytest.raises(ConfigError) as err:
        providers.get_embedder(settings)
    msg = str(err.value)
    assert "unknown provider 'cohere'" in msg
    for name in ("anthropic", "azure_openai", "fakehash", "local", "ollama", "openai", "voyage"):
        assert name in msg


def test_role_the_provider_lacks_lists_those_that_have_it():
    settings = Settings.load(env={"GRAPHITI_LLM_PROVIDER": "voyage", "VOYAGE_API_KEY": "k" * 20})
    with pytest.raises(ConfigError, match="offers no llm; llm providers: anthropic, azure_openai, "
                                          "ollama, openai"):
        providers.get_llm(settings)


def test_validate_reports_every_problem_at_once():
    settings = Settings.load(env={"GRAPHITI_LLM_PROVIDER": "anthropic",
                                  "GRAPHITI_EMBEDDER_PROVIDER": "ollama",
                                  "GRAPHMEM_RERANKER": "bogus",
                                  "OLLAMA_BASE_URL": "localhost:11434"})
    problems = providers.validate(settings)
    assert problems == [
        "provider anthropic needs ANTHROPIC_API_KEY",
        "ollama base URL 'localhost:11434' must start with http:// or https:// (OLLAMA_BASE_URL)",
        "ollama embedder needs OLLAMA_EMBEDDING_MODEL",
        "ollama embedder needs OLLAMA_EMBEDDING_DIM",
        "reranker: unknown provider 'bogus'; known providers: anthropic, azure_openai, local, "
        "ollama, openai, voyage",
    ]
    with pytest.raises(ConfigError, match="OLLAMA_EMBEDDING_MODEL; ollama embedder needs OLLAMA_EMBEDDING_DIM"):
        providers.get_embedder(settings)


def test_validate_each_vendor_names_its_variables():
    cases = {
        "openai": ({"GRAPHITI_LLM_PROVIDER": "openai", "GRAPHITI_EMBEDDER_PROVIDER": "openai",
                    "OPENAI_EMBEDDING_MODEL": "my-embedder"},
                   ["provider openai needs OPENAI_API_KEY",
                    "openai embedder: the dimension of 'my-embedder' is unknown; set OPENAI_EMBEDDING_DIM"]),
        "azure": ({"GRAPHITI_LLM_PROVIDER": "azure", "GRAPHITI_EMBEDDER_PROVIDER": "azure_openai"},
                  ["provider azure_openai needs AZURE_OPENAI_API_KEY",
                   "provider azure_openai needs AZURE_OPENAI_BASE_URL (https://<resource>.openai.azure.com)",
                   "azure_openai LLM needs AZURE_OPENAI_LLM_DEPLOYMENT",
                   "azure_openai embedder needs AZURE_OPENAI_EMBEDDING_DEPLOYMENT"]),
        "voyage": ({"GRAPHITI_EMBEDDER_PROVIDER": "voyage", "VOYAGE_EMBEDDING_MODEL": "voyage-9"},
                   ["provider voyage needs VOYAGE_API_KEY",
                    "voyage embedder: the dimension of 'voyage-9' is unknown; set VOYAGE_EMBEDDING_DIM"]),
        "ollama-llm": ({"GRAPHITI_LLM_PROVIDER": "ollama"}, ["ollama LLM needs OLLAMA_LLM_MODEL"]),
    }
    for label, (env, expected) in cases.items():
        assert providers.validate(Settings.load(env=env)) == expected, label
    # An unknown local model is refused when the settings load, naming the variable.
    with pytest.raises(ConfigError, match="GRAPHMEM_LOCAL_EMBEDDING_MODEL .*'default', "
                       "'answerai-colbert-small-v1', 'bge-small-en-v1.5' or 'wordllama'"):
        Settings.load(env={"GRAPHMEM_LOCAL_EMBEDDING_MODEL": "e5-huge"})


def test_reference_variable_names_configure_providers():
    settings = Settings.load(env={
        "GRAPHITI_EMBEDDER_PROVIDER": "voyage", "VOYAGE_API_KEY": "vk-" + "1" * 20,
        "VOYAGE_EMBEDDING_MODEL": "voyage-3-lite", "VOYAGE_EMBEDDING_DIM": "512"})
    assert providers.validate(settings) == []
    emb = providers.get_embedder(settings)
    assert (emb.name, emb.dimension) == ("voyage/voyage-3-lite", 512)
    providers.clear_cache()


def test_no_llm_and_no_reranker_unless_configured():
    settings = Settings.load(env={})
    assert providers.get_llm(settings) is None and providers.get_reranker(settings) is None
    assert providers.validate(settings) == []


def test_providers_are_cached_per_settings():
    env = {"GRAPHITI_LLM_PROVIDER": "openai", "OPENAI_API_KEY": "sk-" + "a" * 30}
    first = providers.get_llm(Settings.load(env=env))
    assert providers.get_llm(Settings.load(env=env)) is first
    other = providers.get_llm(Settings.load(env={**env, "OPENAI_API_KEY": "sk-" + "b" * 30}))
    assert other is not first
    # The LLM and the embedder of one vendor share one connection pool and concurrency limit.
    emb = providers.get_embedder(Settings.load(env={**env, "GRAPHITI_EMBEDDER_PROVIDER": "openai"}))
    assert emb.http is first.http and other.http is not first.http
    providers.clear_cache()
    assert providers.get_llm(Settings.load(env=env)) is not first
    providers.clear_cache()


def test_doctor_shows_providers_with_masked_keys_and_problems():
    key = "sk-proj-SECRETSECRETSECRET9876"
    result = run_cli("doctor", "--json", env={"GRAPHITI_LLM_PROVIDER": "openai", "OPENAI_API_KEY": key,
                                              "GRAPHITI_EMBEDDER_PROVIDER": "ollama"})
    assert key not in result.stdout and key not in result.stderr
    rows = {(r["name"], r["detail"]) for r in json.loads(result.stdout)["sections"]["providers"]}
    assert ("llm", "openai (gpt-4o-mini)") in rows
    assert ("OPENAI_API_KEY", "set (sk-…9876)") in rows
    assert ("problem", "ollama embedder needs OLLAMA_EMBEDDING_DIM") in rows
    assert result.returncode == 1


def test_doctor_check_makes_a_live_call_per_provider():
    # Nothing listens on port 9: the live LLM call must fail and say so; the local embedder works.
    result = run_cli("doctor", "--check", "--json", env={
        "GRAPHITI_LLM_PROVIDER": "ollama", "OLLAMA_LLM_MODEL": "llama3.1",
        "OLLAMA_BASE_URL": "http://127.0.0.1:9", "GRAPHMEM_LOCAL_EMBEDDING_MODEL": "wordllama"})
    rows = {r["name"]: r for r in json.loads(result.stdout)["sections"]["providers"]}
    assert rows["embedder live call"]["status"] == "ok"
    assert "local/wordllama-l2-supercat-256" in rows["embedder live call"]["detail"]
    assert rows["llm live call"]["status"] == "error"
    assert "ollama" in rows["llm live call"]["detail"] and "connect" in rows["llm live call"]["detail"]
