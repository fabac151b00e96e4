"""The shapes graphmem takes in and hands back: validated inputs, memory items, hits, reports."""

from __future__ import annotations

import hashlib
import math
import os
import posixpath
import re
import unicodedata
from datetime import datetime, timezone
from pathlib import Path, PurePosixPath, PureWindowsPath
from typing import Any, Literal, TypeVar

import pydantic
from pydantic import BaseModel, ConfigDict, Field, field_validator

from .errors import NotFoundError, ValidationError, field_name, first_problem

Kind = Literal["insight", "file", "pattern", "gotcha", "turn", "step", "fact"]
KINDS: tuple[str, ...] = ("insight", "file", "pattern", "gotcha", "turn", "step", "fact")

M = TypeVar("M", bound=BaseModel)


_SURROGATE = re.compile("[\ud800-\udfff]")
MAX_DEPTH = 100  # nesting levels a JSON value (insight extras, metadata, payload) may have


def no_nul(value: str, what: str = "text") -> str:
    """Refuse a NUL byte and a lone surrogate: the files cannot hold them."""
    if "\x00" in value:
        raise ValueError(f"{what} contains a NUL byte")
    return no_surrogate(value, what)


def no_surrogate(value: str, what: str = "text") -> str:
    """Refuse a lone surrogate (e.g. from undecodable bytes): UTF-8 files cannot hold it."""
    m = _SURROGATE.search(value)
    if m:
        raise ValueError(f"{what} contains a lone surrogate (U+{ord(m.group()):04X}) at "
                         f"character {m.start()}, which UTF-8 cannot store")
    return value


def _deeper(where: str, step: str, depth: int) -> str:
    """The path of a nested value, cut after a few levels so an error message stays short."""
    return where + step if depth < 6 else where if where.endswith("...") else where + "..."


def check_json(value: Any, field: str, max_depth: int = MAX_DEPTH) -> Any:
    """Refuse what a JSON file cannot hold exactly, naming where: non-JSON types (sets, bytes,
    objects), non-string keys, NaN and infinities, lone surrogates, nesting past ``max_depth``.

    Walks iteratively, so a list nested 100,000 deep is refused rather than overflowing the stack.
    """
    stack = [(value, field, 0)]
    while stack:
        v, where, depth = stack.pop()
        if isinstance(v, str):
            try:
                no_surrogate(v, "text")
            except ValueError as exc:
                raise ValidationError(str(exc), field=where) from None
        elif v is None or isinstance(v, (bool, int)):
            continue
        elif isinstance(v, float):
            if v != v or v in (float("inf"), float("-inf")):
                raise ValidationError(f"must be a finite number, got {v}", field=where)
        elif isinstance(v, (dict, list, tuple)):
            if depth >= max_depth:
                raise ValidationError(f"nests deeper than {max_depth} levels", field=where)
            if isinstance(v, dict):
                for k, inner in v.items():
                    if not isinstance(k, str):
                        raise ValidationError(f"keys must be strings, got {type(k).__name__} {k!r}",
                                              field=where)
                    try:
                        no_surrogate(k, "key")
                    except ValueError as exc:
                        raise ValidationError(str(exc), field=where) from None
                    stack.append((inner, _deeper(where, f".{k}", depth), depth + 1))
            else:
                stack.extend((inner, _deeper(where, f"[{i}]", depth), depth + 1)
                             for i, inner in enumerate(v))
        else:
            raise ValidationError(f"must be JSON (text, number, true/false, null, list or "
                                  f"mapping), got {type(v).__name__}", field=where)
    return value


def check_relative_path(path: str) -> str:
    """Refuse absolute paths and paths that climb out of their folder with ``..``."""
    no_nul(path, "path")
    if not path.strip():
        raise ValueError("path is empty")
    if PurePosixPath(path).is_absolute() or PureWindowsPath(path).is_absolute():
        raise ValueError(f"path {path!r} must be relative to the project, not absolute")
    depth = 0
    for part in re.split(r"[\\/]+", path):
        if part == "..":
            depth -= 1
            if depth < 0:
                raise ValueError(f"path {path!r} points outside the project folder")
        elif part not in ("", "."):
            depth += 1
    return path


def project_relative(path: str, root: str | Path) -> str:
    """An absolute ``path`` inside the project ``root``, relative to it. Its folders are resolved
    (``/tmp`` behind a link, a linked checkout), the file itself is not: a symlinked file stays
    itself. ValueError when it lies outside."""
    p, base = Path(os.path.abspath(path)), Path(root).resolve()
    for cand in (p, p.parent.resolve() / p.name):
        try:
            return cand.relative_to(base).as_posix()
        except ValueError:
            continue
    raise ValueError(f"{path} is outside the project {root}")


def project_path(path: str, root: str | Path | None) -> str:
    """A file path as the project names it: an absolute one inside ``root`` made relative,
    ``\\`` read as ``/``, ``./`` and ``a/../`` folded (``src/../x.py`` is ``x.py``). ValueError
    when it is empty, climbs out, or is absolute and outside ``root`` (or there is no root)."""
    if root is not None and Path(path).is_absolute():
        path = project_relative(path, root)
    check_relative_path(path)
    return posixpath.normpath(path.replace("\\", "/"))


def check_folders(**folders: Any) -> None:
    """Before a ``Memory`` opens: each named folder given (``spec=``, ``project=``, ``root=``)
    must exist, else a NotFoundError says which (``spec folder not found: PATH``)."""
    for what, folder in folders.items():
        if folder is not None and not os.path.isdir(folder):
            raise NotFoundError(f"{what} folder not found: {folder}")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="allow", strict=True, str_strip_whitespace=False)


def _no_nul_in(value: Any, depth: int = 0) -> Any:
    """Refuse a NUL byte in any string of a JSON value (keys too)."""
    if isinstance(value, str):
        no_nul(value)
    elif isinstance(value, list) and depth < 32:
        for v in value:
            _no_nul_in(v, depth + 1)
    elif isinstance(value, dict) and depth < 32:
        for k, v in value.items():
            _no_nul_in(k, depth + 1)
            _no_nul_in(v, depth + 1)
    return value


class _Finding(_Strict):
    """An object of today's Auto-Claude shape; its text fields must be strings."""

    @field_validator("*")
    @classmethod
    def _texts(cls, v: Any) -> Any:
        return _no_nul_in(v)

    def model_post_init(self, __context: Any) -> None:
        _no_nul_in(self.model_extra or {})


class FileInsight(_Finding):
    """``discoveries.file_insights[]``: one file a session read or changed."""

    file_path: str
    purpose: str | None = None
    change_type: str | None = None
    key_elements: list[str] | None = None
    file_type: str | None = None
    key_exports: list[str] | None = None
    dependencies: list[str] | None = None
    lines_added: int | None = None
    lines_of_code: int | None = None

    @field_validator("file_path")
    @classmethod
    def _path(cls, v: str) -> str:
        return check_relative_path(v)


class PatternFound(_Finding):
    pattern: str | None = None
    description: str | None = None
    significance: str | None = None


class GotchaFound(_Finding):
    gotcha: str | None = None
    description: str | None = None
    risk: str | None = None
    mitigation: str | None = None


class Recommendation(_Finding):
    priority: str | None = None
    category: str | None = None
    recommendation: str | None = None
    rationale: str | None = None


class ApproachOutcome(_Finding):
    status: str | None = None
    summary: str | None = None
    key_accomplishments: list[str] | None = None


class Discoveries(_Strict):
    """What a session found: file purposes, patterns, gotchas (the reference's keys), and the
    objects today's Auto-Claude writes beside them (``insight_shapes`` reads both)."""

    files_understood: dict[str, str] = Field(default_factory=dict)
    patterns_found: list[str] = Field(default_factory=list)
    gotchas_encountered: list[str] = Field(default_factory=list)
    file_insights: list[FileInsight] | None = None
    patterns_discovered: list[str | PatternFound] | None = None
    gotchas_discovered: list[str | GotchaFound] | None = None
    recommendations: list[str | Recommendation] | None = None
    approach_outcome: ApproachOutcome | None = None
    changed_files: list[str] | None = None

    @field_validator("files_understood")
    @classmethod
    def _paths(cls, v: dict[str, str]) -> dict[str, str]:
        for path, purpose in v.items():
            check_relative_path(path)
            no_nul(purpose, f"purpose of {path!r}")
        return v

    @field_validator("patterns_found", "gotchas_encountered")
    @classmethod
    def _texts(cls, v: list[str]) -> list[str]:
        for s in v:
            no_nul(s)
        return v


class SessionInsights(_Strict):
    """One session's learnings, in the reference's ``session_NNN.json`` keys."""

    subtasks_completed: list[str] = Field(default_factory=list)
    discoveries: Discoveries = Field(default_factory=Discoveries)
    what_worked: list[str] = Field(default_factory=list)
    what_failed: list[str] = Field(default_factory=list)
    recommendations_for_next_session: list[str] = Field(default_factory=list)
    subtask_id: str | None = None
    success: bool | None = None
    changed_files: list[str] | None = None
    approach_outcome: ApproachOutcome | None = None

    @field_validator("subtasks_completed", "what_worked", "what_failed",
                     "recommendations_for_next_session")
    @classmethod
    def _texts(cls, v: list[str]) -> list[str]:
        for s in v:
            no_nul(s)
        return v


class SessionNumber(BaseModel):
    """A 1-based session number."""

    session_num: int = Field(strict=True, ge=1, le=999_999)


# Line breaks other than "\n" (CR, CRLF, VT, FF, FS/GS/RS, NEL, U+2028/9): a line-based reader
# (the reference reads with universal newlines; ``str.splitlines`` splits on all of them) would
# see several lines in what graphmem stores as one bullet, so they become a space.
_LINE_BREAKS = re.compile("\r\n|[\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")


class Note(BaseModel):
    """A single gotcha or pattern."""

    text: str = Field(strict=True, min_length=1)

    @field_validator("text")
    @classmethod
    def _clean(cls, v: str) -> str:
        no_nul(v)
        v = _LINE_BREAKS.sub(" ", v)
        if not v.strip():
            raise ValueError("is empty")
        if "\n" in v.strip():
            raise ValueError("must be a single line (the file stores one '- ' bullet per item)")
        return v.strip()


class CodebaseMap(BaseModel):
    """File path -> purpose."""

    files: dict[str, str] = Field(strict=True)

    @field_validator("files")
    @classmethod
    def _paths(cls, v: dict[str, str]) -> dict[str, str]:
        for path, purpose in v.items():
            if path == "_metadata":
                raise ValueError("'_metadata' is reserved")
            check_relative_path(path)
            no_nul(purpose, f"purpose of {path!r}")
        return v


def parse(model: type[M], data: Any, what: str, wrapped: bool = False) -> M:
    """Validate ``data`` into ``model``; a failure becomes one ``ValidationError`` naming the field.

    ``wrapped``: ``data`` is ``{field: value}`` around one argument, so the field name is dropped.
    """
    try:
        return model.model_validate(data)
    except pydantic.ValidationError as exc:
        loc, msg = first_problem(exc, skip=1 if wrapped else 0)
        raise ValidationError(msg, field=field_name(what, *loc)) from None


def normalise(text: str) -> str:
    """Text as compared for dedupe and ids: NFKC, casefolded, whitespace collapsed."""
    return " ".join(unicodedata.normalize("NFKC", text).casefold().split())


def hash_id(*parts: str) -> str:
    """The one id hash: 24 hex digits of the SHA-256 of ``parts`` joined by US (0x1f); stored
    in files, the index and the graph, so it never changes."""
    return hashlib.sha256("\x1f".join(parts).encode("utf-8", "surrogatepass")).hexdigest()[:24]


def stable_id(*parts: str) -> str:
    """A short, stable id from an item's scope and normalised content."""
    return hash_id(*(normalise(p) for p in parts))


# graphmem's one rule for a time without a zone, in files and in calls alike: it is UTC (the
# files are shared between machines, whose local zones differ).
def _aware(t: datetime) -> datetime:
    return t if t.tzinfo else t.replace(tzinfo=timezone.utc)


def parse_iso(value: Any) -> datetime | None:
    """An ISO 8601 time as an aware datetime (naive means UTC); None when it is not one."""
    if not isinstance(value, str):
        return None
    try:
        return _aware(datetime.fromisoformat(value))
    except ValueError:
        return None


def to_time(value: Any, field: str = "at") -> datetime:
    """A time as a caller gives it (datetime, epoch seconds or ISO text; naive means UTC) ->
    an aware UTC datetime; None -> now. A ValidationError names ``field``."""
    if value is None:
        return utcnow()
    t: datetime | None
    if isinstance(value, datetime):
        t = _aware(value)
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        if not math.isfinite(value) or not 0 <= value < 1e11:
            raise ValidationError("must be epoch seconds between 1970 and year 5000", field=field)
        t = datetime.fromtimestamp(value, timezone.utc)
    elif isinstance(value, str):
        t = parse_iso(value)
        if t is None:
            raise ValidationError("must be a datetime, epoch seconds or ISO 8601 text",
                                  field=field)
    else:
        raise ValidationError(f"must be a datetime or epoch seconds, got {type(value).__name__}",
                              field=field)
    return t.astimezone(timezone.utc)


def utcnow() -> datetime:
    """Timezone-aware now in UTC."""
    return datetime.now(timezone.utc)


class MemoryItem(BaseModel):
    """One searchable memory, derived from the files. Indexes and the graph store these."""

    id: str
    kind: Kind
    text: str
    project: str  # the project key (``identity``): the same on every machine
    spec: str | None = None  # spec folder, relative to the project root
    session: str | None = None  # session number ("3") or episodic session id
    time: datetime = Field(default_factory=utcnow)
    metadata: dict[str, Any] = Field(default_factory=dict)
    source: str = ""  # the file that holds it, relative to the project root

    def content_hash(self) -> str:
        """Hash of what is embedded: unchanged text is never embedded twice."""
        return hashlib.sha256(self.text.encode("utf-8")).hexdigest()[:16]


class Hit(BaseModel):
    """One search result; every backend returns this shape."""

    id: str
    kind: Kind
    text: str
    score: float
    project: str
    spec: str | None = None
    session: str | None = None
    time: datetime | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)
    source: str = ""  # relative to the project root
    backend: Literal["local", "graph"] = "local"
    local_path: str | None = None  # the source on this machine (None: project not checked out here)

    def replaced(self, **update: Any) -> "Hit":
        """A copy with ``update`` set, as ``model_copy(update=...)`` (shallow, unvalidated) at
        half its cost: a search copies each of its ~100 candidates at several stages."""
        new = self.__class__.__new__(self.__class__)
        fields = self.__dict__.copy()
        fields.update(update)
        object.__setattr__(new, "__dict__", fields)
        object.__setattr__(new, "__pydantic_fields_set__", self.__pydantic_fields_set__ | update.keys())
        object.__setattr__(new, "__pydantic_extra__", self.__pydantic_extra__)
        object.__setattr__(new, "__pydantic_private__", self.__pydantic_private__)
        return new


IndexOutcome = Literal["indexed", "off", "failed", "queued"]  # what the index did ("queued": write_behind)
GraphOutcome = Literal["written", "queued", "off"]  # what the graph did with it


class SaveReport(BaseModel):
    """Which backends took a write: ``files`` always, then ``index`` and ``graph``."""

    files: Literal["written", "unchanged"] = "written"
    index: IndexOutcome = "off"
    graph: GraphOutcome = "off"
    items: int = 0
    path: str = ""
    detail: str | None = None

    def __str__(self) -> str:
        return f"files={self.files} index={self.index} graph={self.graph} items={self.items}"
