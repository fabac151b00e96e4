"""The ``providers`` section of ``graphmem doctor``: what is configured, masked keys, problems.

With ``--check`` it makes one cheap live call per configured provider (embed one word, ask the
LLM for a two-token reply, score one pair).
"""

from __future__ import annotations

from typing import Any

from ..health import Row


def mask(secret: Any) -> str:
    """A key shown as ``sk-…wxyz``: enough to tell keys apart, never enough to use one."""
    if secret is None:
        return "unset"
    value = secret.get_secret_value() if hasattr(secret, "get_secret_value") else str(secret)
    if len(value) < 12:
        return "set (****)"
    return f"set ({value[:3]}…{value[-4:]})"


_KEYS = {"openai": ("OPENAI_API_KEY", "openai"), "anthropic": ("ANTHROPIC_API_KEY", "anthropic"),
         "azure_openai": ("AZURE_OPENAI_API_KEY", "azure_openai"),
         "voyage": ("VOYAGE_API_KEY", "voyage")}


def _describe(settings: Any, role: str, name: str) -> str:
    ps = settings.providers
    detail = {"openai": lambda: ps.openai.model if role == "llm" else ps.openai.embedding_model,
              "anthropic": lambda: ps.anthropic.model,
              "azure_openai": lambda: (ps.azure_openai.llm_deployment if role == "llm"
                                       else ps.azure_openai.embedding_deployment),
              "voyage": lambda: ps.voyage.embedding_model,
              "ollama": lambda: ps.ollama.llm_model if role == "llm" else ps.ollama.embedding_model,
              "local": lambda: (ps.local.embedding_model if role == "embedder" else ps.local.reranker)}
    what = detail[name]() if name in detail else "third-party provider"
    if name == "local" and what == "default":
        from . import local

        what = "default: " + (local.DEFAULT_EMBEDDING_MODEL if role == "embedder"
                              else local.DEFAULT_RERANKER)
    return f"{name} ({what or 'model not set'})"


async def _live(settings: Any) -> list[tuple[str, str, str]]:
    from . import get_embedder, get_llm, get_reranker

    # A health check should answer quickly: one try each, a short timeout.
    quick = settings.providers.model_copy(update={"max_retries": 0,
                                                  "timeout": min(settings.providers.timeout, 10.0)})
    settings = settings.model_copy(update={"providers": quick})
    rows = []
    calls = (("embedder", lambda p: p.embed(["ping"]), get_embedder),
             ("llm", lambda p: p.generate([{"role": "user", "content": "Reply with OK."}],
                                         max_tokens=5), get_llm),
             ("reranker", lambda p: p.score("ping", ["pong"]), get_reranker))
    for role, call, get in calls:
        try:
            provider = get(settings)
            if provider is None:
                continue
            await call(provider)
            rows.append((f"{role} live call", "ok", f"{provider.name} answered"))
        except Exception as exc:  # the failure is the finding
            rows.append((f"{role} live call", "error", str(exc)))
    return rows


def _fused_status(settings: Any) -> tuple[str, str]:
    """The fused copies of the local ColBERT model and cross-encoder (``local_fuse.py``)."""
    from .local_fuse import status
    from .onnx_runtime import model_cache, model_dir

    try:
        sources = {name: model_dir(sub) / "model.onnx"
                   for name, sub in (("ColBERT", "colbert"), ("cross-encoder", "reranker_en"))}
    except Exception as exc:
        return "warn", f"local model files: {exc}"
    return status(sources, model_cache(settings))


def check(settings: Any, live: bool = False) -> list[Row]:
    """The providers section of a doctor report; ``live``: one cheap call to each provider."""
    from . import validate

    rows = []
    ps = settings.providers
    rows.append(Row("llm", "ok", _describe(settings, "llm", ps.llm) if ps.llm
                    else "none (structured writes and plain summaries only)"))
    rows.append(Row("embedder", "ok", _describe(settings, "embedder", ps.embedder or "local")))
    rows.append(Row("reranker", "ok", _describe(settings, "reranker", ps.reranker)
                    if ps.reranker else "none"))
    if (ps.embedder or "local") == "local" or ps.reranker == "local":
        rows.append(Row("fused models", *_fused_status(settings)))
    used = {ps.llm, ps.embedder, ps.reranker}
    for name, (env, section) in _KEYS.items():
        secret = getattr(ps, section).api_key
        if name in used or secret is not None:
            rows.append(Row(env, "ok" if secret is not None else "warn", mask(secret)))
    problems = validate(settings)
    for problem in problems:
        rows.append(Row("problem", "error", problem))
    if not problems:
        rows.append(Row("configuration", "ok", "no problems found"))
    if live and not problems:
        from .._sync import run

        rows.extend(Row(*found) for found in run(_live(settings)))
    return rows
