"""Where settings come from, read with the standard library only (and python-dotenv for a named
``.env``): the one reader behind ``Settings.load`` and the CLI's cheap ``search_client``.

Sources, lowest to highest priority: ``graphmem.toml`` (``GRAPHMEM_CONFIG`` or ``./graphmem.toml``),
a ``.env`` file the caller names (``GRAPHMEM_ENV_FILE`` or ``env_file=``), then the process
environment, each variable put in its place in the settings tree (``ENV_NAMES``). No ``.env`` is
picked up unless named. This module must stay cheap to import: it runs before every CLI search
and in every hook that asks the search server, so it imports neither ``typing`` nor ``pathlib``.
"""

from __future__ import annotations

import os

from .errors import ConfigError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pathlib import Path
    from typing import Any, Mapping

SEARCH_SERVER_MODES: tuple[str, ...] = ("auto", "off")  # settings.SearchServerMode's values
DEFAULT_IDLE = 900.0  # seconds without a request before the warm search server exits


class Sources:
    """What the settings sources hold, before any value is checked."""

    __slots__ = ("toml", "env", "files")

    def __init__(self, toml: dict[str, Any], env: dict[str, str], files: dict[str, list[str]]):
        self.toml = toml  # the config file's tables ({} without one)
        self.env = env  # the named .env file's values, overlaid by the process environment
        # "config" / "env_file" -> [real path, sha256 of its bytes]: what a server's key hashes
        self.files = files


def sources_stamp() -> tuple:
    """What ``read_sources`` would read now, cheaply: the environment, the working folder and
    the stat of the TOML file and of the named ``.env`` (equal stamps: equal sources; a cache
    of loaded settings keys on it)."""
    env = os.environ
    cwd = os.getcwd()
    stats: list[tuple] = []
    for name in (env.get("GRAPHMEM_CONFIG") or "graphmem.toml", env.get("GRAPHMEM_ENV_FILE")):
        if name:
            try:
                st = os.stat(os.path.join(cwd, name))
                stats.append((name, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns))
            except OSError:
                stats.append((name, None))
    return tuple(sorted(env.items())), cwd, tuple(stats)


def read_sources(env: Mapping[str, str] | None = None, env_file: str | Path | None = None,
                 config_file: str | Path | None = None, cwd: str | Path | None = None) -> Sources:
    """Read the TOML file and the named ``.env``; ConfigError when one cannot be read."""
    environ = dict(os.environ if env is None else env)
    base = os.fspath(cwd) if cwd is not None else os.getcwd()
    files: dict[str, list[str]] = {}
    data: dict[str, Any] = {}
    cfg = config_file or environ.get("GRAPHMEM_CONFIG")
    if cfg is None and os.path.isfile(os.path.join(base, "graphmem.toml")):
        cfg = "graphmem.toml"
    if cfg:
        import tomllib

        path = os.path.realpath(os.path.join(base, cfg))
        try:
            raw = _read_bytes(path)
            data = tomllib.loads(raw.decode("utf-8"))
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
            raise ConfigError(f"cannot read config file {cfg}: {exc}") from None
        files["config"] = [path, _digest(raw)]
    merged: dict[str, str] = {}
    dotenv = env_file or environ.get("GRAPHMEM_ENV_FILE")
    if dotenv:
        path = os.path.realpath(os.path.join(base, dotenv))
        if not os.path.isfile(path):
            raise ConfigError(f"env file {dotenv} does not exist")
        try:
            from dotenv import dotenv_values

            raw = _read_bytes(path)
            merged.update({k: v for k, v in dotenv_values(path).items() if v is not None})
        except (OSError, ValueError) as exc:
            raise ConfigError(f"cannot read env file {dotenv}: {exc}") from None
        files["env_file"] = [path, _digest(raw)]
    merged.update(environ)
    return Sources(data, merged, files)


# Environment variable -> place in the settings tree. When two name one place and both are set,
# the later entry wins: the reference's names come first, graphmem's after them.
ENV_NAMES: dict[str, tuple[str, ...]] = {
    "GRAPHMEM_HOME": ("home",),
    "GRAPHMEM_PROJECT_ID": ("project_id",),
    "GRAPHITI_ENABLED": ("graph", "mode"),
    "GRAPHMEM_GRAPH": ("graph", "mode"),
    "GRAPHMEM_REDACT": ("redact",),
    "GRAPHMEM_MAX_ITEM_BYTES": ("max_item_bytes",),
    "GRAPHMEM_EPISODES_FSYNC": ("episodes", "fsync"),
    "GRAPHMEM_FILES_FSYNC": ("files", "fsync"),
    "GRAPHMEM_FALKORDB_URL": ("graph", "falkordb_url"),
    "GRAPHITI_FALKORDB_HOST": ("graph", "falkordb_host"),
    "GRAPHITI_FALKORDB_PORT": ("graph", "falkordb_port"),
    "GRAPHITI_FALKORDB_PASSWORD": ("graph", "falkordb_password"),
    "GRAPHMEM_AUTHOR": ("team", "author"),
    "GRAPHMEM_HOST": ("team", "host"),
    "GRAPHMEM_REVIEW": ("review", "mode"),
    "GRAPHMEM_GRAPH_TIMEOUT": ("graph", "timeout"),
    "GRAPHMEM_SEARCH_DEADLINE": ("graph", "search_deadline"),
    "GRAPHMEM_INDEX_BUSY_TIMEOUT": ("index", "busy_timeout"),
    "GRAPHMEM_INDEX_WRITE_BEHIND": ("index", "write_behind"),
    "GRAPHMEM_GRAPH_CONNECT_TIMEOUT": ("graph", "connect_timeout"),
    "GRAPHMEM_GRAPH_IDLE": ("graph", "idle"),
    "GRAPHITI_LLM_PROVIDER": ("providers", "llm"),
    "GRAPHMEM_LLM_PROVIDER": ("providers", "llm"),
    "GRAPHITI_EMBEDDER_PROVIDER": ("providers", "embedder"),
    "GRAPHMEM_EMBEDDER_PROVIDER": ("providers", "embedder"),
    "GRAPHMEM_LOCAL_EMBEDDING_MODEL": ("providers", "local", "embedding_model"),
    "GRAPHMEM_LOCAL_LATE_INTERACTION": ("providers", "local", "late_interaction"),
    "GRAPHMEM_LOCAL_LATE_SEARCH": ("providers", "local", "late_search"),
    "GRAPHMEM_RERANKER": ("providers", "reranker"),
    "GRAPHMEM_LOCAL_RERANKER": ("providers", "local", "reranker"),
    "GRAPHMEM_MODEL_CACHE": ("providers", "local", "model_cache"),
    "GRAPHMEM_FUSE_MODELS": ("providers", "local", "fuse_models"),
    "GRAPHMEM_SEARCH_SERVER": ("search_server", "mode"),
    "GRAPHMEM_SEARCH_SERVER_IDLE": ("search_server", "idle"),
    "GRAPHMEM_AGENTS_MD_REFRESH": ("agents_md", "refresh"),
    "GRAPHMEM_AGENTS_MD_BYTES": ("agents_md", "max_bytes"),
    "OPENAI_API_KEY": ("providers", "openai", "api_key"),
    "OPENAI_BASE_URL": ("providers", "openai", "base_url"),
    "OPENAI_MODEL": ("providers", "openai", "model"),
    "OPENAI_EMBEDDING_MODEL": ("providers", "openai", "embedding_model"),
    "OPENAI_EMBEDDING_DIM": ("providers", "openai", "embedding_dim"),
    "ANTHROPIC_API_KEY": ("providers", "anthropic", "api_key"),
    "ANTHROPIC_BASE_URL": ("providers", "anthropic", "base_url"),
    "GRAPHITI_ANTHROPIC_MODEL": ("providers", "anthropic", "model"),
    "VOYAGE_API_KEY": ("providers", "voyage", "api_key"),
    "VOYAGE_BASE_URL": ("providers", "voyage", "base_url"),
    "VOYAGE_EMBEDDING_MODEL": ("providers", "voyage", "embedding_model"),
    "VOYAGE_EMBEDDING_DIM": ("providers", "voyage", "embedding_dim"),
    "AZURE_OPENAI_API_KEY": ("providers", "azure_openai", "api_key"),
    "AZURE_OPENAI_BASE_URL": ("providers", "azure_openai", "base_url"),
    "AZURE_OPENAI_API_VERSION": ("providers", "azure_openai", "api_version"),
    "AZURE_OPENAI_LLM_DEPLOYMENT": ("providers", "azure_openai", "llm_deployment"),
    "AZURE_OPENAI_EMBEDDING_DEPLOYMENT": ("providers", "azure_openai", "embedding_deployment"),
    "AZURE_OPENAI_EMBEDDING_DIM": ("providers", "azure_openai", "embedding_dim"),
    "OLLAMA_BASE_URL": ("providers", "ollama", "base_url"),
    "OLLAMA_LLM_MODEL": ("providers", "ollama", "llm_model"),
    "OLLAMA_EMBEDDING_MODEL": ("providers", "ollama", "embedding_model"),
    "OLLAMA_EMBEDDING_DIM": ("providers", "ollama", "embedding_dim"),
}


def raw_settings(sources: Sources) -> dict[str, Any]:
    """The settings tree before any check: the config file's tables, each variable of
    ``ENV_NAMES`` that is set (not empty) put in its place over them."""
    data = sources.toml
    for name, path in ENV_NAMES.items():
        value = sources.env.get(name, "")
        if value != "":
            if name == "GRAPHITI_ENABLED":  # the reference's boolean: anything but true-ish is off
                value = "on" if value.strip().lower() in ("true", "1", "yes", "on") else "off"
            put(data, path, value)
    return data


def put(data: dict[str, Any], path: tuple[str, ...], value: Any) -> None:
    """Set ``value`` at ``path`` in a nested dict, making the tables on the way."""
    for key in path[:-1]:
        data = data.setdefault(key, {})
        if not isinstance(data, dict):
            raise ConfigError(f"setting {key}: must be a table of settings, got {data!r}")
    data[path[-1]] = value


def default_home() -> str:
    """Per-user data folder for the index, the embedded FalkorDB and the project registry."""
    fast = _xdg_data_home()
    if fast is not None:
        return os.path.join(fast, "graphmem")
    from platformdirs import user_data_dir

    return user_data_dir("graphmem", appauthor=False)


def _xdg_data_home() -> str | None:
    """``platformdirs``' user data folder on Linux in the plain cases (an absolute ``HOME``, and
    ``XDG_DATA_HOME`` unset, empty or absolute), where every platformdirs 4 agrees; else None.
    Importing platformdirs costs a hook ~8 ms (it imports shutil, tempfile, lzma ...)."""
    import sys

    env = os.environ
    if not sys.platform.startswith("linux") or "ANDROID_DATA" in env or hasattr(
            sys, "getandroidapilevel") or not env.get("HOME", "").startswith("/"):
        return None
    xdg = env.get("XDG_DATA_HOME", "")
    if xdg.startswith("/"):
        return xdg
    return os.path.expanduser("~/.local/share") if xdg == "" else None


def default_model_cache() -> str:
    """Per-user cache folder for model files built on this machine (every home shares it)."""
    from platformdirs import user_cache_dir

    return user_cache_dir("graphmem", appauthor=False)


def _read_bytes(path: str) -> bytes:
    with open(path, "rb") as fh:
        return fh.read()


def _digest(raw: bytes) -> str:
    import hashlib

    return hashlib.sha256(raw).hexdigest()
