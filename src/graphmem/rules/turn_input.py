"""Validation of the session API's arguments: each failure names the argument, nothing is written."""

from __future__ import annotations

from typing import Any

import pydantic
from pydantic import BaseModel, ConfigDict, Field, field_validator

from graphmem.errors import ValidationError, field_name, first_problem
from graphmem.models import check_json, no_nul


def text_ok(v: str, what: str = "text") -> str:
    """Text a file can hold (no NUL, no lone surrogate) that is not blank."""
    no_nul(v, what)
    if not v.strip():
        raise ValueError("is empty")
    return v


class _Input(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid")


class StartInput(_Input):
    workspace: str | None = Field(default=None, max_length=4096)
    model: str | None = Field(default=None, max_length=256)
    mode: str | None = Field(default=None, max_length=256)

    @field_validator("workspace", "model", "mode")
    @classmethod
    def _clean(cls, v: str | None) -> str | None:
        return None if v is None else text_ok(v).strip()


class TurnInput(_Input):
    role: str = Field(max_length=64)
    content: str
    model: str | None = Field(default=None, max_length=256)
    tokens: int | None = Field(default=None, ge=0, le=10**12)
    metadata: dict[str, Any] | None = None

    @field_validator("role")
    @classmethod
    def _role(cls, v: str) -> str:
        v = text_ok(v).strip()
        if any(c in v for c in "\r\n"):
            raise ValueError("must be a single line")
        return v

    @field_validator("content")
    @classmethod
    def _content(cls, v: str) -> str:
        return text_ok(v)


class StepInput(_Input):
    name: str = Field(max_length=512)
    status: str = Field(max_length=128)
    payload: dict[str, Any] | list | str | int | float | bool | None = None

    @field_validator("name", "status")
    @classmethod
    def _clean(cls, v: str) -> str:
        return text_ok(v).strip()


def validate(model: type[BaseModel], data: dict) -> Any:
    """Validate one call's arguments; the error names the argument."""
    try:
        return model.model_validate(data)
    except pydantic.ValidationError as exc:
        loc, msg = first_problem(exc)
        raise ValidationError(msg, field=field_name(*loc) or model.__name__) from None


def json_value(value: Any, field: str) -> Any:
    """Refuse what JSON cannot hold (NaN, sets, objects, lone surrogates, deep nesting) before
    anything is written; the error names where (``metadata.a[2]``)."""
    return check_json(value, field)


def check_limit(value: Any, field: str = "limit", top: int = 100_000) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= top:
        raise ValidationError(f"must be an integer from 1 to {top}", field=field)
    return value
