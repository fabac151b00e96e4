"""Structured output shared by every LLM: schemas vendors accept, and tolerant parsing into pydantic.

Models reply with JSON wrapped in prose or code fences, with nulls for fields that have defaults,
or with small schema mistakes. ``parse_model`` absorbs the harmless ones; ``generate_validated``
gives the model one chance to repair a reply that does not validate, then raises ProviderError.
"""

from __future__ import annotations

import copy
import json
import re
from typing import Any, Awaitable, Callable, TypeVar

import pydantic
from pydantic import BaseModel

from ..errors import ProviderError

T = TypeVar("T", bound=BaseModel)

# Keywords OpenAI's strict mode rejects; they only constrain values, so dropping them is safe
# (pydantic still enforces them when the reply is validated).
_UNSUPPORTED = ("default", "title", "format", "pattern", "minLength", "maxLength", "minimum",
                "maximum", "exclusiveMinimum", "exclusiveMaximum", "minItems", "maxItems",
                "uniqueItems", "examples", "discriminator", "multipleOf")


def schema_name(schema: type[BaseModel]) -> str:
    """A name vendors accept for a schema or tool: letters, digits, _ and -, at most 64."""
    return re.sub(r"[^A-Za-z0-9_-]", "_", schema.__name__)[:64] or "response"


def json_schema(schema: type[BaseModel]) -> dict[str, Any]:
    """The plain JSON schema of a pydantic model."""
    return schema.model_json_schema()


def strict_schema(schema: type[BaseModel]) -> dict[str, Any]:
    """A schema for OpenAI strict mode: every property required (optional ones nullable), closed objects."""
    root = copy.deepcopy(schema.model_json_schema())

    def fix(node: Any) -> None:
        if isinstance(node, dict):
            for key in _UNSUPPORTED:
                node.pop(key, None)
            if node.get("type") == "object" or "properties" in node:
                props = node.setdefault("properties", {})
                required = set(node.get("required", []))
                for name, sub in props.items():
                    if name not in required and not _nullable(sub):
                        props[name] = {"anyOf": [sub, {"type": "null"}]}
                node["required"] = list(props)
                node["additionalProperties"] = False
            for value in list(node.values()):
                fix(value)
        elif isinstance(node, list):
            for value in node:
                fix(value)

    fix(root)
    return root


def _nullable(sub: dict[str, Any]) -> bool:
    return sub.get("type") == "null" or any(o.get("type") == "null" for o in sub.get("anyOf", []))


def extract_json(text: str) -> Any:
    """The first JSON value in a reply, allowing code fences and prose around it."""
    text = text.strip()
    fence = re.search(r"```(?:json)?\s*(.*?)```", text, re.S)
    if fence:
        text = fence.group(1).strip()
    try:
        return json.loads(text)
    except ValueError:
        pass
    decoder = json.JSONDecoder()
    for i, ch in enumerate(text):
        if ch in "{[":
            try:
                return decoder.raw_decode(text[i:])[0]
            except ValueError:
                continue
    raise ValueError("no JSON object in the reply")


def _drop_null_at(data: Any, loc: tuple) -> bool:
    """Remove the key at ``loc`` when its value is null; True when something was removed."""
    node = data
    for part in loc[:-1]:
        try:
            node = node[part]
        except (KeyError, IndexError, TypeError):
            return False
    if isinstance(node, dict) and loc and loc[-1] in node and node[loc[-1]] is None:
        del node[loc[-1]]
        return True
    return False


def parse_model(data: Any, schema: type[T]) -> T:
    """Validate ``data`` (text or decoded JSON) into ``schema``.

    A null where the field is not nullable is dropped so the field's default applies: strict
    schemas make every optional field nullable, and models send null for "not given".
    """
    if isinstance(data, str):
        data = extract_json(data)
    data = copy.deepcopy(data)
    for _ in range(20):  # each round removes at least one null; bounded for safety
        try:
            return schema.model_validate(data)
        except pydantic.ValidationError as exc:
            if not any(_drop_null_at(data, tuple(e["loc"])) for e in exc.errors()):
                raise
    return schema.model_validate(data)


async def generate_validated(provider: str, messages: list[dict[str, str]], schema: type[T],
                             call: Callable[[list[dict[str, str]]], Awaitable[Any]]) -> T:
    """Call the model, validate, and on a bad reply ask once for a corrected one."""
    reply = await call(messages)
    try:
        return parse_model(reply, schema)
    except (ValueError, pydantic.ValidationError) as exc:
        problem = _describe(exc)
    shown = reply if isinstance(reply, str) else json.dumps(reply)
    retry = list(messages) + [
        {"role": "assistant", "content": shown[:4000]},
        {"role": "user", "content": f"That reply does not match the required JSON schema: {problem}. "
                                    "Reply again with only the corrected JSON."}]
    reply = await call(retry)
    try:
        return parse_model(reply, schema)
    except (ValueError, pydantic.ValidationError) as exc:
        raise ProviderError(f"{provider}: the model's reply does not match {schema.__name__} after one "
                            f"repair attempt ({_describe(exc)}); try a stronger model",
                            provider=provider) from None


def _describe(exc: Exception) -> str:
    if isinstance(exc, pydantic.ValidationError):
        errs = exc.errors()[:3]
        return "; ".join(f"{'.'.join(map(str, e['loc'])) or 'root'}: {e['msg']}" for e in errs)
    return str(exc)


def normalise_messages(messages: list[dict[str, str]]) -> list[dict[str, str]]:
    """Check chat messages: a list of {role, content} with a known role and text content."""
    from ..errors import ValidationError

    if not isinstance(messages, list) or not messages:
        raise ValidationError("expected a non-empty list of chat messages", field="messages")
    out = []
    for i, msg in enumerate(messages):
        role = msg.get("role") if isinstance(msg, dict) else None
        content = msg.get("content") if isinstance(msg, dict) else None
        if role not in ("system", "user", "assistant") or not isinstance(content, str):
            raise ValidationError(f"message {i} needs role system|user|assistant and text content",
                                  field="messages")
        out.append({"role": role, "content": content})
    return out
