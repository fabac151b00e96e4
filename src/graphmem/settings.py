"""One typed settings root, nested by concern, read once at the edge and passed down.

Sources, lowest to highest priority: defaults, ``graphmem.toml`` (``GRAPHMEM_CONFIG`` or
``./graphmem.toml``), a ``.env`` file the user names (``GRAPHMEM_ENV_FILE`` or ``env_file=``),
then the process environment, all read into one tree by ``config_sources`` (which the CLI's
search client shares). Nothing is read at import time, and no ``.env`` is picked up unless named.
The reference memory's variable names keep working (``ENV_NAMES``). Every enumerated setting is
a ``Literal``: a bad value fails at load, naming the variable. The README's configuration table
is generated from this module (``env_table``).

pydantic-settings is not used: half the variables are the reference's and the vendors' names
mapped into a nested tree, and the CLI's search client must resolve the same sources without
importing pydantic at all.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Mapping, get_args, get_origin

import pydantic
from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator

from .config_sources import (DEFAULT_IDLE, ENV_NAMES, default_home, default_model_cache, put,
                             raw_settings, read_sources)
from .errors import ConfigError, field_name, first_problem

if TYPE_CHECKING:
    from pydantic.json_schema import JsonDict

GraphMode = Literal["on", "off", "auto"]
LocalEmbeddingModel = Literal["default", "answerai-colbert-small-v1", "bge-small-en-v1.5",
                              "wordllama"]
LocalReranker = Literal["default", "ms-marco-MiniLM-L-12-v2"]
LateInteraction = Literal["default", "answerai-colbert-small-v1", "off"]
LateSearch = Literal["auto", "rerank", "all"]
ReviewMode = Literal["apply", "hold"]
SearchServerMode = Literal["auto", "off"]  # also config_sources.SEARCH_SERVER_MODES (the client's)


def _shown(default: str | None = None, values: str | None = None) -> JsonDict:
    """How the README's table shows a field whose default or values the type cannot say."""
    return {k: v for k, v in (("shown_default", default), ("shown_values", values)) if v}


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid")

    def fingerprint(self) -> str:
        """A digest of every value, secrets included (two API keys, two digests); the secrets
        take part only through the hash, never stored or shown."""
        def plain(value: Any) -> Any:
            if isinstance(value, SecretStr):
                return value.get_secret_value()
            if isinstance(value, dict):
                return {k: plain(v) for k, v in value.items()}
            return value

        raw = json.dumps(plain(self.model_dump()), sort_keys=True, default=str)
        return hashlib.sha256(raw.encode("utf-8")).hexdigest()


class GraphSettings(_Section):
    """The knowledge graph and its FalkorDB."""

    mode: GraphMode = Field("auto", description=(
        "the knowledge graph (Graphiti on FalkorDB). `auto`: used when a FalkorDB is there to "
        "use: a configured server that answers (probed once per process), or this home's "
        "embedded one once `graphmem db start` started it (restarted on demand after an idle "
        "stop, until `graphmem db stop`); otherwise the local index alone, silently, at the "
        "cost of a file check. `on`: always (the embedded server is started on first use). "
        "`off`: never. `GRAPHITI_ENABLED` (the reference's name) takes `true` for `on`, "
        "anything else for `off`"))
    falkordb_url: str | None = Field(None, description="use an external FalkorDB; nothing is "
                                     "started", json_schema_extra=_shown(
                                         "embedded server",
                                         "`redis://[:PASSWORD@]HOST[:PORT]`, `rediss://...`, "
                                         "`unix:///PATH`"))
    falkordb_host: str | None = Field(None, description="the reference's way to name an "
                                      "external FalkorDB (with the port and password below)",
                                      json_schema_extra=_shown(values="host name"))
    falkordb_port: int | None = Field(None, description="its port",
                                      json_schema_extra=_shown(values="1-65535"))
    falkordb_password: SecretStr | None = Field(None, description="its password")
    timeout: float = Field(10.0, description="seconds a graph write may take before it "
                           "is queued in the outbox")
    search_deadline: float = Field(2.0, description="seconds before a graph search falls "
                                   "back to the local index")
    start_timeout: float = Field(15.0)  # seconds the embedded server has to start
    connect_timeout: float = Field(1.5, gt=0, description=(
        "seconds a running FalkorDB has to answer a ping; one that does not (stopped, hung) "
        "trips a breaker shared by the home's processes: for 30 s writes go to the outbox and "
        "searches use the local index (one-line notice), the server is neither waited for nor "
        "replaced; `graphmem sync` retries at once"))
    retry_after: float = Field(30.0)  # seconds before a failed graph server is tried again
    idle: float = Field(900.0, gt=0, description=(
        "seconds without a graph query before the embedded FalkorDB stops (its data kept on "
        "disk; a small watcher process started with it does this and exits with it)"))

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


_DIM = "vector size, when the model's is not known"


class OpenAISettings(_Section):
    api_key: SecretStr | None = Field(None, description="OpenAI API key")
    base_url: str = Field("https://api.openai.com/v1", description="OpenAI-compatible endpoint")
    model: str = Field("gpt-4o-mini", description="chat model")
    embedding_model: str = Field("text-embedding-3-small", description="embedding model")
    embedding_dim: int | None = Field(None, description=_DIM)


class AnthropicSettings(_Section):
    api_key: SecretStr | None = Field(None, description="Anthropic API key")
    base_url: str = Field("https://api.anthropic.com", description="Anthropic endpoint")
    model: str = Field("claude-3-5-haiku-latest", description="chat model")


class AzureOpenAISettings(_Section):
    api_key: SecretStr | None = Field(None, description="Azure OpenAI API key")
    base_url: str | None = Field(None, description="the resource's endpoint")
    api_version: str = Field("2024-10-21", description="API version")
    llm_deployment: str | None = Field(None, description="chat deployment")
    embedding_deployment: str | None = Field(None, description="embedding deployment")
    embedding_dim: int | None = Field(None, description=_DIM)


class VoyageSettings(_Section):
    api_key: SecretStr | None = Field(None, description="Voyage AI API key")
    base_url: str = Field("https://api.voyageai.com/v1", description="Voyage endpoint")
    embedding_model: str = Field("voyage-3", description="embedding model")
    embedding_dim: int | None = Field(None, description=_DIM)


class OllamaSettings(_Section):
    base_url: str = Field("http://localhost:11434", description="Ollama server")
    llm_model: str | None = Field(None, description="chat model")
    embedding_model: str | None = Field(None, description="embedding model")
    embedding_dim: int | None = Field(None, description=_DIM)


class LocalSettings(_Section):
    """The offline models shipped in the wheels."""

    embedding_model: LocalEmbeddingModel = Field("default", description=(
        "`answerai-colbert-small-v1` (the default; 384-d: the mean of its ColBERT token vectors, "
        "so one model pass gives a text its vector and its token vectors), `bge-small-en-v1.5` "
        "(384-d ONNX) or `wordllama` (256-d static)"))
    reranker: LocalReranker = Field("default", description="the cross-encoder `rerank=True` "
                                    "and `GRAPHMEM_RERANKER=local` use")
    late_interaction: LateInteraction = Field("default", description=(
        "`default`: the local index stores ColBERT (answerai-colbert-small) token vectors, about "
        "10 KB per item (from the embedder's own pass with the default model, one more pass "
        "with another); `off`: none"))
    late_search: LateSearch = Field("auto", description=(
        "which searches re-score their top 24 (40 with `rerank=True`) with those vectors: "
        "`auto` (every search when the embedder is the ColBERT model, else only `rerank=True`), "
        "`rerank` or `all`"))
    model_cache: Path = Field(default_factory=lambda: Path(default_model_cache()), description=(
        "the one folder for model files built on this machine, shared by every home: "
        "onnxruntime's optimised graphs, the fused copies of the ColBERT model and the "
        "cross-encoder (built once from the shipped int8 files, about 10 s and 33 MB each, "
        "they run a query about 20% faster) and the MaxSim graph"),
        json_schema_extra=_shown("`$XDG_CACHE_HOME/graphmem` or `~/.cache/graphmem`"))
    fuse_models: bool = Field(True, description="`false`: run the shipped model files as they "
                              "are (no fused copies)")

    @field_validator("late_interaction", "late_search", mode="before")
    @classmethod
    def _any_case(cls, v: Any) -> Any:
        return v.strip().lower() if isinstance(v, str) else v


class ProviderSettings(_Section):
    """Which LLM and embedder to use, and each vendor's options."""

    llm: str | None = Field(None, description=(
        "the LLM (consolidation, graph extraction): `openai`, `anthropic`, `azure_openai`, "
        "`ollama` or a plug-in's name; unset: structured writes and deterministic summaries only"),
        json_schema_extra=_shown("none", "provider name"))
    embedder: str = Field("local", description=(
        "`local`, `openai`, `voyage`, `azure_openai`, `ollama` or a plug-in's name"),
        json_schema_extra=_shown(values="provider name"))
    reranker: str | None = Field(None, description=(
        "`local` (ms-marco-MiniLM-L-12 cross-encoder) for every search; unset: only "
        "`rerank=True` searches re-rank, with the local one"),
        json_schema_extra=_shown("none", "provider name"))
    timeout: float = 30.0
    max_retries: int = 4
    max_retry_seconds: float = 60.0
    retry_backoff: float = 0.5  # first back-off in seconds; doubles per try, jitter
    concurrency: int = 4
    openai: OpenAISettings = Field(default_factory=OpenAISettings)
    anthropic: AnthropicSettings = Field(default_factory=AnthropicSettings)
    azure_openai: AzureOpenAISettings = Field(default_factory=AzureOpenAISettings)
    voyage: VoyageSettings = Field(default_factory=VoyageSettings)
    ollama: OllamaSettings = Field(default_factory=OllamaSettings)
    local: LocalSettings = Field(default_factory=LocalSettings)


class EpisodeSettings(_Section):
    """Episodic session files."""

    # False: written with one write(2) but not synced (survives a crash of the process, as
    # SQLite's WAL with synchronous=NORMAL does, not a power cut); much faster on slow disks.
    fsync: bool = Field(True, description="fsync every recorded turn/step batch")


class FileSettings(_Section):
    """The spec's memory files (session insights, codebase map, gotchas, patterns)."""

    # False: written whole (atomic replace, whole-line appends) but not synced, nor the index
    # journal's entry: survives a crash of the process, not a power cut (Auto-Claude's own
    # json.dump syncs nothing). Off by default: graphmem's writes are durable when they return.
    fsync: bool = Field(True, description=(
        "fsync each spec memory write and its index-journal entry before it returns; `false`: "
        "survives a crash of the process, not a power cut (about 0.2 ms a write instead of one "
        "or two disk syncs)"))


class IndexSettings(_Section):
    """The local index (``GRAPHMEM_HOME/index.sqlite3``)."""

    busy_timeout: float = Field(30.0, gt=0, description=(
        "seconds an index write waits for another process's write lock; past it the write says "
        "`index: failed` and is replayed from its journal entry"))
    # None: on for ``graphmem.compat`` (its functions return nothing to report), off for Memory.
    write_behind: bool | None = Field(None, description=(
        "a spec write returns once its file and its index-journal entry are on disk; the index "
        "and the graph follow in the background (reads in the process wait for them; a crash "
        "leaves the entry, replayed from the files)"), json_schema_extra=_shown(
            "on for `graphmem.compat`, off for `Memory`", "true, false"))


class TeamSettings(_Section):
    """Who and where writes come from, recorded on every item sent to a shared graph."""

    author: str | None = Field(None, description="who wrote an item, recorded with it when the "
                               "graph is on", json_schema_extra=_shown(
                                   "git's `user.email`, else the login name", "one line of text"))
    host: str | None = Field(None, description="which machine wrote it",
                             json_schema_extra=_shown("the hostname", "one line of text"))

    @pydantic.field_validator("author", "host")
    @classmethod
    def _one_line(cls, v: str | None) -> str | None:
        if v is not None and (not v.strip() or len(v) > 200
                              or any(ord(c) < 32 or ord(c) == 127 for c in v)):
            raise ValueError("must be 1 to 200 printable characters on one line")
        return v.strip() if v is not None else v


class SearchServerSettings(_Section):
    """The warm search server that ``graphmem search`` and ``context`` start and then ask."""

    mode: SearchServerMode = Field("auto", description=(
        "`auto`: `graphmem search`/`context` ask a warm search server and start one when none "
        "runs; `off`: every call loads the models itself"))
    idle: float = Field(DEFAULT_IDLE, gt=0, description="seconds without a request before that "
                        "server exits")


class ReviewSettings(_Section):
    """What the agent hooks and an LLM's supersession judgements write: applied, or held."""

    mode: ReviewMode = Field("apply", description=(
        "`apply`: memories the agent hooks digest and supersessions an LLM judges take effect "
        "at once; `hold`: they are written as pending (hidden from search, context and the "
        "briefing) until a person accepts them with `graphmem review accept`"))

    @field_validator("mode", mode="before")
    @classmethod
    def _any_case(cls, v: Any) -> Any:
        return v.strip().lower() if isinstance(v, str) else v


class AgentsMdSettings(_Section):
    """The marked section ``graphmem agents-md`` writes into AGENTS.md, CLAUDE.md or a rule."""

    refresh: bool = Field(True, description=(
        "the git hooks and the agent hooks re-render the section in every file that already "
        "carries graphmem's markers (a file whose section did not change is not written)"))
    max_bytes: int = Field(2048, ge=256, description="size budget of a refreshed section")


class Settings(_Section):
    """The settings root."""

    home: Path = Field(default_factory=lambda: Path(default_home()), description=(
        "index, embedded FalkorDB data, project registry"),
        json_schema_extra=_shown("per-user data folder"))
    project_id: str | None = Field(None, description="the project key of every project this "
                                   "process opens (see Project identity)",
                                   json_schema_extra=_shown("from the repository"))
    redact: bool = Field(True, description="redact secrets before writing")
    max_item_bytes: int = Field(1_000_000, ge=1, description="largest accepted item")
    graph: GraphSettings = Field(default_factory=GraphSettings)
    providers: ProviderSettings = Field(default_factory=ProviderSettings)
    episodes: EpisodeSettings = Field(default_factory=EpisodeSettings)
    files: FileSettings = Field(default_factory=FileSettings)
    index: IndexSettings = Field(default_factory=IndexSettings)
    search_server: SearchServerSettings = Field(default_factory=SearchServerSettings)
    team: TeamSettings = Field(default_factory=TeamSettings)
    review: ReviewSettings = Field(default_factory=ReviewSettings)
    agents_md: AgentsMdSettings = Field(default_factory=AgentsMdSettings)

    @classmethod
    def load(cls, env: Mapping[str, str] | None = None, env_file: str | Path | None = None,
             config_file: str | Path | None = None, **overrides: Any) -> "Settings":
        """Read settings from a TOML file, a named ``.env`` and the environment, in that order;
        a bad value is a ConfigError naming the variable that set it."""
        sources = read_sources(env, env_file, config_file)
        data = raw_settings(sources)
        for key, value in overrides.items():
            put(data, tuple(key.split("__")), value)
        try:
            return cls.model_validate(data)
        except pydantic.ValidationError as exc:
            loc, msg = first_problem(exc)
            where = field_name(*loc)
            names = [n for n, path in ENV_NAMES.items() if path == loc and sources.env.get(n)]
            if names:  # the variable the user set, not only our tree's name for it
                where = f"{names[-1]} ({where})"
            raise ConfigError(f"setting {where}: {msg}") from None


# The variables that choose the sources themselves (``config_sources``).
SOURCE_NAMES = {
    "GRAPHMEM_CONFIG": ("file path", "`./graphmem.toml` when present",
                        "the TOML file read first (its tables mirror the settings tree)"),
    "GRAPHMEM_ENV_FILE": ("file path", "none", "a `.env` file read after the TOML file; no "
                          "`.env` is read unless named here"),
}


def env_table() -> str:
    """The README's table of environment variables (``python -m graphmem.settings`` prints it)."""
    lines = ["| variable | values | default | meaning |", "|---|---|---|---|"]
    lines += [f"| `{name}` | {values} | {default} | {meaning} |"
              for name, (values, default, meaning) in SOURCE_NAMES.items()]
    names: dict[tuple[str, ...], list[str]] = {}
    for name, path in ENV_NAMES.items():
        names.setdefault(path, []).append(name)
    for path, group in names.items():
        info, annotation = _field(path)
        aliases = "".join(f" (`{n}`)" for n in group[:-1])
        extra = info.json_schema_extra if isinstance(info.json_schema_extra, dict) else {}
        values = extra.get("shown_values") or _values(annotation, info)
        default = extra.get("shown_default") or _default(info)
        lines.append(f"| `{group[-1]}`{aliases} | {values} | {default} | {info.description} |")
    return "\n".join(lines) + "\n"


def _field(path: tuple[str, ...]) -> tuple[Any, Any]:
    model: Any = Settings
    for key in path[:-1]:
        model = model.model_fields[key].annotation
    info = model.model_fields[path[-1]]
    return info, info.annotation


def _values(annotation: Any, info: Any) -> str:
    kinds = [a for a in (get_args(annotation) if get_origin(annotation) is not Literal
                         and get_args(annotation) else (annotation,)) if a is not type(None)]
    kind = kinds[0]
    if get_origin(kind) is Literal:
        return " / ".join(f"`{v}`" for v in get_args(kind))
    if kind is bool:
        return "`true` / `false`"
    bounds = "".join(f" {op} {getattr(m, attr)}" for m in info.metadata
                     for attr, op in (("gt", ">"), ("ge", "≥")) if hasattr(m, attr))
    return {int: "integer", float: "number", Path: "folder", SecretStr: "secret",
            str: "text"}[kind] + bounds


def _default(info: Any) -> str:
    value = info.default
    if value is None:
        return "none"
    if isinstance(value, bool):
        return f"`{str(value).lower()}`"
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return f"`{value}`" if isinstance(value, str) else f"{value:,}"


if __name__ == "__main__":
    print(env_table(), end="")
