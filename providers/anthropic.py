"""Anthropic: the Messages API, with structured output through a forced tool call.

REST: ``POST {base}/v1/messages`` with ``x-api-key`` and ``anthropic-version`` headers. System
messages go in the top-level ``system`` field; the schema becomes one tool's ``input_schema`` and
``tool_choice`` forces it, so the reply's ``tool_use`` block carries the JSON object.
"""

from __future__ import annotations

from typing import Any, TypeVar

from pydantic import BaseModel

from ..errors import ProviderError
from .base import LLM
from .http import HTTPProvider, VendorHTTP, endpoint_problems, malformed, vendor_http
from .structured import generate_validated, normalise_messages, schema_name

T = TypeVar("T", bound=BaseModel)
API_VERSION = "2023-06-01"


def split_messages(messages: list[dict[str, str]]) -> tuple[str, list[dict[str, str]]]:
    """(system text, user/assistant turns) with same-role neighbours merged, starting with user."""
    system = "\n\n".join(m["content"] for m in messages if m["role"] == "system")
    turns: list[dict[str, str]] = []
    for m in messages:
        if m["role"] == "system":
            continue
        if turns and turns[-1]["role"] == m["role"]:
            turns[-1] = {"role": m["role"], "content": turns[-1]["content"] + "\n\n" + m["content"]}
        else:
            turns.append(dict(m))
    if not turns or turns[0]["role"] != "user":
        # The API requires the first turn to be the user's.
        turns.insert(0, {"role": "user", "content": "Continue."})
    return system, turns


class AnthropicLLM(HTTPProvider, LLM):
    """A Claude model on the Messages API."""

    def __init__(self, model: str, http: VendorHTTP):
        self.name = f"anthropic/{model}"
        self.model = model
        self.http = http

    async def _messages(self, messages: list[dict[str, str]], max_tokens: int, temperature: float,
                        extra: dict[str, Any] | None = None) -> dict[str, Any]:
        system, turns = split_messages(messages)
        body: dict[str, Any] = {"model": self.model, "max_tokens": max_tokens, "messages": turns,
                                "temperature": temperature}
        if system:
            body["system"] = system
        body.update(extra or {})
        data = await self.http.post("/v1/messages", body, what="message")
        if not isinstance(data, dict) or not isinstance(data.get("content"), list):
            raise malformed("anthropic", "message", data)
        if data.get("stop_reason") == "max_tokens":
            raise ProviderError(f"{self.name}: the reply was cut off at max_tokens; raise max_tokens",
                                provider="anthropic")
        return data

    async def generate(self, messages: list[dict[str, str]], *, max_tokens: int = 1024,
                       temperature: float = 0.0) -> str:
        """Chat messages -> the assistant's text."""
        data = await self._messages(normalise_messages(messages), max_tokens, temperature)
        texts: list[Any] = [b.get("text") for b in data["content"] if isinstance(b, dict) and b.get("type") == "text"]
        if not texts or not all(isinstance(t, str) for t in texts):
            raise malformed("anthropic", "message", data)
        return "".join(texts)

    async def generate_json(self, messages: list[dict[str, str]], schema: type[T], *,
                            max_tokens: int = 2048) -> T:
        """Structured output through a forced tool call, validated into ``schema``."""
        name = schema_name(schema)
        tool = {"name": name, "description": schema.__doc__.strip() if schema.__doc__ else
                f"Record the answer as {name}.", "input_schema": schema.model_json_schema()}

        async def call(msgs: list[dict[str, str]]) -> Any:
            data = await self._messages(msgs, max_tokens, 0.0, {
                "tools": [tool], "tool_choice": {"type": "tool", "name": name}})
            for block in data["content"]:
                if isinstance(block, dict) and block.get("type") == "tool_use" and block.get("name") == name:
                    if not isinstance(block.get("input"), dict):
                        break
                    return block["input"]
            raise malformed("anthropic", "a forced tool call", data)

        return await generate_validated(self.name, normalise_messages(messages), schema, call)


def make_llm(settings: Any) -> AnthropicLLM:
    """The configured Claude model."""
    cfg = settings.providers.anthropic
    key = cfg.api_key.get_secret_value() if cfg.api_key else ""
    http = vendor_http("anthropic", cfg.base_url, {"x-api-key": key, "anthropic-version": API_VERSION},
                      settings, key_env="ANTHROPIC_API_KEY", secret=key)
    return AnthropicLLM(cfg.model, http)


def validate(settings: Any, role: str) -> list[str]:
    """Problems that stop this provider from working, in plain words."""
    cfg = settings.providers.anthropic
    problems = endpoint_problems("anthropic", cfg.base_url, "ANTHROPIC_BASE_URL", cfg.api_key,
                                 "ANTHROPIC_API_KEY")
    if not cfg.model:
        problems.append("anthropic LLM needs GRAPHITI_ANTHROPIC_MODEL")
    return problems
