"""Graph nodes as this machine's types, checked as a local write is: anyone holding a shared
server's password can write any node, so what a node holds is data to validate, never trusted
as it comes.

Taken from a node: its kind, text, session, time (never later than now) and source file
(relative to the project root, never outside it), and its metadata without what a search computes on this machine
(``LOCAL_ONLY``: validity, freshness). ``author`` and ``host`` are what the writer claims; this
machine shows them, and never decides anything by them (``team.owner`` is what it owns).
"""

from __future__ import annotations

import json
import posixpath
from typing import Any

from ..errors import ValidationError
from ..models import parse_iso, utcnow

# Metadata a search sets on this machine (validity from the spec's log, freshness from the
# code here, why a hit was removed): a node's own values are dropped, never shown or trusted.
LOCAL_ONLY = ("validity", "freshness", "removed")
_NAMES = ("gm_kind", "summary", "gm_project", "gm_spec", "gm_session", "gm_time", "gm_meta",
          "gm_source")


def inside(value: str | None, field: str) -> str | None:
    """``value`` as a path relative to the project root that stays inside it (None for none);
    a ValidationError naming ``field`` for an absolute path or one that climbs out."""
    if not value:
        return None
    norm = posixpath.normpath(value.replace("\\", "/"))
    if "\x00" in value or posixpath.isabs(norm) or norm == ".." or norm.startswith("../") \
            or (len(norm) > 1 and norm[1] == ":"):
        raise ValidationError(f"must be a path inside the project, got {value[:80]!r}", field=field)
    return value


def metadata_of(raw: str | None) -> dict[str, Any]:
    """A node's metadata (its JSON text) without ``LOCAL_ONLY`` keys; {} when it is not a JSON
    object."""
    try:
        meta = json.loads(raw) if raw else {}
    except (ValueError, RecursionError):
        return {}
    if not isinstance(meta, dict):
        return {}
    return {k: v for k, v in meta.items() if k not in LOCAL_ONLY}


def fields(row: list, max_bytes: int, strict_paths: bool = True) -> dict[str, Any]:
    """A checked row of ``feed.fetch_items`` (uuid, then ``HIT_FIELDS``, a non-string being
    None) -> the keyword arguments of a ``MemoryItem``/``Hit`` (but ``project``); a
    ValidationError naming the node's field that fails. Not ``strict_paths``: a spec or source
    out of the project (an item written before project keys, with absolute paths) is dropped
    from the result instead."""
    uuid, *values = row[:9]
    for name, value in zip(_NAMES, values):
        if value is not None and len(value.encode("utf-8", "surrogatepass")) > max_bytes:
            raise ValidationError(f"is over the limit of {max_bytes} bytes "
                                  "(GRAPHMEM_MAX_ITEM_BYTES)", field=name)
    kind, text, _project, spec, session, when, meta, source = values
    if not isinstance(uuid, str) or not uuid:
        raise ValidationError("missing or not a string", field="uuid")
    if not kind or not text:
        raise ValidationError("missing or not a string", field="gm_kind" if not kind else "summary")
    out: dict[str, Any] = {"id": uuid, "kind": kind, "text": text, "session": session or None,
                           "metadata": metadata_of(meta)}
    for key, value, name in (("spec", spec, "gm_spec"), ("source", source, "gm_source")):
        try:
            out[key] = inside(value, name)
        except ValidationError:
            if strict_paths:
                raise
            out[key] = None
    out["source"] = out["source"] or ""
    t = parse_iso(when) if when else None
    if t is not None:  # a time to come is now: no node ranks as the newest forever
        out["time"] = min(t, utcnow())
    return out
