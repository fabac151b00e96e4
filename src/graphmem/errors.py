"""graphmem's exception tree: every error graphmem raises derives from ``GraphmemError``.

    GraphmemError
     ├── ValidationError     bad input: names the field and the problem; nothing was written
     ├── ConfigError         settings that cannot work (unknown provider, missing key, ...)
     ├── ProviderError       an LLM or embedder call failed after its retries
     ├── StorageError        the file store or an index could not be read or written
     │    ├── IndexMismatchError  stored vectors come from a different embedder: run `graphmem reindex`
     │    └── CorruptIndexError   the index database is damaged (it is moved aside and rebuilt)
     ├── GraphError          the knowledge graph (FalkorDB / Graphiti) failed
     │    └── ServerError    the embedded FalkorDB could not be started or reached
     └── NotFoundError       an unknown session, item or project

The CLI turns any of these into one line on stderr and a non-zero exit; the MCP server turns
them into tool errors. Foreign exceptions are translated once, at the boundary that meets them;
``first_problem`` words a pydantic error for all of them, ``field_name`` names its field.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing costs a hook process ~3 ms to import; mypy reads the names
if TYPE_CHECKING:
    from typing import Any


class GraphmemError(Exception):
    """Root of every error graphmem raises on purpose."""

    exit_code = 1


class ValidationError(GraphmemError, ValueError):
    """Input that graphmem refuses; ``field`` names what was wrong."""

    exit_code = 2

    def __init__(self, message: str, field: str | None = None):
        self.field = field
        super().__init__(f"{field}: {message}" if field else message)


class ConfigError(GraphmemError):
    """Configuration that cannot work."""

    exit_code = 3


class ProviderError(GraphmemError):
    """An LLM or embedding provider failed; names the provider, the status and what to do."""

    def __init__(self, message: str, provider: str | None = None, status: int | None = None):
        self.provider = provider
        self.status = status
        super().__init__(message)


class StorageError(GraphmemError):
    """The file store or a derived index could not be read or written."""


class IndexMismatchError(StorageError):
    """An index holds vectors from another embedder; mixing is refused."""


class CorruptIndexError(StorageError):
    """The local index database is damaged; it is moved aside and rebuilt from the files."""


class GraphError(GraphmemError):
    """The knowledge graph failed."""


class ServerError(GraphError):
    """The embedded FalkorDB could not be started or reached."""


class NotFoundError(GraphmemError, LookupError):
    """An unknown session, item or project."""

    exit_code = 4


def first_problem(exc: Any, skip: int = 0) -> tuple[tuple[str, ...], str]:
    """The first problem of a pydantic ``ValidationError``, worded as graphmem words errors:
    its location as names (the first ``skip`` dropped, ``__root__`` left out, a list position
    as ``[n]``: join them with ``field_name``) and its message without pydantic's "Value
    error, " prefix, saying how many more problems there were."""
    errors = exc.errors()
    err = errors[0] if errors else {}
    loc = tuple(f"[{p}]" if isinstance(p, int) else str(p)
                for p in list(err.get("loc", ()))[skip:] if p != "__root__")
    msg = str(err.get("msg", "is invalid")).removeprefix("Value error, ")
    if len(errors) > 1:
        msg += f" (and {len(errors) - 1} more problem(s))"
    return loc, msg


def field_name(*parts: str) -> str:
    """A field's name as every graphmem error gives it: ``insights.what_failed[0]``,
    ``files[1]`` (names joined by dots, a list position in brackets)."""
    out = ""
    for part in parts:
        out += part if not out or part.startswith("[") else "." + part
    return out
