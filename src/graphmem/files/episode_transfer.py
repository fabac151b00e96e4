"""An export's episodes placed in another memory folder: the shape of an episode line, the
session as it will be written here, and its writing, never over a session here.

An episode is one folder of ``files/episodes.py`` (``session.json``, ``turns.jsonl``,
``steps.jsonl``); an export carries it whole on one line. The rule (the README states it): an
episode keeps its session id (``ses-`` and 16 random hex digits, so two projects' ids do not
meet). An id already here (a session, a link, anything by that name) is never written over:
"already here" when its turns, steps and ``session.json`` (but for this machine's paths) are what
the export holds, so importing twice, or importing this project's export back where its episodes
came from, writes nothing. One that "grew" there since (its turns and steps here are the first
of the export's, its ``session.json`` differs only in what changes as a session goes on: ended,
token total, a newer summary) gets the new tail appended as ``record_turn`` appends (a torn last
line here is cut off first, so a crash mid-append is finished by the next import) and its
``session.json`` replaced atomically. Else it is kept as it is and reported skipped. A new
one is written whole into a hidden folder beside the others and renamed into place under the
session's lock: a reader sees all of it or none of it. Its ``session.json`` names this machine's
folders (``project``, ``spec``, and ``workspace`` when that was the project).
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from ..errors import StorageError, ValidationError
from ..models import check_json, parse_iso
from .atomic import fsync_dir, write_all
from .episodes import STEPS, TURNS, EpisodeStore, check_session_id, encode_lines

if TYPE_CHECKING:
    from ..identity import Project

_T = Any
NULL = type(None)
# (required, optional) fields of a turn, a step and a session.json, with their JSON types
TURN: tuple[dict[str, _T], dict[str, _T]] = (
    {"id": str, "index": int, "at": str, "role": str, "content": str},
    {"model": (str, NULL), "tokens": (int, NULL), "metadata": (dict, NULL)})
STEP: tuple[dict[str, _T], dict[str, _T]] = (
    {"id": str, "index": int, "at": str, "name": str, "status": str}, {})
META: tuple[dict[str, _T], dict[str, _T]] = (
    {"session_id": str, "started_at": str},
    {k: (str, NULL) for k in ("workspace", "project", "spec", "model", "mode", "ended_at", "status",
                              "summary", "summary_updated_at")} | {"total_tokens": (int, NULL)})
PATHS = ("project", "spec", "workspace")  # this machine's folders: set here, never compared
GROWS = ("ended_at", "status", "total_tokens", "summary", "summary_updated_at")  # as it goes on


@dataclass
class Incoming:
    """One exported episode, as it will be written here once ``prepare``d."""

    where: str  # "<export> line N"
    spec: str | None  # its spec folder there
    sid: str
    source: str  # its folder there, relative to that project
    meta: dict
    turns: list[dict]
    steps: list[dict]


@dataclass
class Placed:
    """Where an incoming episode went: written here, or left out (``why``)."""

    incoming: Incoming
    new: bool
    why: str = ""
    since: tuple[int, int] | None = None  # grown: the turns and steps it held here before
    summary_was: str | None = None  # grown: its summary here before


def episode_lines(project: "Project", specs: list[Path]) -> list[dict]:
    """Every episode of ``specs`` as an export line (its files as stored)."""
    out = []
    for spec in specs:
        store = EpisodeStore(spec)
        for sid in store.session_ids():
            meta = store.read_session(sid)
            if meta is not None:
                out.append({"type": "episode", "spec": project.rel(spec), "session": sid,
                            "source": project.rel(store.session_dir(sid)), "meta": meta,
                            "turns": store.read_lines(sid, TURNS),
                            "steps": store.read_lines(sid, STEPS)})
    return out


def lost(count: int, version: int) -> str:
    """Why the ``count`` turns, steps or summary of one episode of an export are not imported."""
    if version < 4:
        return (f"an episode ({count} turns, steps or summary): a version {version} export does "
                "not carry its session.json, turns.jsonl and steps.jsonl whole: export it again "
                "with this graphmem")
    return f"an episode ({count} turns, steps or summary) whose episode line the export lacks"


def problem(rec: dict) -> tuple[str, str] | None:
    """(field, what is wrong) of an episode line (its ``type`` aside), None when it is one."""
    for name, types in (("spec", (str, NULL)), ("session", str), ("source", str), ("meta", dict),
                        ("turns", list), ("steps", list)):
        if name not in rec:
            return name, "is missing"
        if not isinstance(rec[name], types):
            return name, f"must be {_names(types)}, got {type(rec[name]).__name__}"
    try:
        sid = check_session_id(rec["session"])
    except ValidationError as exc:
        return "session", str(exc).split(": ", 1)[-1]
    if rec["source"].replace("\\", "/").rsplit("/", 2)[-2:] != ["episodes", sid]:
        return "source", f"must end in episodes/{sid}, got {rec['source']!r:.80}"
    for name in ("meta", "turns", "steps"):
        try:  # no lone surrogate, nothing deeper than graphmem writes
            check_json(rec[name], name)
        except ValidationError as exc:
            return exc.field or name, str(exc).split(": ", 1)[-1]
    found = _shape(rec["meta"], META, "meta")
    if found:
        return found
    if rec["meta"]["session_id"] != sid:
        return "meta.session_id", f"must be the line's session {sid}, got {rec['meta']['session_id']!r:.40}"
    for name, shape in (("turns", TURN), ("steps", STEP)):
        for n, r in enumerate(rec[name]):
            if not isinstance(r, dict):
                return f"{name}[{n}]", f"must be an object, got {type(r).__name__}"
            found = _shape(r, shape, f"{name}[{n}]")
            if found:
                return found
    return None


def _shape(rec: dict, shape: tuple[dict[str, _T], dict[str, _T]], at: str) -> tuple[str, str] | None:
    required, optional = shape
    for name, types in (*required.items(), *optional.items()):
        if name not in rec:
            if name in required:
                return f"{at}.{name}", "is missing"
            continue
        value = rec[name]
        if not isinstance(value, types) or isinstance(value, bool):
            return f"{at}.{name}", f"must be {_names(types)}, got {type(value).__name__}"
        if isinstance(value, int) and value < 0:
            return f"{at}.{name}", f"must not be negative, got {value}"
    return None


def _names(types: Any) -> str:
    types = types if isinstance(types, tuple) else (types,)
    return " or ".join("null" if t is NULL else t.__name__ for t in types)


def incoming(where: str, rec: dict) -> Incoming:
    """An episode line (``problem`` found none) as an incoming episode."""
    return Incoming(where, rec["spec"], rec["session"], rec["source"], rec["meta"], rec["turns"],
                    rec["steps"])


def folder_of(kind: str, source: str) -> str | None:
    """The episode folder an exported item comes from (a turn, a step, a session's summary), or
    None for an item of another file."""
    if kind in ("turn", "step") or "/episodes/" in source and source.endswith("/session.json"):
        return source.rsplit("/", 1)[0]
    return None


def held_sources(spec: str | None, source: str) -> set[tuple[str | None, str]]:
    """The (spec, source) of the item lines an episode line carries (its turns, steps, summary)."""
    return {(spec, f"{source}/{name}") for name in (TURNS, STEPS, "session.json")}


def prepare(inc: Incoming, clean: Callable[[Any], Any], root: Path, spec_dir: Path) -> Incoming:
    """The episode as it will be written here: redacted (``clean``), its paths this machine's."""
    meta = dict(clean(inc.meta))
    was = inc.meta.get("project")
    meta.update(project=str(root), spec=str(spec_dir))
    if inc.meta.get("workspace") in (None, was):
        meta["workspace"] = str(root)
    return Incoming(inc.where, inc.spec, inc.sid, inc.source, meta, clean(inc.turns),
                    clean(inc.steps))


def place(store: EpisodeStore, incoming: list[Incoming],
          then: Callable[[Placed], None] | None = None) -> list[Placed]:
    """Write each new episode whole (``incoming`` prepared) and the new tail of each one that grew
    there; any other whose id is here is left as it is. ``then(placed)`` runs after each write,
    under the session's lock (its derived rows)."""
    out: list[Placed] = []
    for inc in incoming:
        with store.lock(inc.sid):
            folder = store.session_dir(inc.sid)
            if os.path.lexists(folder):
                got = _compare(store, inc)
                if isinstance(got, str):
                    out.append(Placed(inc, False, got))
                    continue
                placed = Placed(_extend(store, inc, *got), False, "grew", got[1:],
                                got[0].get("summary"))
            else:
                _write(store, folder, inc)
                placed = Placed(inc, True)
            if then is not None:
                then(placed)
        out.append(placed)
    if store.fsync and any(p.new for p in out):
        fsync_dir(store.root)  # the renames, once
    return out


def _compare(store: EpisodeStore, inc: Incoming) -> str | tuple[dict, int, int]:
    """Why an episode whose id is here is not written, or (its session.json, turns, steps here)
    when it grew there since (caller holds the session's lock)."""
    kept = f"session {inc.sid} here holds other content: kept as it is (an import never " \
           "overwrites an episode; it appends only to one that grew at the source)"
    if not os.path.isfile(store.session_file(inc.sid)) or os.path.islink(store.session_file(inc.sid)):
        return kept  # read, it would be rebuilt from its turns: this import changes nothing here
    try:
        meta = store.read_session(inc.sid)
        turns = store.read_lines(inc.sid, TURNS, locked=True)  # a torn last line is cut off
        steps = store.read_lines(inc.sid, STEPS, locked=True)
    except (StorageError, OSError):  # a link, a file: not a session graphmem reads
        return kept
    if meta is None:
        return kept
    if (turns, steps) == (inc.turns, inc.steps) and _bare(meta) == _bare(inc.meta):
        return f"already here as session {inc.sid}"
    if inc.turns[:len(turns)] != turns or inc.steps[:len(steps)] != steps \
            or not _goes_on(meta, inc.meta):
        if turns[:len(inc.turns)] == inc.turns and steps[:len(inc.steps)] == inc.steps \
                and _goes_on(inc.meta, meta):
            return f"session {inc.sid} here has gone on past this export's: kept as it is"
        return kept
    return meta, len(turns), len(steps)


def _goes_on(here: dict, there: dict) -> bool:
    """Whether session.json ``there`` is ``here`` gone on: ended, tokens counted, summarised anew."""
    if _bare(here, GROWS) != _bare(there, GROWS):
        return False
    if here.get("ended_at") is not None:  # ending twice keeps the first end
        if any(here.get(k) != there.get(k) for k in ("ended_at", "status", "total_tokens")):
            return False
    elif here.get("status") not in ("active", there.get("status")):
        return False
    if here.get("summary") in (None, there.get("summary")):
        return True
    was, now = parse_iso(here.get("summary_updated_at")), parse_iso(there.get("summary_updated_at"))
    return now is not None and (was is None or now > was)  # the newer summary: never an older one


def _bare(meta: dict, also: tuple[str, ...] = ()) -> dict:
    return {k: v for k, v in meta.items() if k not in PATHS and k not in also}


def _extend(store: EpisodeStore, inc: Incoming, here: dict, turns: int, steps: int) -> Incoming:
    """Append the turns and steps past the first ``turns`` and ``steps`` (durably, as
    ``record_turn`` appends them) then replace session.json, keeping this machine's paths here
    (caller holds the lock) -> the episode as it now is here."""
    store.append(inc.sid, inc.turns[turns:], inc.steps[steps:])
    meta = {**inc.meta, **{k: here[k] for k in PATHS if k in here}}
    if meta != here:
        store.update_session(inc.sid, lambda _: meta)
    return Incoming(inc.where, inc.spec, inc.sid, inc.source, meta, inc.turns, inc.steps)


def _write(store: EpisodeStore, folder: Path, inc: Incoming) -> None:
    """The episode's files in a hidden folder, renamed to ``folder`` (caller holds the lock)."""
    tmp = Path(tempfile.mkdtemp(dir=store.root, prefix=f".importing-{inc.sid}."))  # mode 0o700
    try:
        files = [(TURNS, encode_lines(inc.turns)), (STEPS, encode_lines(inc.steps))]
        files.append(("session.json", json.dumps(inc.meta, indent=2, ensure_ascii=False)
                      .encode("utf-8")))  # as ``atomic_write_json`` writes it
        for name, data in files:
            if data:  # no turns: no turns.jsonl, as an append leaves it
                _new_file(tmp / name, data, store.fsync)
        if store.fsync:
            fsync_dir(tmp)
        os.rename(tmp, folder)  # the lock is held and the name is free: nobody else renames
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _new_file(path: Path, data: bytes, sync: bool) -> None:
    """``data`` in a new file of the private hidden folder (no temp name needed: the folder is
    renamed whole)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    try:
        write_all(fd, data)
        if sync:
            os.fsync(fd)
    finally:
        os.close(fd)
