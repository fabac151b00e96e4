"""LLM, embedder and reranker providers (shipped as ``graphmem.providers``).

Providers are data, not branches: one table maps a provider name to the module that implements
it, loaded only when used. Built-ins and third parties feed the same table with the same record,
an entry point of the group ``graphmem.providers`` (name = provider name, value = a module
exposing ``make_llm``, ``make_embedder`` and/or ``make_reranker``, and optionally
``validate(settings, role)``); a third-party package declares it in its own pyproject.toml::

    [project.entry-points."graphmem.providers"]
    mycloud = "mycloud_graphmem"

What each returned model can do is declared by the bases in ``base.py``.

    from graphmem.providers import get_embedder, get_llm, validate
    problems = validate(settings)        # every problem at once, in plain words
    embedder = get_embedder(settings)    # cached: the local model loads once per process
"""

from __future__ import annotations

import threading
from importlib.metadata import EntryPoint, entry_points
from types import ModuleType
from typing import Any

from ..errors import ConfigError
from .base import LLM, Embedder, Reranker, as_embedder, as_reranker

ENTRY_POINT_GROUP = "graphmem.providers"
BUILTINS = {name: f"graphmem.providers.{name}"
            for name in ("openai", "anthropic", "azure_openai", "ollama", "voyage", "local")}
ALIASES = {"azure": "azure_openai", "azureopenai": "azure_openai", "voyageai": "voyage"}
ROLES = {"llm": "make_llm", "embedder": "make_embedder", "reranker": "make_reranker"}

_cache: dict[tuple[str, str], Any] = {}
_lock = threading.RLock()


def _builtins() -> dict[str, EntryPoint]:
    return {name: EntryPoint(name, target, ENTRY_POINT_GROUP) for name, target in BUILTINS.items()}


def registry() -> dict[str, EntryPoint]:
    """Every provider by name: the built-ins, then installed entry points (a plugin cannot take
    a built-in's name: "openai" is always graphmem's own)."""
    table = _builtins()
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        table.setdefault(ep.name, ep)
    return table


def known_providers() -> list[str]:
    """Every provider name: built-in ones and those installed through entry points."""
    return sorted(registry())


def load_provider(name: str) -> Any:
    """The module (or object) implementing provider ``name``; ConfigError lists the known ones."""
    key = ALIASES.get(name.strip().lower(), name.strip().lower()) if isinstance(name, str) else name
    # A built-in needs no scan of the installed distributions (~10 ms): they cannot replace it.
    table = _builtins() if key in BUILTINS else registry()
    if key not in table:
        raise ConfigError(f"unknown provider {name!r}; known providers: {', '.join(sorted(table))}")
    ep = table[key]
    try:
        return ep.load()
    except Exception as exc:
        if key in BUILTINS:  # graphmem's own module is broken: the traceback is the finding
            raise
        raise ConfigError(f"provider {key!r} (from entry point {ep.value}) failed to load: "
                          f"{exc}") from None


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


def _check(settings: Any, role: str, name: str) -> ModuleType:
    mod = load_provider(name)
    if not hasattr(mod, ROLES[role]):
        raise ConfigError(f"provider {name!r} offers no {role}; {role} providers: "
                          f"{', '.join(providers_for(role))}")
    problems = mod.validate(settings, role) if hasattr(mod, "validate") else []
    if problems:
        raise ConfigError("; ".join(problems))
    return mod


# What each role's model must be: a declared subclass passes as it is, an object written
# against the earlier duck-typed interface is wrapped once, here (``base.as_embedder``).
_DECLARE = {"llm": lambda obj: obj, "embedder": as_embedder, "reranker": as_reranker}


def _get(settings: Any, role: str, name: str) -> Any:
    key = (role, settings.providers.fingerprint())  # secrets take part, only as a hash
    with _lock:
        if key not in _cache:
            made = getattr(_check(settings, role, name), ROLES[role])(settings)
            try:
                _cache[key] = _DECLARE[role](made)
            except AttributeError as exc:  # e.g. an embedder without a dimension
                raise ConfigError(f"provider {name!r} made a {role} that is not one: {exc}; see "
                                  "graphmem.providers.base") from None
        return _cache[key]


def get_embedder(settings: Any) -> Embedder:
    """The configured embedder (``providers.embedder``, default ``local``), built once per settings."""
    return _get(settings, "embedder", settings.providers.embedder or "local")


def get_llm(settings: Any) -> LLM | None:
    """The configured LLM, or None when ``providers.llm`` is unset."""
    name = settings.providers.llm
    return _get(settings, "llm", name) if name else None


def get_reranker(settings: Any) -> Reranker | None:
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
