"""Validity: retiring a memory, or superseding it with a newer one, recorded append-only.

Bi-temporal as in Graphiti: a memory became true at ``valid_at`` (its own time), stopped being
true at ``invalid_at`` (given, or the time of the call), and graphmem learned each at
``recorded_at``. The log is ``<spec>/memory/validity.jsonl``, one JSON object per event, the
reference files untouched::

    {"item": "3f0c...", "state": "superseded", "by": "9a1d...", "reason": "pinned 8.2 now",
     "invalid_at": "2026-12-01T21:00:00+00:00", "recorded_at": "2026-12-01T21:00:00+00:00"}

Searches and contexts leave retired and superseded memories out by default (a context says how
many it hid); ``include_history=True`` returns them with ``metadata["validity"]``. With an LLM
configured, a new gotcha or pattern is judged against the older ones on the same code by the LLM
(``supersession.py``), and those it replaces are superseded. Without one (or when its answer
cannot be used), a new note that reads exactly like an older one except for its numbers marks
the older as "possibly superseded" (``possible_update``): marked and ranked below the newer one,
never hidden. A reversed decision is caught the same way, without an LLM: a session whose
completed subtasks include ``Revert "S"`` (git's message for a revert) marks the earlier session
that completed ``S`` as possibly superseded, naming the reverting session (``reverted_subject``;
its insights, gotchas and patterns when ``S`` was its first subtask, its title, else the line
``S`` alone).

**Review** (``review.mode = hold``, ``facade/review.py``): the same log holds what waits for a
person. A memory the agent hooks wrote is ``pending`` (hidden like a retired one) until accepted
(``current``: the item has no event again) or ``rejected`` (hidden for good); a supersession an
LLM judged is ``proposed`` (``proposes``: the state it would take; shown, marked like a possible
update) until accepted (the proposed state is logged) or rejected (the state before it comes
back). Each review line names ``who``, its action (``act``, ``action``) and the event it replaced
(``was``), so ``undo`` appends the lines that restore it: the log is never rewritten.

**Values that change** (``statement``), in one sentence: two notes of one kind state the same
fact with two values when they announce a version of one package ("bump/upgrade/update/pin P
[from A] to B", "P==B", whatever the other words), or when they read the same once their values
are blanked (numbers and versions outside `code`; a name or path after the ``to``/``=`` of a
change verb, or after a leading ``use``) with at least two words of three letters or more left to say
what the fact is about; and the values differ. Issue and PR references (``#123``) and a commit
type prefix (``build(deps):``) are not part of the statement, so "Fix #12 in the parser" never
replaces "Fix #34 in the parser". The newer note is the current one: it takes the rank of the
best note it replaces (``current_first``), and carries the chain in ``metadata["replaces"]``
("was 2.31.0 until session 3").
"""

from __future__ import annotations

import logging
import re
import threading
from pathlib import Path
from typing import Callable

from graphmem.files.jsonl_tail import JsonlTail, tail
from graphmem.models import Hit

FILE_NAME = "validity.jsonl"
POSSIBLY = "possibly superseded"
STATES = ("retired", "superseded", POSSIBLY)  # the states that take effect (applied)
PENDING, PROPOSED, REJECTED, CURRENT = "pending", "proposed", "rejected", "current"
REVIEW_STATES = (PENDING, PROPOSED, REJECTED, CURRENT)  # review's own (``facade/review.py``)
HIDDEN = ("retired", "superseded", PENDING, REJECTED)  # left out of default searches
MARKED = (POSSIBLY, PROPOSED)  # shown, with their mark, below the memory that would replace them
MAX_REASON = 2_000
_ID = re.compile(r"[0-9a-f]{24}")
_lock = threading.Lock()
log = logging.getLogger("graphmem.files.validity_log")


def validity_file(spec_dir: str | Path) -> Path:
    """Where a spec folder keeps its validity log."""
    return Path(spec_dir) / "memory" / FILE_NAME


class ValidityLog(JsonlTail):
    """Item id -> its latest validity event, read incrementally from one ``validity.jsonl``."""

    def reset(self) -> None:
        self.events: dict[str, dict] = {}
        self.under: dict[str, list[str]] = {}  # newer memory -> the memories it replaced

    def take(self, rec: dict) -> bool:
        # a damaged or foreign line must not hide a memory: only the states graphmem writes count,
        # with every field of the type graphmem writes (a hand edit or a merge may break one)
        if not isinstance(rec.get("item"), str) or rec.get("state") not in STATES + REVIEW_STATES \
                or any(not isinstance(rec.get(k), (str, type(None)))
                       for k in ("by", "reason", "invalid_at", "recorded_at")):
            return False
        old = self.events.get(rec["item"])
        if old is not None and old.get("state") == rec["state"] and old.get("by") == rec.get("by"):
            return True  # the same event twice (two merged branches both retired it): the first
        if rec["state"] == CURRENT:  # accepted, or a review undone: as if it had no event
            self.events.pop(rec["item"], None)
            return True
        self.events[rec["item"]] = rec
        if isinstance(rec.get("by"), str) and rec["state"] != "retired":
            self.under.setdefault(rec["by"], []).append(rec["item"])
        return True

    def skipped(self, line: bytes) -> None:
        log.warning("%s line %d: skipped a line that is not a validity event (not JSON, or fields"
                    " of the wrong type): %.80r", self.path, self.line_no, line)

    def replaced(self, item_id: str) -> list[str]:
        """The memories ``item_id`` replaced (superseded or possibly superseded by it, as their
        latest event says), newest event first."""
        out = [i for i in reversed(self.under.get(item_id, ()))
               if (self.events.get(i) or {}).get("by") == item_id
               and self.events[i].get("state") != "retired"]
        return list(dict.fromkeys(out))

    def current(self, item_id: str) -> str | None:
        """The memory that replaces ``item_id`` now (the end of its chain of replacements), None
        when it was not replaced or its replacement is retired (or pending review, or rejected)."""
        seen, at = {item_id}, item_id
        while True:
            ev = self.events.get(at)
            if ev is None or ev.get("state") in ("retired", PENDING, REJECTED):
                return None if at == item_id or ev is not None else at
            by = ev.get("by")
            if not isinstance(by, str) or by in seen or len(seen) > 50:
                return None if at == item_id else at
            seen.add(by)
            at = by


def log_records(spec_dir: str | Path) -> list[dict]:
    """Every line of a spec's validity log that is a JSON object naming an ``item``, in log
    order (what export and review read; other lines are left out, as the log's reader does)."""
    import json

    try:
        text = validity_file(spec_dir).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return []
    out = []
    for line in text.splitlines():
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        if isinstance(rec, dict) and isinstance(rec.get("item"), str):
            out.append(rec)
    return out


def validity_log(spec_dir: str | Path) -> ValidityLog:
    """The (cached, refreshed) validity events of one spec folder."""
    return tail(ValidityLog, validity_file(spec_dir))


def apply_validity(hits: list[Hit], include_history: bool,
                   spec_dir_of: Callable[[Hit], Path | None],
                   fetch: Callable[[list[str]], list[Hit]] | None = None) -> tuple[list[Hit], int]:
    """Hits without retired/superseded ones (and how many were hidden), or all of them marked.

    A memory only *possibly* superseded (the rule in ``possible_update``) stays, marked, and
    moves below the newer memory when both are in the list. The memory that replaced others
    takes the place of the best of them (``current_first``; ``fetch(ids)`` brings it when the
    list lacks it) and says what it replaced (``metadata["replaces"]``).
    """
    order, shown, hidden = [], {}, 0  # every hit's id in rank order; those returned
    logs: dict[Path, ValidityLog] = {}  # one refresh per spec folder, not per hit
    log_of: dict[str, ValidityLog] = {}
    heads: dict[str, Hit] = {}  # the current memory -> the best hit it replaced
    for hit in hits:
        where = spec_dir_of(hit)
        if where is not None and where not in logs:
            logs[where] = validity_log(where)
        vlog = logs[where] if where else None
        ev = (vlog.events.get(hit.id) if vlog else None) or shared_event(hit)
        order.append(hit.id)
        if vlog is not None:
            log_of[hit.id] = vlog
        if ev is None:
            shown[hit.id] = hit
            continue
        head = vlog.current(hit.id) if vlog and ev.get("state") != "retired" else None
        if head is not None and vlog is not None and head not in heads:
            heads[head] = hit
            log_of[head] = vlog
        if include_history or ev.get("state") in MARKED:
            shown[hit.id] = hit.model_copy(update={"metadata": {**hit.metadata, "validity": {
                "state": ev.get("state"), "reason": ev.get("reason"), "by": ev.get("by"),
                **({"proposes": ev.get("proposes")} if ev.get("state") == PROPOSED else {}),
                "current": head,
                "valid_at": hit.time.isoformat() if hit.time else None,
                "invalid_at": ev.get("invalid_at"), "recorded_at": ev.get("recorded_at")}}})
        else:
            hidden += 1
    if heads:
        current_first(order, shown, heads, fetch)
    out = [shown[i] for i in dict.fromkeys(order) if i in shown]
    pos = {h.id: i for i, h in enumerate(out)}
    for h in list(out):
        by = (h.metadata.get("validity") or {}).get("by")
        if (h.metadata.get("validity") or {}).get("state") in MARKED and by in pos \
                and pos[by] > pos[h.id]:
            out.remove(h)
            out.insert(out.index(next(x for x in out if x.id == by)) + 1, h)
            pos = {x.id: i for i, x in enumerate(out)}
    return with_replaced(out, log_of, fetch, include_history), hidden


def shared_event(hit: Hit) -> dict | None:
    """The validity a teammate's home shared with an item taken in from a shared graph
    (``team.stamp``), when this home's files hold no event for it."""
    ev = hit.metadata.get("shared_validity")
    return ev if isinstance(ev, dict) and ev.get("state") in STATES + REVIEW_STATES \
        and ev.get("state") != CURRENT else None


def current_first(order: list[str], shown: dict[str, Hit], heads: dict[str, Hit],
                  fetch: Callable[[list[str]], list[Hit]] | None) -> None:
    """Put each current memory of ``heads`` (id -> the best hit it replaced) in ``order`` (every
    hit's id, hidden ones too) at the place of that hit, scoring at least as much, when it ranked
    below it or was not in the list (``fetch(ids)`` brings it into ``shown``)."""
    missing = [k for k in heads if k not in shown]
    for h in fetch(missing) if fetch and missing else []:
        if h.id in heads and h.id not in shown:
            shown[h.id] = h
            order.append(h.id)
    for head, old in heads.items():
        if head not in shown:
            continue  # not found (another kind than the search asked, or not indexed)
        at, mine = order.index(old.id), order.index(head)
        if mine > at:
            order.insert(at, order.pop(mine))
        shown[head] = shown[head].replaced(score=max(shown[head].score, old.score))


def with_replaced(hits: list[Hit], log_of: dict[str, ValidityLog],
                  fetch: Callable[[list[str]], list[Hit]] | None,
                  include_history: bool = True) -> list[Hit]:
    """Each hit that replaced others, with the chain in ``metadata["replaces"]``: newest first,
    each ``{id, text, session, was, until, state}`` (``was``: the old value when both state one
    fact, ``changed_value``; ``until``: the session or date of the memory that replaced it).
    Without ``include_history`` only the values are told (``{id, was, until}``): a superseded
    memory's text stays out of default results."""
    chains: dict[str, list[tuple[str, str]]] = {}  # head -> [(old id, the id that replaced it)]
    for h in hits:
        vlog = log_of.get(h.id)
        if vlog is None or h.id not in vlog.under:
            continue
        chain: list[tuple[str, str]] = []
        todo, seen = [h.id], {h.id}
        while todo and len(chain) < 10:
            newer = todo.pop(0)
            for old in vlog.replaced(newer):
                if old not in seen:
                    seen.add(old)
                    chain.append((old, newer))
                    todo.append(old)
        if chain:
            chains[h.id] = chain
    if not chains:
        return hits
    by_id = {h.id: h for h in hits}
    want = [o for c in chains.values() for o, _ in c if o not in by_id]
    by_id.update({h.id: h for h in (fetch(want) if fetch and want else [])})
    out = []
    for h in hits:
        told = chains.get(h.id)
        if not told:
            out.append(h)
            continue
        listed = []
        for old_id, newer_id in told:
            was, now = by_id.get(old_id), by_id.get(newer_id, h)
            ev = log_of[h.id].events.get(old_id) or {}
            when = now.session or str(ev.get("invalid_at") or "")[:10] or None
            listed.append({"id": old_id, "text": was.text if was else None,
                           "session": was.session if was else None, "state": ev.get("state"),
                           "was": changed_value(was.text, now.text) if was else None,
                           "until": (f"session {now.session}" if now.session else when)})
        if not include_history:
            listed = [{k: r[k] for k in ("id", "was", "until")} for r in listed if r["was"]]
        out.append(h.model_copy(update={"metadata": {**h.metadata, "replaces": listed}})
                   if listed else h)
    return out


_REVERT = re.compile(r'\s*Revert\s+"(?P<subject>.+)"\s*(?:\(#\d+\))?\s*', re.S)
_PR_REF = re.compile(r"\s*\(#\d+\)\s*$")


def reverted_subject(line: str) -> str | None:
    """The subject a completed subtask ``Revert "<subject>"`` (optionally `` (#123)``) reverts,
    or None when the line is not a revert."""
    m = _REVERT.fullmatch(line) if isinstance(line, str) else None
    return m.group("subject").strip() or None if m else None


def subject_key(text: str) -> str:
    """A commit subject as a revert names it: normalised, without a trailing PR reference."""
    from graphmem.models import normalise

    return normalise(_PR_REF.sub("", text))


# A value: digits (a leading "v" too) that do not end a name: f2, m2.py, step12, py311 and
# x_10 are names (no word character may come right before a value's first digit or its "v").
_NUMBER = re.compile(r"(?<!\w)(?:v(?=\d))?\d+(?:[.,_]\d+)*(?:(?:a|b|rc|dev|post)\d+)?")
_REFS = re.compile(r"\(?(?<![\w#])#\d+\)?")  # an issue or PR reference: not a value
_TYPE_PREFIX = re.compile(r"^[a-z]+(?:\([^)]{0,40}\))?!?:\s+")  # "build(deps): ", "fix!: "
# a name or path as the value of a change: "switch the client to httpx", "set cache_dir = /tmp/x"
_SLOT = re.compile(r"^(?P<head>(?:switch|switched|change|changed|move|moved|set|pin|pinned|"
                   r"default|defaults|migrate|migrated|rename|renamed)\b.*?\s(?:to|=)\s+)"
                   r"(?P<value>[^\s,;]+?)(?P<tail>[.!]?(?:[\s,;].*)?)$")
_USE = re.compile(r"^(?P<head>(?:use|prefer)\s+)(?P<value>[^\s,;]+)"
                  r"(?P<tail>\s+(?:for|as|instead)\b.*)$")
_SUBJECT_WORD = re.compile(r"[a-z][a-z_-]{2,}")
_CODE = re.compile(r"(`[^`]*`)")
# a package's version announced: "bump(s)/upgrade/update/pin P [from A] to B", "P==B" (P may be a
# markdown link or carry extras: "[anyio[trio]](https://...)"); B has a dot, and ends the clause
_VERSION_END = r"(?![\w.]*\w)(?=\s*$|[.,;:)`'\"]|\s+(?:in|for|on|with|and|via|-)\b|\s*[(\[])"
_DEP = re.compile(r"\b(?:bump(?:s|ed)?|upgrade[sd]?|update[sd]?|pin(?:s|ned)?)\s+(?:the\s+)?"
                  r"\[?(?P<pkg>[a-z][\w.-]*?)(?:\[[\w,]*\])?\]?(?:\(\S*?\))?"
                  r"(?:\s+(?:dependency|package|library|module|pin))?"
                  r"(?:\s+from\s+v?\d[\w.]*)?\s+to\s+v?(?P<new>\d+(?:\.\w+)+)" + _VERSION_END)
_PIN = re.compile(r"(?<![\w.-])(?P<pkg>[a-z][\w.-]*)(?:\[[\w,]*\])?\s*==\s*v?(?P<new>\d+(?:\.\w+)+)"
                  + _VERSION_END)
_statements: dict[str, tuple[str, tuple[str, ...]] | None] = {}
_skeletons: dict[str, tuple[int, dict[str, list[str]]]] = {}


def statement(text: str) -> tuple[str, tuple[str, ...]] | None:
    """A note as (what it says with its values blanked, its values), or None when it states no
    value about a named subject: the key of the no-LLM rule (see the module docstring)."""
    if not isinstance(text, str):
        return None
    got = _statements.get(text)
    if got is not None or text in _statements:
        return got
    from graphmem.models import normalise

    norm = _TYPE_PREFIX.sub("", " ".join(_REFS.sub(" ", normalise(text)).split())).rstrip(".!;")
    dep = _DEP.search(norm) or _PIN.search(norm)
    if dep:  # one fact in whatever words: the package's version
        _statements[text] = got = (f"version of {dep.group('pkg')}", (dep.group("new"),))
        return got
    values: list[str] = []
    m = _SLOT.match(norm) or _USE.match(norm)
    if m and not _NUMBER.fullmatch(m.group("value")):
        values.append(m.group("value"))
        norm = f"{m.group('head')}@{m.group('tail')}"
    parts = _CODE.split(norm)  # odd parts: `code`, whose digits are names ("tail -40")
    values += [v for n, part in enumerate(parts) if n % 2 == 0 for v in _NUMBER.findall(part)]
    key = "".join(part if n % 2 else _NUMBER.sub("#", part) for n, part in enumerate(parts))
    subject = [w for w in _SUBJECT_WORD.findall(key.replace("@", " "))]
    got = (key, tuple(values)) if values and len(subject) >= 2 else None
    if len(_statements) > 50_000:
        _statements.clear()
    _statements[text] = got
    return got


_ASKS_VERSION = re.compile(r"\b(?:versions?|pin|pins|pinned|pinning)\b")
_QUERY_WORD = re.compile(r"[a-z0-9](?:[\w.-]*\w)?")


def asked_packages(query: str) -> list[str]:
    """The words of a question asking for a version ("Which version of django do we pin?"):
    the packages it may name; none when it asks no version."""
    from graphmem.models import normalise

    q = normalise(query)
    if not _ASKS_VERSION.search(q):
        return []
    return [w for w in dict.fromkeys(_QUERY_WORD.findall(q)) if not _ASKS_VERSION.fullmatch(w)]


def skeleton(text: str) -> str | None:
    """A note with its values blanked (None when it states none): the key of the no-LLM rule."""
    got = statement(text)
    return got[0] if got else None


def possible_update(old: str, new: str) -> bool:
    """The rule without an LLM: the new note states the same fact as the old one (``statement``)
    with another value (a version, a limit, a default, a path, a chosen library)."""
    a, b = statement(old), statement(new)
    return a is not None and b is not None and a[0] == b[0] and a[1] != b[1]


def changed_value(old: str, new: str) -> str | None:
    """The old note's value that the new one changed (the last slot where they differ: "from
    2.31.0 to 2.32.3" after "from 2.28.1 to 2.31.0" changed 2.31.0), None when they do not state
    the same fact."""
    a, b = statement(old), statement(new)
    if a is None or b is None or a[0] != b[0] or a[1] == b[1] or len(a[1]) != len(b[1]):
        return None
    return next(x for x, y in zip(reversed(a[1]), reversed(b[1])) if x != y)


def older_versions(bullets_file: Path, bullets: list[str], new: str) -> list[str]:
    """The latest older note of ``bullets`` (file order) that ``new`` updates (``possible_update``).

    The statement map is kept per file and extended with the lines appended since the last call.
    """
    key = skeleton(new)
    if key is None:
        return []
    with _lock:
        count, index = _skeletons.get(str(bullets_file), (0, {}))
        if count > len(bullets):
            count, index = 0, {}
        for text in bullets[count:]:
            k = skeleton(text)
            if k is not None:
                index.setdefault(k, []).append(text)
        _skeletons[str(bullets_file)] = (len(bullets), index)
        same = [t for t in index.get(key, []) if t != new]
        # the latest: older ones were flagged when it came (one event a write); the same value
        # said again is no update
        return [same[-1]] if same and possible_update(same[-1], new) else []
