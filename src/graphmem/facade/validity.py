"""Validity on the façade: ``retire``, and the events the notes' writes log (``supersede`` and
the "possibly superseded" flag, ``SpecNotes``); the log itself is ``graphmem.files.validity_log``."""

from __future__ import annotations

import json
import logging
import re
import threading
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Iterator

from graphmem.graph.presence import in_use as graph_in_use
from ..errors import NotFoundError, ValidationError
from ..files.atomic import append_line
from ..files.lock import folder_lock
from ..models import parse_iso, utcnow
from graphmem.files.validity_log import (_ID, HIDDEN, MAX_REASON, PENDING, POSSIBLY, PROPOSED,
                                        older_versions, reverted_subject, skeleton, subject_key,
                                        validity_file, validity_log)

from graphmem.facade.derived import Collaborator

if TYPE_CHECKING:
    from .episode_log import EpisodeLog
    from .write_rules import WriteRules

log = logging.getLogger("graphmem.files.validity_log")
LOCK_NAME = ".validity.lock"  # beside validity.jsonl: one retire or supersede of a spec at a time
_in_flight: set[tuple[str, str]] = set()  # (validity file, item) claimed by a call of this process
_in_flight_guard = threading.Lock()
REVERTS_COMMIT = re.compile(r"\bThis reverts commit ([0-9a-fA-F]{7,40})\b")
VALUE_KINDS = ("insight", "gotcha", "pattern")  # whose values change (validity_log.statement)
LESSON_FIELDS = ("what_failed", "recommendations", "recommendations_for_next_session")
FAILED = {"failed", "failure", "error", "blocked", "rejected", "incomplete"}
# insights folder -> session file name -> (its cache key, its statements); see _earlier_statements
_session_statements: dict[str, dict[str, tuple[Any, list[tuple]]]] = {}


@dataclass(eq=False)
class Validity(Collaborator):
    """``retire`` on ``AsyncMemory``, and the validity events its notes write (``SpecNotes``
    supersedes through ``own_item``, ``log_event`` and ``to_graph``)."""

    rules: WriteRules
    episodes: EpisodeLog

    def own_item(self, item_id: Any) -> Any:
        """The index row of a memory of this spec (``NotFoundError`` for any other id)."""
        if not isinstance(item_id, str) or not _ID.fullmatch(item_id):
            raise ValidationError("must be a memory id (24 hex characters, as search returns)",
                                  field="id")
        from graphmem.facade.team import team_key

        rows = self.derived.local.index.rows_by_id([item_id])
        key = self.scope.project.key  # a teammate's memory taken in from a shared graph too
        ours = bool(rows) and rows[0]["project"] in (key, team_key(key))
        where = (f"it is in {self.scope.root / rows[0]['spec']}: name that spec folder "
                 "(--spec-dir, spec_dir)") if ours and rows[0]["spec"] else ""
        if self.scope.project_wide and where and rows[0]["spec"] != self.scope.spec_key:
            raise ValidationError(f"retire and supersede need the memory's spec folder; {where}",
                                  field="spec_dir")
        spec_dir = self.scope.require_spec()
        if not ours or rows[0]["spec"] != self.scope.spec_key:
            raise NotFoundError(f"no memory {item_id} in {spec_dir}{'; ' + where if where else ''}")
        return rows[0]

    def log_event(self, item_id: str, state: str, reason: str, by: str | None, at: Any,
                  review: dict | None = None) -> dict:
        """Append one validity event to this spec's ``validity.jsonl`` -> the event (callers hold
        ``LOCK_NAME``: ``claim`` or ``log_while_valid``); ``review``: the fields a review line
        adds (``facade/review.py``: who, act, action, was, proposes)."""
        when = utcnow() if at is None else parse_iso(at)
        if when is None:
            raise ValidationError(f"must be an ISO 8601 time, got {at!r}", field="at")
        reason = " ".join(reason.split()) or state  # one line in every mark that shows it
        ev = {"item": item_id, "state": state, "by": by, "reason": self.rules.clean(reason),
              "invalid_at": when.isoformat(timespec="seconds"),
              "recorded_at": utcnow().isoformat(timespec="seconds"), **(review or {})}
        path = validity_file(self.scope.require_spec())
        append_line(path, json.dumps(ev, ensure_ascii=False))  # the truth: synced, never via a link
        return ev

    def append_records(self, records: list[dict]) -> None:
        """Append validity lines as they are (an import's replay: the callers hold
        ``LOCK_NAME``), all in one write: every line or none."""
        if records:
            append_line(validity_file(self.scope.require_spec()),
                        "\n".join(json.dumps(r, ensure_ascii=False) for r in records))

    def log_while_valid(self, item_ids: list[str], state: str, reason: str,
                        by: str | None) -> list[str]:
        """Log ``state`` for each of ``item_ids`` still valid -> the ids logged.

        The writers that are not a user's retire or supersede (the LLM's judgement, the no-LLM
        rule, reverts) take the lock ``claim`` takes: a memory already retired or superseded, or
        being retired or superseded by a call in flight, keeps its event (a later flag logged
        after it would be its latest event, and bring a retired memory back into searches).
        With ``review.mode = hold`` a supersession is logged as proposed, and so is any event a
        memory still pending review causes (``facade/review.py``): a person accepts it or not.
        A memory pending, rejected or proposed takes no other event here (it waits for review).
        """
        from graphmem.files.review_log import proposal

        spec_dir = self.scope.require_spec()
        memory_dir = validity_file(spec_dir).parent
        logged: list[str] = []
        with folder_lock(memory_dir, name=LOCK_NAME):
            events = validity_log(spec_dir).events
            held = (state == "superseded" and self.settings.review.mode == "hold") or \
                (by is not None and (events.get(by) or {}).get("state") == PENDING)
            for item_id in dict.fromkeys(item_ids):
                with _in_flight_guard:
                    busy = (str(memory_dir), item_id) in _in_flight
                closed = (events.get(item_id) or {}).get("state") in (*HIDDEN, PROPOSED)
                if busy or closed:
                    continue
                if held:
                    self.log_event(item_id, PROPOSED, reason, by, None,
                                   proposal(state, events.get(item_id)))
                else:
                    self.log_event(item_id, state, reason, by, None)
                logged.append(item_id)
        return logged

    def hold(self, item_ids: list[str], who: str, reason: str) -> list[str]:
        """Log each of ``item_ids`` (memories just written) that has no event yet as pending
        review -> the ids held (``review.mode = hold``; ``facade/review.py`` decides them)."""
        from graphmem.files.review_log import new_act, review_fields

        spec_dir = self.scope.require_spec()
        held: list[str] = []
        with folder_lock(validity_file(spec_dir).parent, name=LOCK_NAME):
            events, act = validity_log(spec_dir).events, new_act()
            for item_id in dict.fromkeys(item_ids):
                if item_id not in events:
                    self.log_event(item_id, PENDING, reason, None, None,
                                   review_fields(who, act, "hold", None))
                    held.append(item_id)
        return held

    @contextmanager
    def claim(self, item_id: str) -> Iterator[None]:
        """Check that ``item_id`` is still valid and hold it until its event is appended.

        The check and the append are one step across processes (an exclusive lock beside
        ``validity.jsonl``) and across calls of one process (a coroutine of the same thread
        re-enters that lock, so the item is also marked in flight): of two retires or supersedes
        of one memory at once, exactly one is accepted and the other is refused on ``id``.
        """
        memory_dir = validity_file(self.scope.require_spec()).parent
        key = (str(memory_dir), item_id)
        with folder_lock(memory_dir, name=LOCK_NAME):
            with _in_flight_guard:
                if key in _in_flight:
                    raise ValidationError(f"{item_id} is being retired or superseded by another "
                                          "call", field="id")
                _in_flight.add(key)
            try:
                self.check_still_valid(item_id)
                yield
            finally:
                with _in_flight_guard:
                    _in_flight.discard(key)

    def check_still_valid(self, item_id: str) -> None:
        """Refuse to retire or supersede a memory already retired or superseded: a second event
        would move the time it stopped being true, or orphan the memory that replaced it."""
        ev = validity_log(self.scope.require_spec()).events.get(item_id)
        if not ev or ev.get("state") not in ("retired", "superseded"):
            return  # "possibly superseded" is only a flag: it may still be retired or replaced
        since = f" since {ev.get('invalid_at')}" if ev.get("invalid_at") else ""
        if ev["state"] == "retired":
            raise ValidationError(f"{item_id} is already retired{since} ({ev.get('reason')})",
                                  field="id")
        raise ValidationError(f"{item_id} is already superseded by {ev.get('by')}{since}; "
                              "retire or supersede that memory instead", field="id")

    async def flag_updates(self, kind: str, text: str, new_id: str) -> None:
        """After a new gotcha or pattern: with an LLM, the older ones it replaces are judged by
        the LLM and superseded (``supersession.py``); without one, or when its answer cannot be
        used, the older ones it seems to update are flagged (``possible_update``)."""
        from ..models import stable_id

        llm = self._supersession_llm()
        if llm is None and skeleton(text) is None:
            return
        files, key, spec = self.scope.files, self.scope.project.key, self.scope.spec_key
        assert spec is not None  # scope.files required the spec
        path = files.bullet_file(kind)
        bullets = files.load_bullets(kind)
        rule = older_versions(path, bullets, text) if skeleton(text) is not None else []
        rule_ids = [stable_id(key, spec, kind, old) for old in rule]
        judged = None if llm is None else \
            await self._judged_updates(llm, kind, text, new_id, bullets, rule_ids)
        if judged is not None:
            ids, reason = judged
            ids = self.log_while_valid(ids, "superseded", reason or "replaced by a newer note",
                                       new_id)
            if ids:
                await self.to_graph(ids)
            return
        flagged = self.log_while_valid([i for i in rule_ids if i != new_id], POSSIBLY,
                                       "a newer note says the same with other numbers", new_id)
        if flagged:
            await self.to_graph(flagged)

    async def flag_value_updates(self, session_num: int, items: list[Any]) -> None:
        """After session ``session_num`` saved ``items``: each of its insights, gotchas and
        patterns stating a fact with a new value (``validity.statement``) replaces the latest
        earlier session's note stating it with another value: judged by the LLM when one is
        configured, else flagged possibly superseded (as ``flag_updates`` does for notes)."""
        from graphmem.files.validity_log import statement

        mine = [it for it in items if it.kind in VALUE_KINDS and it.session == str(session_num)
                and statement(it.text) is not None]
        if not mine:
            return
        older = _earlier_statements(self.scope.files, session_num)
        llm = None
        for it in mine:
            said = statement(it.text)
            assert said is not None  # ``mine`` holds only notes that state a value
            key = (it.kind, said[0])
            last = [n for n in older.get(key, ()) if n[1] != it.id and n[2] != said[1]]
            if not last:
                continue  # nothing earlier, or the same value said again
            if llm is None:
                llm = self._supersession_llm() or False
            judged = None
            if llm:
                judged = await self._judge(llm, it.kind, it.text, [(n[1], n[3]) for n in last])
            if judged is not None:
                ids, reason = judged
                done = self.log_while_valid(ids, "superseded", reason, it.id)
            else:
                done = self.log_while_valid([n[1] for n in last], POSSIBLY, f"replaced in "
                                            f"session {session_num}: {it.text[:200]}", it.id)
            if done:
                await self.to_graph(done)

    async def _judge(self, llm: Any, kind: str, text: str,
                     candidates: list[tuple[str, str]]) -> tuple[list[str], str] | None:
        """The LLM's judgement of ``candidates`` (ids it supersedes, reason), None without a
        usable one (the rule decides)."""
        from ..errors import GraphmemError
        from graphmem.rules.supersession import judge

        try:
            ids, reason = await judge(llm, kind, text, candidates)
        except GraphmemError as exc:
            log.warning("supersession not judged: %s", exc)
            return None
        name = getattr(llm, "name", "the LLM")
        return ids, f"judged by {name}: {reason}" if reason else f"judged by {name}"

    async def flag_reverts(self, session_num: int, lines: list[str], items: list[Any]) -> None:
        """After session ``session_num`` completed ``lines``: for each ``Revert "S"``, the
        earlier session that completed ``S`` is marked possibly superseded, with the reverting
        session named (``validity.reverted_subject``; ``items`` are the new session's, the
        revert line among them): its insights, gotchas and patterns, not its files' purposes. A
        revert naming no earlier session changes nothing."""
        named = [(line, reverted_subject(line)) for line in lines]
        reverts = [(line, subject) for line, subject in named if subject]
        await self._flag_reverted_commits(session_num, items)
        if not reverts:
            return
        from graphmem.files.insight_shapes import entries
        from ..models import normalise

        numbered = [(sf.data.get("session_number"), sf) for _, sf in self.scope.files.sessions()]
        sessions = [(n, sf) for n, sf in numbered if isinstance(n, int) and n < session_num]
        known = validity_log(self.scope.require_spec()).events
        flagged: list[str] = []
        for line, subject in reverts:
            key = subject_key(subject)
            by = next((i.id for i in items if i.kind == "insight" and normalise(i.text) ==
                       normalise(line)), None)
            for n, sf in sorted(sessions, key=lambda x: x[0], reverse=True):  # the latest first
                done = [e.text for e in (sf.entries if sf.entries is not None else entries(sf.data))
                        if e.kind == "insight" and e.field == "subtasks_completed"]
                if not any(subject_key(t) == key for t in done):
                    continue
                whole = subject_key(done[0]) == key  # its title: the session's work was reverted
                for it in self.scope.files.insight_items(only_session=n):
                    if it.kind == "file" or it.session != str(n) or it.id in known or \
                            it.id == by or not (whole or subject_key(it.text) == key):
                        continue  # said again by a later session, or already judged
                    flagged += self.log_while_valid([it.id], POSSIBLY, f"reverted in session "
                                                    f"{session_num}: {line.strip()}", by)
                break
        if flagged:
            await self.to_graph(flagged)

    async def flag_failed_approaches(self, session_num: int, data: dict, items: list[Any]) -> None:
        """After a successful session ``session_num`` of subtask S (``subtask_id``): the earlier
        sessions of S recorded as failed (``success: false``, or an ``approach_outcome`` whose
        status says so) are not lessons to follow; what they did and tried (not what failed,
        their gotchas or recommendations: those are lessons) is marked possibly superseded,
        "failed in session N; subtask S done in session M", and ranks below this session."""
        subtask = data.get("subtask_id")
        if data.get("success") is not True or not isinstance(subtask, (str, int)) \
                or isinstance(subtask, bool) or failed_session(data):
            return
        by = next((it.id for it in items if it.session == str(session_num)
                   and it.kind == "insight"), None)
        known = validity_log(self.scope.require_spec()).events
        flagged: list[str] = []
        for _, sf in self.scope.files.sessions():
            n = sf.data.get("session_number")
            if not isinstance(n, int) or n >= session_num or \
                    str(sf.data.get("subtask_id")) != str(subtask) or not failed_session(sf.data):
                continue
            ids = [it.id for it in self.scope.files.insight_items(only_session=n)
                   if it.session == str(n) and it.id not in known and it.kind in ("insight", "pattern")
                   and not str(it.metadata.get("field", "")).endswith(LESSON_FIELDS)]
            flagged += self.log_while_valid(ids, POSSIBLY, f"failed in session {n}; subtask "
                                            f"{subtask} done in session {session_num}", by)
        if flagged:
            await self.to_graph(flagged)

    async def _flag_reverted_commits(self, session_num: int, items: list[Any]) -> None:
        """For each ``This reverts commit <sha>`` in session ``session_num``'s insights: the
        insights, gotchas and patterns of the earlier sessions whose recorded work holds that
        commit (``code/changes.py``: the commits between a work's base and its HEAD) are marked
        possibly superseded, "reverted in session N"."""
        shas = {m.group(1).lower() for it in items if it.kind == "insight"
                for m in REVERTS_COMMIT.finditer(it.text)}
        if not shas or self.scope.spec_dir is None:
            return
        by = next((it.id for it in items if it.kind == "insight"
                   and REVERTS_COMMIT.search(it.text)), None)
        known = validity_log(self.scope.spec_dir).events
        flagged: list[str] = []
        for sha, work in _works_holding(self.scope.root, self.scope.spec_dir, shas):
            for s in work.get("sessions") or ():
                if not str(s).isdigit() or int(s) >= session_num:
                    continue
                ids = [it.id for it in self.scope.files.insight_items(only_session=int(s))
                       if it.kind != "file" and it.session == str(s) and it.id not in known]
                flagged += self.log_while_valid(ids, POSSIBLY, f"reverted in session "
                                                f"{session_num}: This reverts commit {sha[:12]}", by)
        if flagged:
            await self.to_graph(flagged)

    def _supersession_llm(self) -> Any:
        """The configured LLM, or None (none set, or it cannot be made: the rule decides)."""
        from ..errors import GraphmemError
        from ..providers import get_llm

        try:
            return get_llm(self.settings)
        except GraphmemError as exc:
            log.warning("no LLM for supersession: %s", exc)
            return None

    async def _judged_updates(self, llm: Any, kind: str, text: str, new_id: str,
                              bullets: list[str], rule_ids: list[str]) -> tuple[list[str], str] | None:
        """The LLM's judgement (ids it supersedes, reason), or None without a usable one."""
        from ..models import stable_id
        from graphmem.rules.supersession import same_anchor

        key, spec, spec_dir = self.scope.project.key, self.scope.spec_key, self.scope.spec_dir
        assert spec is not None and spec_dir is not None  # flag_updates read the spec's bullets
        texts = {stable_id(key, spec, kind, b): b for b in bullets}
        texts.pop(new_id, None)
        gone = {i for i, ev in validity_log(spec_dir).events.items()
                if ev.get("state") in ("retired", "superseded")}
        order = [i for i in [*rule_ids, *same_anchor(spec_dir, new_id, texts)]
                 if i in texts and i not in gone]
        candidates = [(i, texts[i]) for i in dict.fromkeys(order)]
        if not candidates:
            return [], ""
        return await self._judge(llm, kind, text, candidates)  # unusable: the rule decides

    async def retire(self, id: str, reason: str, *, at: Any = None) -> dict:
        """Mark a memory as no longer true (it stays in the files; searches hide it)."""
        if not isinstance(reason, str) or not reason.strip() or len(reason) > MAX_REASON \
                or "\x00" in reason:
            raise ValidationError(f"must be a non-empty text of at most {MAX_REASON} characters",
                                  field="reason")
        await self.episodes.settle()
        self.own_item(id)
        with self.claim(id):
            ev = self.log_event(id, "retired", reason.strip(), None, at)
        await self.to_graph([id])  # ABOUT edges take invalid_at
        return ev

    async def to_graph(self, item_ids: list[str]) -> None:
        """After a retire or supersede: the items go to the graph again (their ABOUT edges take
        the new ``invalid_at``), queued in the outbox when the graph cannot take them."""
        if not graph_in_use(self.settings):
            return
        # validity lives on ABOUT edges (anchored items) and in every item's shared metadata
        wanted = set(item_ids)  # (``team.stamp``: a teammate's home hides them too)
        if not wanted:
            return
        files = self.scope.files
        items = [i for i in files.items() if i.id in wanted]
        if items:
            await self.derived.write_graph(files.memory_dir, self.scope.root, items)


def _earlier_statements(files: Any, before: int) -> dict[tuple[str, str], list[tuple]]:
    """(kind, statement key) -> [(session, id, values, text)] of the notes stating it in the
    latest session numbered below ``before`` that states it (each session file's statements
    cached by its stat key, as ``SpecStore.sessions`` caches the file)."""
    from graphmem.files.validity_log import statement

    cache = _session_statements.setdefault(str(files.insights_dir), {})
    fresh: dict[str, tuple[Any, list[tuple]]] = {}
    latest: dict[tuple[str, str], list[tuple]] = {}
    for path, sf in files.sessions():
        got = cache.get(path.name)
        if got is None or got[0] != sf.key:
            n = sf.data.get("session_number")
            notes = []
            for it in files.session_items(sf.data, path) if isinstance(n, int) else ():
                st = statement(it.text) if it.kind in VALUE_KINDS else None
                if st is not None:
                    notes.append(((it.kind, st[0]), (n, it.id, st[1], it.text)))
            got = (sf.key, notes)
        fresh[path.name] = got
        for key, note in got[1]:
            if note[0] >= before:
                continue
            had = latest.get(key)
            if had is None or note[0] > had[0][0]:
                latest[key] = [note]
            elif note[0] == had[0][0]:
                had.append(note)
    _session_statements[str(files.insights_dir)] = fresh
    return latest


def _works_holding(root: Any, spec_dir: Any, shas: set[str]) -> list[tuple[str, dict]]:
    """(sha, work) for each of ``shas`` (full or abbreviated commit ids) that a recorded work
    of ``spec_dir`` holds: the commit is after the work's base and at or before its HEAD."""
    from ..code.anchors import book
    from ..code.history import history
    from ..code.tree import snapshot

    snap = snapshot(root)
    h = history(root, getattr(snap, "head", None)) if snap is not None else None
    if h is None:
        return []
    works = list(book(spec_dir).works.by_head.values())
    out = []
    for sha in sorted(shas):
        full = [c for c in h.pos if c.startswith(sha)]
        if len(full) != 1:
            continue  # unknown here, or ambiguous
        at = h.pos[full[0]]
        for w in works:
            top = h.pos.get(w["head"])
            base = h.pos.get(w["base"]) if w.get("base") else -1
            if top is not None and base is not None and base < at <= top:
                out.append((sha, w))
                break
    return out


def failed_session(data: dict) -> bool:
    """Whether a session recorded its approach as failed (``success: false``, or an
    ``approach_outcome`` status such as "failed")."""
    outcome = data.get("approach_outcome")
    if not isinstance(outcome, dict):
        outcome = (data.get("discoveries") or {}).get("approach_outcome") \
            if isinstance(data.get("discoveries"), dict) else None
    status = outcome.get("status") if isinstance(outcome, dict) else None
    return data.get("success") is False or str(status).lower() in FAILED


def current_versions(files: Any, packages: list[str]) -> list[str]:
    """The ids of the latest session notes announcing the version of each of ``packages`` that
    the spec's sessions announce (``validity_log.statement``: "version of P"), in that order."""
    latest = _earlier_statements(files, 1 << 62)
    out: list[str] = []
    for pkg in packages:
        for kind in VALUE_KINDS:
            notes = latest.get((kind, f"version of {pkg}"))
            if notes:
                out.append(notes[0][1])
                break
    return out
