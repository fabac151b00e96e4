"""Validation of the session API's arguments: each failure names the argument, nothing is written."""

from __future__ import annotations

import math
from datetime import datetime, timezone
from typing import Any

import pydantic
from pydantic import BaseModel, ConfigDict, Field, field_validator

from .errors import ValidationError
from .models import check_json, no_surrogate, utcnow


def text_ok(v: str, what: str = "text") -> str:
    if "\x00" in v:
        raise ValueError(f"{what} contains a NUL byte")
    no_surrogate(v, what)
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
        err = exc.errors()[0]
        field = ".".join(str(p) for p in err.get("loc", ())) or model.__name__
        msg = str(err.get("msg", "is invalid")).removeprefix("Value error, ")
        raise ValidationError(msg, field=field) from None


def json_value(value: Any, field: str) -> Any:
    """Refuse what JSON cannot hold (NaN, sets, objects, lone surrogates, deep nesting) before
    anything is written; the error names where (``metadata.a[2]``)."""
    return check_json(value, field)


def to_time(value: Any, field: str = "at") -> datetime:
    """``at`` as given by a caller (datetime, epoch seconds or ISO text) -> aware UTC datetime."""
    if value is None:
        return utcnow()
    if isinstance(value, datetime):
        t = value if value.tzinfo else value.astimezone()  # naive means local time, as in Python
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        if not math.isfinite(value) or not 0 <= value < 1e11:
            raise ValidationError("must be epoch seconds between 1970 and year 5000", field=field)
        t = datetime.fromtimestamp(value, timezone.utc)
    elif isinstance(value, str):
        try:
            t = datetime.fromisoformat(value)
        except ValueError:
            raise ValidationError("must be a datetime, epoch seconds or ISO 8601 text",
                                  field=field) from None
        t = t if t.tzinfo else t.replace(tzinfo=timezone.utc)
    else:
        raise ValidationError(f"must be a datetime or epoch seconds, got {type(value).__name__}",
                              field=field)
    return t.astimezone(timezone.utc)


def check_limit(value: Any, field: str = "limit", top: int = 100_000) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= top:
        raise ValidationError(f"must be an integer from 1 to {top}", field=field)
    return value
