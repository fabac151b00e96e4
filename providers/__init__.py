"""LLM, embedder and reranker providers (shipped as ``graphmem.providers``).

Providers are data, not branches: ``PROVIDERS`` maps a name to the module that implements it,
loaded only when used. Third-party packages add their own through the entry-point group
``graphmem.providers`` (name = provider name, value = a module exposing ``make_llm``,
``make_embedder`` and/or ``make_reranker``, and optionally ``validate(settings, role)``).

    from graphmem.providers import get_embedder, get_llm, validate
    problems = validate(settings)        # every problem at once, in plain words
    embedder = get_embedder(settings)    # cached: the local model loads once per process
"""

from __future__ import annotations

import hashlib
import importlib
import json
import threading
from types import ModuleType
from typing import TYPE_CHECKING, Any

from ..errors import ConfigError

if TYPE_CHECKING:
    from .base import LLM, Embedder, Reranker

ENTRY_POINT_GROUP = "graphmem.providers"
PROVIDERS: dict[str, str] = {
    "openai": "graphmem.providers.openai",
    "anthropic": "graphmem.providers.anthropic",
    "azure_openai": "graphmem.providers.azure_openai",
    "ollama": "graphmem.providers.ollama",
    "voyage": "graphmem.providers.voyage",
    "local": "graphmem.providers.local",
}
ALIASES = {"azure": "azure_openai", "azureopenai": "azure_openai", "voyageai": "voyage"}
ROLES = {"llm": "make_llm", "embedder": "make_embedder", "reranker": "make_reranker"}

_cache: dict[tuple[str, str], Any] = {}
_lock = threading.RLock()


def _entry_points() -> dict[str, Any]:
    from importlib.metadata import entry_points

    return {ep.name: ep for ep in entry_points(group=ENTRY_POINT_GROUP)}


def known_providers() -> list[str]:
    """Every provider name: built-in ones and those installed through entry points."""
    return sorted(set(PROVIDERS) | set(_entry_points()))


def load_provider(name: str) -> Any:
    """The module (or object) implementing provider ``name``; ConfigError lists the known ones."""
    key = ALIASES.get(name.strip().lower(), name.strip().lower()) if isinstance(name, str) else name
    if key in PROVIDERS:  # built-ins win: an installed plugin cannot hijack "openai"
        return importlib.import_module(PROVIDERS[key])
    eps = _entry_points()
    if key in eps:
        try:
            return eps[key].load()
        except Exception as exc:
            raise ConfigError(f"provider {key!r} (from entry point {eps[key].value}) failed to load: "
                              f"{exc}") from None
    raise ConfigError(f"unknown provider {name!r}; known providers: "
                      f"{', '.join(sorted(set(PROVIDERS) | set(eps)))}")


def providers_for(role: str) -> list[str]:
    """The provider names that offer ``role`` (llm, embedder or reranker)."""
    names = []
    for name in known_providers():
        try:
            mod = load_provider(name)
        except ConfigError:
            continue
        if hasattr(mod, ROLES[role]):
            names.append(name)
    return names


def _fingerprint(settings: Any) -> str:
    # Secrets take part in the key (two keys, two clients) but only as a hash, never stored.
    def plain(value: Any) -> Any:
        if hasattr(value, "get_secret_value"):
            return value.get_secret_value()
        if isinstance(value, dict):
            return {k: plain(v) for k, v in value.items()}
        return value

    raw = json.dumps(plain(settings.providers.model_dump()), sort_keys=True, default=str)
    return hashlib.sha256(raw.encode()).hexdigest()


def _check(settings: Any, role: str, name: str) -> ModuleType:
    mod = load_provider(name)
    if not hasattr(mod, ROLES[role]):
        raise ConfigError(f"provider {name!r} offers no {role}; {role} providers: "
                          f"{', '.join(providers_for(role))}")
    problems = mod.validate(settings, role) if hasattr(mod, "validate") else []
    if problems:
        raise ConfigError("; ".join(problems))
    return mod


def _get(settings: Any, role: str, name: str) -> Any:
    key = (role, _fingerprint(settings))
    with _lock:
        if key not in _cache:
            _cache[key] = getattr(_check(settings, role, name), ROLES[role])(settings)
        return _cache[key]


def get_embedder(settings: Any) -> "Embedder":
    """The configured embedder (``providers.embedder``, default ``local``), built once per settings."""
    return _get(settings, "embedder", settings.providers.embedder or "local")


def get_llm(settings: Any) -> "LLM | None":
    """The configured LLM, or None when ``providers.llm`` is unset."""
    name = settings.providers.llm
    return _get(settings, "llm", name) if name else None


def get_reranker(settings: Any) -> "Reranker | None":
    """The configured reranker, or None when ``providers.reranker`` is unset."""
    name = settings.providers.reranker
    return _get(settings, "reranker", name) if name else None


def validate(settings: Any) -> list[str]:
    """Every problem with the configured providers at once, in plain words (empty when fine)."""
    ps = settings.providers
    problems: list[str] = []
    for role, name in (("llm", ps.llm), ("embedder", ps.embedder or "local"),
                       ("reranker", ps.reranker)):
        if not name:
            continue
        try:
            mod = load_provider(name)
        except ConfigError as exc:
            problems.append(f"{role}: {exc}")
            continue
        if not hasattr(mod, ROLES[role]):
            problems.append(f"provider {name!r} offers no {role}; {role} providers: "
                            f"{', '.join(providers_for(role))}")
        elif hasattr(mod, "validate"):
            problems.extend(mod.validate(settings, role))
    return list(dict.fromkeys(problems))  # an openai key missing for two roles is one problem


def clear_cache() -> None:
    """Forget constructed providers (local models stay loaded in their own module)."""
    import sys

    with _lock:
        _cache.clear()
        http = sys.modules.get("graphmem.providers.http")  # only if loaded: keep httpx lazy
        if http is not None:
            http._shared.clear()
