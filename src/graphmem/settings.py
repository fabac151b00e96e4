"""One typed settings root, nested by concern, read once at the edge and passed down.

Sources, lowest to highest priority: defaults, ``graphmem.toml`` (``GRAPHMEM_CONFIG`` or
``./graphmem.toml``), a ``.env`` file the user names (``GRAPHMEM_ENV_FILE`` or ``env_file=``),
then the process environment. Nothing is read at import time, and no ``.env`` is picked up
unless named. The reference memory's variable names keep working (see ``ENV_NAMES``).
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path
from typing import Any, Literal, Mapping

import pydantic
from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator

from . import search_client
from .errors import ConfigError


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid")


class GraphSettings(_Section):
    """The knowledge graph and its FalkorDB."""

    mode: Literal["on", "off", "auto"] = "off"
    falkordb_url: str | None = None  # external server; when unset the embedded one is started
    falkordb_host: str | None = None
    falkordb_port: int | None = None
    falkordb_password: SecretStr | None = None
    timeout: float = 10.0  # seconds for one graph write before it is queued
    search_deadline: float = 2.0  # seconds before search falls back to the local index
    start_timeout: float = 15.0
    # seconds a running server has to answer a ping (connect included): a stopped or hung one
    # costs this once, then the circuit breaker skips the graph for ``retry_after``
    connect_timeout: float = Field(default=1.5, gt=0)
    retry_after: float = 30.0  # seconds before a failed graph server is tried again

    @field_validator("falkordb_url")
    @classmethod
    def _url(cls, v: str | None) -> str | None:
        return check_falkordb_url(v) if v else None

    @field_validator("falkordb_host")
    @classmethod
    def _host(cls, v: str | None) -> str | None:
        if v is not None and (not v.strip() or any(c.isspace() or c in "/@" for c in v.strip())):
            raise ValueError(f"{v!r} is not a host name")
        return v.strip() if v else None

    @field_validator("falkordb_port")
    @classmethod
    def _port(cls, v: int | None) -> int | None:
        if v is not None and not 1 <= v <= 65535:
            raise ValueError(f"port {v} is not from 1 to 65535")
        return v


def check_falkordb_url(url: str) -> str:
    """A FalkorDB URL as redis-py reads it: ``redis://[:password@]host[:port][/db]``,
    ``rediss://...`` (TLS) or ``unix:///path/to.sock``; a ValueError says what is wrong (never
    echoing a password)."""
    from urllib.parse import urlsplit

    url = url.strip()
    if "://" not in url:
        raise ValueError("must start with redis://, rediss:// or unix:// "
                         "(e.g. redis://:PASSWORD@falkordb.example.com:6379)")
    parts = urlsplit(url)
    if parts.scheme not in ("redis", "rediss", "unix"):
        raise ValueError(f"scheme {parts.scheme!r} is not redis, rediss or unix")
    if parts.scheme == "unix":
        if not parts.path:
            raise ValueError("a unix:// URL needs the socket path (unix:///run/falkordb.sock)")
        return url
    if not parts.hostname:
        raise ValueError("names no host (redis://HOST:PORT)")
    try:
        port = parts.port
    except ValueError:
        raise ValueError("has a port that is not a number from 1 to 65535") from None
    if port == 0:
        raise ValueError("has a port that is not a number from 1 to 65535")
    if "@" in parts.netloc and not parts.password:
        raise ValueError("has a user part but an empty password (redis://:PASSWORD@HOST:PORT)")
    return url


class OpenAISettings(_Section):
    api_key: SecretStr | None = None
    base_url: str = "https://api.openai.com/v1"
    model: str = "gpt-4o-mini"
    embedding_model: str = "text-embedding-3-small"
    embedding_dim: int | None = None


class AnthropicSettings(_Section):
    api_key: SecretStr | None = None
    base_url: str = "https://api.anthropic.com"
    model: str = "claude-3-5-haiku-latest"


class AzureOpenAISettings(_Section):
    api_key: SecretStr | None = None
    base_url: str | None = None
    api_version: str = "2024-10-21"
    llm_deployment: str | None = None
    embedding_deployment: str | None = None
    embedding_dim: int | None = None


class VoyageSettings(_Section):
    api_key: SecretStr | None = None
    base_url: str = "https://api.voyageai.com/v1"
    embedding_model: str = "voyage-3"
    embedding_dim: int | None = None


class OllamaSettings(_Section):
    base_url: str = "http://localhost:11434"
    llm_model: str | None = None
    embedding_model: str | None = None
    embedding_dim: int | None = None


class LocalSettings(_Section):
    embedding_model: str = "default"
    reranker: str = "default"
    late_interaction: str = "default"  # ColBERT second stage of the local index; "off" skips it
    late_search: str = "auto"  # searches that use that stage: "auto", "rerank" (rerank=True), "all"


class ProviderSettings(_Section):
    """Which LLM and embedder to use, and each vendor's options."""

    llm: str | None = None  # None: no LLM (structured writes and deterministic summaries only)
    embedder: str = "local"
    reranker: str | None = None  # "local": the bundled cross-encoder; None: no re-ranking
    timeout: float = 30.0
    max_retries: int = 4
    max_retry_seconds: float = 60.0
    retry_backoff: float = 0.5  # first back-off in seconds; doubles per try, with jitter
    concurrency: int = 4
    openai: OpenAISettings = Field(default_factory=OpenAISettings)
    anthropic: AnthropicSettings = Field(default_factory=AnthropicSettings)
    azure_openai: AzureOpenAISettings = Field(default_factory=AzureOpenAISettings)
    voyage: VoyageSettings = Field(default_factory=VoyageSettings)
    ollama: OllamaSettings = Field(default_factory=OllamaSettings)
    local: LocalSettings = Field(default_factory=LocalSettings)


def default_home() -> Path:
    """Per-user data folder for the index, the embedded FalkorDB and the project registry."""
    return Path(search_client.default_home())  # one definition: the CLI's client needs it too


class EpisodeSettings(_Section):
    """Episodic session files."""

    # True: every turn is fdatasync'ed before record_turn returns (survives a power cut).
    # False: written with one write(2) but not synced (survives a crash of the process, as
    # SQLite's WAL with synchronous=NORMAL does); much faster on slow disks.
    fsync: bool = True


class IndexSettings(_Section):
    """The local index (``GRAPHMEM_HOME/index.sqlite3``)."""

    # seconds a write waits for another process's write lock before it gives up; the write is
    # then reported ``index: failed`` and replayed from its journal entry (``index/journal.py``)
    busy_timeout: float = Field(default=30.0, gt=0)


class TeamSettings(_Section):
    """Who and where writes come from, recorded on every item sent to a shared graph."""

    author: str | None = None  # None: git's user.email in the project, else the login name
    host: str | None = None  # None: this machine's hostname

    @pydantic.field_validator("author", "host")
    @classmethod
    def _one_line(cls, v: str | None) -> str | None:
        if v is not None and (not v.strip() or len(v) > 200
                              or any(ord(c) < 32 or ord(c) == 127 for c in v)):
            raise ValueError("must be 1 to 200 printable characters on one line")
        return v.strip() if v is not None else v


class SearchServerSettings(_Section):
    """The warm search server that ``graphmem search`` and ``context`` start and then ask."""

    mode: Literal[search_client.MODES] = "auto"  # off: every CLI search loads the models itself
    idle: float = Field(default=search_client.DEFAULT_IDLE, gt=0)  # seconds without a request before it exits


class Settings(_Section):
    """The settings root."""

    home: Path = Field(default_factory=default_home)
    project_id: str | None = None  # names every project of this process (see ``identity``)
    redact: bool = True
    max_item_bytes: int = Field(default=1_000_000, ge=1)
    graph: GraphSettings = Field(default_factory=GraphSettings)
    providers: ProviderSettings = Field(default_factory=ProviderSettings)
    episodes: EpisodeSettings = Field(default_factory=EpisodeSettings)
    index: IndexSettings = Field(default_factory=IndexSettings)
    search_server: SearchServerSettings = Field(default_factory=SearchServerSettings)
    team: TeamSettings = Field(default_factory=TeamSettings)

    @classmethod
    def load(cls, env: Mapping[str, str] | None = None, env_file: str | Path | None = None,
             config_file: str | Path | None = None, **overrides: Any) -> "Settings":
        """Read settings from a TOML file, a named ``.env`` and the environment, in that order."""
        environ = dict(os.environ if env is None else env)
        data: dict[str, Any] = {}
        cfg = config_file or environ.get("GRAPHMEM_CONFIG")
        if cfg is None and Path("graphmem.toml").is_file():
            cfg = "graphmem.toml"
        if cfg:
            try:
                data = tomllib.loads(Path(cfg).read_text(encoding="utf-8"))
            except (OSError, tomllib.TOMLDecodeError) as exc:
                raise ConfigError(f"cannot read config file {cfg}: {exc}") from None
        dotenv = env_file or environ.get("GRAPHMEM_ENV_FILE")
        merged: dict[str, str] = {}
        if dotenv:
            from dotenv import dotenv_values

            if not Path(dotenv).is_file():
                raise ConfigError(f"env file {dotenv} does not exist")
            merged.update({k: v for k, v in dotenv_values(dotenv).items() if v is not None})
        merged.update(environ)
        for name, path in ENV_NAMES.items():
            if name in merged and merged[name] != "":
                _put(data, path, _coerce(name, merged[name]))
        for key, value in overrides.items():
            _put(data, tuple(key.split("__")), value)
        try:
            return cls.model_validate(data)
        except pydantic.ValidationError as exc:
            err = exc.errors()[0]
            loc = tuple(str(p) for p in err["loc"])
            where = ".".join(loc)
            names = [n for n, path in ENV_NAMES.items() if path == loc and merged.get(n)]
            if names:  # the variable the user set, not only our tree's name for it
                where = f"{names[-1]} ({where})"
            msg = str(err["msg"]).removeprefix("Value error, ")
            raise ConfigError(f"setting {where}: {msg}") from None


def _coerce(name: str, value: str) -> Any:
    if name == "GRAPHITI_ENABLED":
        return "on" if value.strip().lower() in ("true", "1", "yes", "on") else "off"
    return value


def _put(data: dict[str, Any], path: tuple[str, ...], value: Any) -> None:
    for key in path[:-1]:
        data = data.setdefault(key, {})
    data[path[-1]] = value


# Environment variable -> place in the settings tree. GRAPHMEM_* first, then the reference's names;
# a later entry for the same place wins only when the earlier one is unset.
ENV_NAMES: dict[str, tuple[str, ...]] = {
    "GRAPHITI_ENABLED": ("graph", "mode"),
    "GRAPHMEM_GRAPH": ("graph", "mode"),
    "GRAPHMEM_HOME": ("home",),
    "GRAPHMEM_PROJECT_ID": ("project_id",),
    "GRAPHMEM_REDACT": ("redact",),
    "GRAPHMEM_MAX_ITEM_BYTES": ("max_item_bytes",),
    "GRAPHMEM_EPISODES_FSYNC": ("episodes", "fsync"),
    "GRAPHMEM_INDEX_BUSY_TIMEOUT": ("index", "busy_timeout"),
    "GRAPHMEM_SEARCH_SERVER": ("search_server", "mode"),
    "GRAPHMEM_SEARCH_SERVER_IDLE": ("search_server", "idle"),
    "GRAPHMEM_FALKORDB_URL": ("graph", "falkordb_url"),
    "GRAPHITI_FALKORDB_HOST": ("graph", "falkordb_host"),
    "GRAPHITI_FALKORDB_PORT": ("graph", "falkordb_port"),
    "GRAPHITI_FALKORDB_PASSWORD": ("graph", "falkordb_password"),
    "GRAPHMEM_GRAPH_TIMEOUT": ("graph", "timeout"),
    "GRAPHMEM_SEARCH_DEADLINE": ("graph", "search_deadline"),
    "GRAPHMEM_GRAPH_CONNECT_TIMEOUT": ("graph", "connect_timeout"),
    "GRAPHMEM_AUTHOR": ("team", "author"),
    "GRAPHMEM_HOST": ("team", "host"),
    "GRAPHITI_LLM_PROVIDER": ("providers", "llm"),
    "GRAPHMEM_LLM_PROVIDER": ("providers", "llm"),
    "GRAPHITI_EMBEDDER_PROVIDER": ("providers", "embedder"),
    "GRAPHMEM_EMBEDDER_PROVIDER": ("providers", "embedder"),
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
    "GRAPHMEM_LOCAL_EMBEDDING_MODEL": ("providers", "local", "embedding_model"),
    "GRAPHMEM_RERANKER": ("providers", "reranker"),
    "GRAPHMEM_LOCAL_RERANKER": ("providers", "local", "reranker"),
    "GRAPHMEM_LOCAL_LATE_INTERACTION": ("providers", "local", "late_interaction"),
    "GRAPHMEM_LOCAL_LATE_SEARCH": ("providers", "local", "late_search"),
}
