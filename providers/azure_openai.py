"""Azure OpenAI: the OpenAI bodies on ``/openai/deployments/{deployment}/...?api-version=``.

Auth is the ``api-key`` header. The deployment picks the model, so bodies carry no ``model``.
``AZURE_OPENAI_BASE_URL`` may be the resource root (``https://<name>.openai.azure.com``) or any
URL under it (for example ``.../openai/v1``): the part from ``/openai`` on is ignored.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from .http import VendorHTTP, endpoint_problems, vendor_http
from .openai import OpenAIChat, OpenAIEmbedder

DEFAULT_DIM = 1536  # text-embedding-3-small and ada-002; set AZURE_OPENAI_EMBEDDING_DIM otherwise


def resource_root(base_url: str) -> str:
    """The resource URL without any ``/openai/...`` suffix."""
    base = base_url.rstrip("/")
    cut = base.find("/openai")
    return base[:cut] if cut != -1 else base


def _http(settings: Any) -> VendorHTTP:
    cfg = settings.providers.azure_openai
    key = cfg.api_key.get_secret_value() if cfg.api_key else ""
    return vendor_http("azure_openai", resource_root(cfg.base_url or ""), {"api-key": key}, settings,
                      key_env="AZURE_OPENAI_API_KEY", secret=key)


def _path(deployment: str, op: str) -> str:
    return f"/openai/deployments/{quote(deployment, safe='')}/{op}"


def make_llm(settings: Any) -> OpenAIChat:
    """The chat deployment named by AZURE_OPENAI_LLM_DEPLOYMENT."""
    cfg = settings.providers.azure_openai
    dep = cfg.llm_deployment or ""
    return OpenAIChat(f"azure_openai/{dep}", _http(settings), _path(dep, "chat/completions"), None,
                      params={"api-version": cfg.api_version})


def make_embedder(settings: Any) -> OpenAIEmbedder:
    """The embedding deployment named by AZURE_OPENAI_EMBEDDING_DEPLOYMENT."""
    cfg = settings.providers.azure_openai
    dep = cfg.embedding_deployment or ""
    return OpenAIEmbedder(f"azure_openai/{dep}", cfg.embedding_dim or DEFAULT_DIM, _http(settings),
                          _path(dep, "embeddings"), None, params={"api-version": cfg.api_version},
                          send_dimensions=cfg.embedding_dim is not None)


def validate(settings: Any, role: str) -> list[str]:
    """Problems that stop this provider from working, in plain words."""
    cfg = settings.providers.azure_openai
    problems = endpoint_problems("azure_openai", cfg.base_url,
                                 "AZURE_OPENAI_BASE_URL",
                                 cfg.api_key, "AZURE_OPENAI_API_KEY",
                                 url_hint="https://<resource>.openai.azure.com")
    if role == "llm" and not cfg.llm_deployment:
        problems.append("azure_openai LLM needs AZURE_OPENAI_LLM_DEPLOYMENT")
    if role == "embedder" and not cfg.embedding_deployment:
        problems.append("azure_openai embedder needs AZURE_OPENAI_EMBEDDING_DEPLOYMENT")
    return problems
