"""Structured output helpers: strict schemas for Graphiti's response models, tolerant parsing."""

from __future__ import annotations

import inspect

import pydantic
import pytest
from pydantic import BaseModel

from graphmem.providers.structured import extract_json, parse_model, strict_schema


class Inner(BaseModel):
    a: int = 1
    b: str | None


class Outer(BaseModel):
    x: str | None
    y: list[int] = []
    items: list[Inner] = []


def _closed(node, path="root"):
    if isinstance(node, dict):
        if node.get("type") == "object" or "properties" in node:
            assert node["additionalProperties"] is False, path
            assert set(node["required"]) == set(node["properties"]), path
        for key in ("default", "title", "minLength"):
            assert key not in node, path
        for k, v in node.items():
            _closed(v, f"{path}/{k}")
    elif isinstance(node, list):
        for i, v in enumerate(node):
            _closed(v, f"{path}[{i}]")


def test_strict_schema_closes_every_graphiti_response_model():
    import graphiti_core.prompts.dedupe_edges as de
    import graphiti_core.prompts.extract_edges as ee
    import graphiti_core.prompts.extract_nodes as en

    models = [o for mod in (de, ee, en) for o in vars(mod).values()
              if inspect.isclass(o) and issubclass(o, BaseModel) and o.__module__ == mod.__name__]
    assert len(models) >= 5
    for model in models:
        _closed(strict_schema(model), model.__name__)


def test_optional_fields_become_nullable_and_nulls_fall_back_to_defaults():
    schema = strict_schema(Outer)
    assert {"type": "null"} in schema["properties"]["y"]["anyOf"]
    parsed = parse_model('{"x": null, "y": null, "items": [{"a": null, "b": null}]}', Outer)
    assert parsed == Outer(x=None, y=[], items=[Inner(a=1, b=None)])


def test_real_errors_still_fail():
    with pytest.raises(pydantic.ValidationError):
        parse_model('{"x": null, "items": [{"a": "not a number", "b": null}]}', Outer)
    with pytest.raises(pydantic.ValidationError):
        parse_model('{"y": [1]}', Outer)  # x is required (nullable, but must be given)


def test_extract_json_from_prose_and_fences():
    assert extract_json('Here you go:\n```json\n{"a": 1}\n```\nthanks') == {"a": 1}
    assert extract_json('The answer is {"a": [1, 2]} as requested.') == {"a": [1, 2]}
    assert extract_json(' [1, 2] ') == [1, 2]
    with pytest.raises(ValueError, match="no JSON"):
        extract_json("no json here {broken")
