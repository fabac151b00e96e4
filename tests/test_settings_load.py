"""One settings loader: enumerated values checked at load (naming the variable), the README's
table generated from the model, secrets that tell cached objects apart, one model cache."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import get_args

import pytest

from conftest import run_cli
from graphmem import settings as settings_module
from graphmem.errors import ConfigError
from graphmem.settings import ENV_NAMES, Settings, env_table

REPO = Path(__file__).resolve().parent.parent

# variable, a value it refuses, a value it takes: one per kind of enumerated setting
ENUMERATED = [
    ("GRAPHMEM_GRAPH", "sometimes", "auto"),
    ("GRAPHMEM_SEARCH_SERVER", "never", "off"),
    ("GRAPHMEM_LOCAL_LATE_SEARCH", "bogus", "all"),
    ("GRAPHMEM_LOCAL_LATE_INTERACTION", "banana", "off"),
    ("GRAPHMEM_LOCAL_EMBEDDING_MODEL", "e5-huge", "wordllama"),
    ("GRAPHMEM_LOCAL_RERANKER", "bge-reranker", "ms-marco-MiniLM-L-12-v2"),
    ("GRAPHMEM_FUSE_MODELS", "perhaps", "off"),
    ("GRAPHMEM_REDACT", "maybe", "false"),
]


@pytest.mark.parametrize("name,bad,good", ENUMERATED)
def test_a_bad_enumerated_value_fails_at_load_naming_its_variable(name, bad, good):
    path = ".".join(ENV_NAMES[name])
    with pytest.raises(ConfigError) as caught:
        Settings.load(env={name: bad})
    message = str(caught.value)
    assert message.startswith(f"setting {name} ({path}): ") and "Value error" not in message
    Settings.load(env={name: good})


def test_a_bad_value_in_the_config_file_names_its_place(tmp_path):
    toml = tmp_path / "graphmem.toml"
    toml.write_text('[providers.local]\nlate_search = "bogus"\n')
    with pytest.raises(ConfigError, match=r"^setting providers\.local\.late_search: Input should "
                                          r"be 'auto', 'rerank' or 'all'$"):
        Settings.load(env={}, config_file=toml)


def test_late_stage_choices_keep_taking_any_case():
    local = Settings.load(env={"GRAPHMEM_LOCAL_LATE_SEARCH": " ALL ",
                               "GRAPHMEM_LOCAL_LATE_INTERACTION": "Off"}).providers.local
    assert (local.late_search, local.late_interaction) == ("all", "off")


def test_the_cli_refuses_a_bad_late_search_before_doing_anything(spec_dir: Path):
    env = {"GRAPHMEM_LOCAL_LATE_SEARCH": "bogus"}
    for argv in (("gotchas", "--spec-dir", str(spec_dir)),
                 ("search", "webhooks", "--spec-dir", str(spec_dir))):
        done = run_cli(*argv, env=env)
        assert done.returncode == 3, (argv, done.stderr)
        assert done.stderr == ("graphmem: error: setting GRAPHMEM_LOCAL_LATE_SEARCH "
                               "(providers.local.late_search): Input should be 'auto', 'rerank' "
                               "or 'all'\n"), argv
        assert done.stdout == ""


@pytest.mark.parametrize("name,bad,good", ENUMERATED)
def test_the_cli_names_each_bad_variable(name, bad, good, spec_dir: Path):
    done = run_cli("gotchas", "--spec-dir", str(spec_dir), env={name: bad})
    assert done.returncode == 3 and done.stdout == ""
    assert done.stderr.startswith(f"graphmem: error: setting {name} (") and done.stderr.count("\n") == 1


def test_the_enumerations_are_the_names_the_models_know():
    from graphmem.index.local_backend import LATE_SEARCH
    from graphmem.providers import local, local_colbert

    assert set(get_args(settings_module.LocalEmbeddingModel)) == {"default", *local.EMBEDDING_MODELS}
    assert set(get_args(settings_module.LocalReranker)) == {"default", *local.RERANKERS}
    assert set(get_args(settings_module.LateInteraction)) == set(local_colbert.CHOICES)
    assert set(get_args(settings_module.LateSearch)) == set(LATE_SEARCH)
    from graphmem.config_sources import SEARCH_SERVER_MODES  # what the cheap client accepts

    assert get_args(settings_module.SearchServerMode) == SEARCH_SERVER_MODES


def test_the_readme_table_is_the_one_the_settings_generate():
    readme = (REPO / "README.md").read_text()
    start, end = "<!-- settings table: generated -->\n", "<!-- end of settings table -->"
    table = readme[readme.index(start) + len(start):readme.index(end)]
    assert table == env_table(), "README out of date: paste `python -m graphmem.settings`"
    for name in [*ENV_NAMES, *settings_module.SOURCE_NAMES]:
        assert f"`{name}`" in table


def test_the_fingerprint_tells_secrets_apart_without_holding_them():
    a = Settings.load(env={"OPENAI_API_KEY": "sk-first-secret-0001"})
    b = Settings.load(env={"OPENAI_API_KEY": "sk-second-secret-002"})
    assert a.model_dump_json() == b.model_dump_json()  # the dump masks both keys alike
    assert a.fingerprint() != b.fingerprint()
    assert a.fingerprint() == Settings.load(env={"OPENAI_API_KEY": "sk-first-secret-0001"}).fingerprint()
    assert "secret" not in a.fingerprint()


def test_compat_keeps_one_memory_per_api_key(spec_dir: Path, monkeypatch):
    from graphmem import compat

    try:
        monkeypatch.setenv("OPENAI_API_KEY", "sk-first-secret-0001")
        first = compat._mem(spec_dir).memory
        assert compat._mem(spec_dir).memory is first  # the same settings: the cached one
        monkeypatch.setenv("OPENAI_API_KEY", "sk-second-secret-002")
        second = compat._mem(spec_dir).memory
        assert second is not first
        keys = repr(list(compat._CACHE))
        assert "sk-first" not in keys and "sk-second" not in keys  # only a hash of the secret
    finally:
        compat._close_all()


def test_every_model_file_built_here_goes_to_the_one_model_cache(tmp_path, monkeypatch):
    from graphmem import providers
    from graphmem.providers import onnx_runtime

    cache = tmp_path / "model-cache"
    monkeypatch.setenv("GRAPHMEM_MODEL_CACHE", str(cache))
    monkeypatch.setenv("GRAPHMEM_FUSE_MODELS", "false")  # no 10 s fused build in this test
    monkeypatch.setenv("GRAPHMEM_RERANKER", "local")
    onnx_runtime.forget_models()
    providers.clear_cache()
    try:
        settings = Settings.load()
        reranker = providers.get_reranker(settings)
        assert reranker.score_sync([("token", "the login token")])[0] > 0
        assert list(cache.glob("reranker_en-ort*.onnx"))  # onnxruntime's optimised graph
        assert not (settings.home / "models").exists()  # no second cache in the home
        assert onnx_runtime.model_cache() == onnx_runtime.ModelCache(cache, fuse=False)  # MaxSim's
    finally:
        onnx_runtime.forget_models()
        providers.clear_cache()


def test_a_stray_env_file_is_not_loaded_by_graphiti(tmp_path):
    """graphiti-core runs load_dotenv() on import; the tests' environment switches that off."""
    (tmp_path / ".env").write_text("GM_STRAY_VALUE=leaked\n")
    code = "import os, graphiti_core.helpers; print(os.environ.get('GM_STRAY_VALUE'))"

    def run(**env: str) -> str:
        import os

        full = dict(os.environ, **env)
        return subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=full, text=True,
                               capture_output=True, timeout=120).stdout.strip()

    assert run() == "None"
    assert run(PYTHON_DOTENV_DISABLED="0") == "leaked"  # what the switch prevents


def test_the_search_client_reads_the_tree_the_settings_read(tmp_path, monkeypatch):
    """One reader of the sources: the stdlib-only client resolves home, mode and idle from the
    same tree as ``Settings.load``, the config file, a named .env and the environment."""
    from graphmem.cli.search_client import client_config

    monkeypatch.chdir(tmp_path)
    (tmp_path / "graphmem.toml").write_text(
        f'home = "{tmp_path / "toml-home"}"\n[search_server]\nmode = "off"\nidle = 7\n')
    (tmp_path / "extra.env").write_text(f"GRAPHMEM_HOME={tmp_path / 'env-home'}\n")
    cases = [{}, {"GRAPHMEM_SEARCH_SERVER": "auto"}, {"GRAPHMEM_ENV_FILE": "extra.env"},
             {"GRAPHMEM_ENV_FILE": "extra.env", "GRAPHMEM_HOME": str(tmp_path / "own-home")},
             {"GRAPHMEM_SEARCH_SERVER_IDLE": "30"}]
    seen = set()
    for env in cases:
        cfg, s = client_config(env=env, cwd=str(tmp_path)), Settings.load(env=env)
        assert cfg is not None, env
        assert (cfg.home, cfg.mode, cfg.idle) == (str(s.home), s.search_server.mode,
                                                  s.search_server.idle), env
        seen.add((cfg.home, cfg.mode, cfg.idle))
    assert len(seen) == len(cases)  # each source took effect
    (tmp_path / "graphmem.toml").write_text('search_server = 3\n')
    with pytest.raises(ConfigError, match="search_server: must be a table"):
        Settings.load(env={"GRAPHMEM_SEARCH_SERVER": "off"})
    assert client_config(env={"GRAPHMEM_SEARCH_SERVER": "off"}, cwd=str(tmp_path)) is None


@pytest.mark.parametrize("home, xdg", [
    ("/home/ann", None), ("/home/ann/", None), ("/", None), ("/home/ann", ""),
    ("/home/ann", "/data/xdg"), ("/home/ann", "/data/xdg/"), ("/home/ann", "/data/x dg "),
    ("/home/ann", "relative/xdg"), ("/home/ann", "  "), ("relative-home", None), (None, None),
])
def test_the_default_home_is_the_folder_platformdirs_names(home, xdg, monkeypatch):
    """``default_home`` answers the plain Linux cases without importing platformdirs: the same
    folder as platformdirs, in those and in every other case (where it asks platformdirs)."""
    from platformdirs import user_data_dir

    from graphmem.config_sources import default_home

    for name, value in (("HOME", home), ("XDG_DATA_HOME", xdg)):
        if value is None:
            monkeypatch.delenv(name, raising=False)
        else:
            monkeypatch.setenv(name, value)
    try:
        expected = user_data_dir("graphmem", appauthor=False)
    except RuntimeError as exc:  # platformdirs refuses a home it cannot resolve: so must we
        with pytest.raises(RuntimeError):
            default_home()
        assert "home" in str(exc)
        return
    assert default_home() == expected
