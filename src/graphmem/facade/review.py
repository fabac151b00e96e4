"""Review on the façade: what the agent hooks wrote and what an LLM judged, held for a person.

With ``review.mode = hold`` (``GRAPHMEM_REVIEW=hold``) the memories the agent hooks digest are
written to the files as usual and logged ``pending`` in the validity log (``Validity.hold``), and
a supersession an LLM judges is logged ``proposed`` instead of applied
(``Validity.log_while_valid``). ``pending`` lists both; ``accept`` and ``reject`` decide them;
``undo`` takes back the latest accept or reject. Every step is appended to the validity log
(``files/review_log.py`` says what a line holds): the files stay the truth, a reindex gives the
same answers, and two branches' logs merge with git's union driver. The index needs no write
(searches read the log); the graph is sent the items again (their validity stamps).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ..errors import NotFoundError, ValidationError
from ..files.lock import folder_lock
from ..files.review_log import last_undoable, new_act, review_fields, review_lines
from ..files.validity_log import (_ID, CURRENT, PENDING, PROPOSED, REJECTED, validity_file,
                                  validity_log)

if TYPE_CHECKING:
    from graphmem.facade.scope import Scope
    from ..models import MemoryItem
    from ..settings import Settings
    from .validity import Validity

WAITING = (PENDING, PROPOSED)


@dataclass(eq=False)
class Review:
    """``review_pending``, ``accept``, ``reject`` and ``undo_review`` on ``AsyncMemory``."""

    settings: Settings
    scope: Scope
    validity: Validity

    def _who(self) -> str:
        from graphmem.facade.team import author

        return author(self.settings, self.scope.root)

    async def pending(self) -> dict[str, Any]:
        """What waits for a person: ``pending`` memories and ``proposed`` retirements or
        supersessions, oldest first, each with its text; ``mode``: the setting."""
        spec_dir = self.scope.require_spec("review")
        events = validity_log(spec_dir).events
        items = {i.id: i for i in self.scope.files.items()}
        waiting = sorted(((i, ev) for i, ev in events.items()
                          if ev.get("state") in WAITING and i in items),
                         key=lambda p: (str(p[1].get("recorded_at") or ""), p[0]))
        out: dict[str, Any] = {"mode": self.settings.review.mode, "spec_dir": str(spec_dir),
                               "pending": [], "proposed": []}
        for item_id, ev in waiting:
            row = _row(items[item_id], ev)
            if ev["state"] == PENDING:
                out["pending"].append(row)
                continue
            by = ev.get("by")
            newer = items.get(by) if isinstance(by, str) else None
            row.update({"proposes": ev.get("proposes"), "by": by,
                        "by_text": newer.text if newer else None,
                        "by_pending": newer is not None and
                        (events.get(newer.id) or {}).get("state") == PENDING})
            out["proposed"].append(row)
        return out

    async def decide(self, action: str, ids: Any, every: bool, reason: Any) -> dict[str, Any]:
        """``accept`` or ``reject`` the memories and proposals ``ids`` (or ``every`` one waiting):
        one step, all or nothing; what it logged."""
        assert action in ("accept", "reject")
        want = _check_ids(ids, every)
        if reason is not None and (not isinstance(reason, str) or len(reason) > 2_000
                                   or "\x00" in reason):
            raise ValidationError("must be a text of at most 2000 characters", field="reason")
        spec_dir = self.scope.require_spec("review")
        who = self._who()
        with folder_lock(validity_file(spec_dir).parent, name=_lock_name()):
            events = validity_log(spec_dir).events
            present = {i.id for i in self.scope.files.items()}
            waiting = [i for i, ev in events.items() if ev.get("state") in WAITING and i in present]
            if every:
                want = waiting
                if not want:
                    raise NotFoundError(f"nothing waits for review in {spec_dir}")
            for item_id in want:
                if item_id not in waiting:
                    raise ValidationError(_not_waiting(item_id, events.get(item_id),
                                                       item_id in present), field="ids")
            act = new_act()
            plan = _plan(action, want, events, (reason or "").strip())
            lines = [self.validity.log_event(item_id, state, why, by, at, review_fields(
                who, act, action, events.get(item_id), **extra))
                for item_id, state, why, by, at, extra in plan]
        await self.validity.to_graph([line["item"] for line in lines])
        return {"act": act, "action": action, "who": who, "lines": lines}

    async def undo(self) -> dict[str, Any]:
        """Take back the latest accept or reject not undone yet, by appending the lines that
        give each of its items the event it had before; what it logged."""
        spec_dir = self.scope.require_spec("review")
        who = self._who()
        with folder_lock(validity_file(spec_dir).parent, name=_lock_name()):
            got = last_undoable(review_lines(spec_dir))
            if got is None:
                raise NotFoundError(f"nothing to undo: no accept or reject in {spec_dir} that is "
                                    "not undone yet")
            act, done = got
            events = validity_log(spec_dir).events
            for rec in done:  # every item still as the step left it
                now = events.get(rec["item"])
                left = None if rec["state"] == CURRENT else rec["state"]
                if (now or {}).get("state") != left or (now is not None and now.get("act") != act):
                    raise ValidationError(
                        f"cannot undo {rec['action']} {act}: {rec['item']} changed since "
                        f"(now {(now or {}).get('state') or 'current'}"
                        f"{' by ' + str(now.get('who')) if now and now.get('who') else ''})",
                        field="undo")
            new = new_act()
            lines = []
            for rec in done:
                was = rec.get("was") or {}
                extra = _kept(was)
                lines.append(self.validity.log_event(
                    rec["item"], was.get("state") or CURRENT,
                    was.get("reason") or f"{rec['action']} undone", was.get("by"),
                    was.get("invalid_at"), review_fields(who, new, "undo", rec, undoes=act,
                                                         **extra)))
        await self.validity.to_graph([line["item"] for line in lines])
        return {"act": new, "action": "undo", "undoes": act, "who": who, "lines": lines}


def _lock_name() -> str:
    from .validity import LOCK_NAME

    return LOCK_NAME


def _kept(was: dict) -> dict[str, Any]:
    """What a line restoring the event ``was`` keeps of it besides its state: what a proposal
    proposes and the event before it, and who held or proposed it first (``held_by``; the
    line's ``who`` is who restores it)."""
    out: dict[str, Any] = {k: was[k] for k in ("proposes", "before") if k in was}
    if was.get("state") in WAITING and was.get("who"):
        out["held_by"] = was.get("held_by") or was["who"]
    return out


def _row(item: MemoryItem, ev: dict) -> dict[str, Any]:
    """One waiting memory as ``pending`` lists it (``who``: who held or proposed it)."""
    return {"id": item.id, "kind": item.kind, "text": item.text, "session": item.session,
            "source": item.source, "who": ev.get("held_by") or ev.get("who"),
            "reason": ev.get("reason"), "at": ev.get("recorded_at")}


def _check_ids(ids: Any, every: bool) -> list[str]:
    """The ids given, checked (``ids`` is the field named), or none with ``every``."""
    if not isinstance(every, bool):
        raise ValidationError("must be true or false", field="all")
    if ids is None or ids == []:
        if every:
            return []
        raise ValidationError("name the memories to decide (ids from `graphmem review`), or "
                              "all of them (--all, all=True)", field="ids")
    if every:
        raise ValidationError("give ids or all, not both", field="ids")
    if isinstance(ids, str) or not isinstance(ids, (list, tuple)):
        raise ValidationError("must be a list of memory ids", field="ids")
    for i in ids:
        if not isinstance(i, str) or not _ID.fullmatch(i):
            raise ValidationError(f"{i!r} is not a memory id (24 hex characters, as "
                                  "`graphmem review` lists them)", field="ids")
    return list(dict.fromkeys(ids))


def _not_waiting(item_id: str, ev: dict | None, present: bool) -> str:
    """Why ``item_id`` cannot be accepted or rejected."""
    if not present:
        return f"no memory {item_id} waits for review (it is not in this memory's files)"
    state = (ev or {}).get("state")
    return f"{item_id} is not waiting for review (it is {state or 'current'})"


def _plan(action: str, ids: list[str], events: dict[str, dict],
          reason: str) -> list[tuple[str, str, str, str | None, Any, dict]]:
    """The lines of one accept or reject: (item, state, reason, by, invalid_at, extra fields).

    Accepting a proposal made by a pending memory accepts that memory too; rejecting a pending
    memory rejects the proposals it made (they gave it as the memory replacing theirs)."""
    out: list[tuple[str, str, str, str | None, Any, dict]] = []
    seen: set[str] = set()

    def add(item_id: str) -> None:
        if item_id in seen:
            return
        seen.add(item_id)
        ev = events[item_id]
        if ev["state"] == PENDING and action == "accept":
            out.append((item_id, CURRENT, reason or "accepted", None, None, {}))
        elif ev["state"] == PENDING:
            out.append((item_id, REJECTED, reason or "rejected", None, None, {}))
            for other, oev in events.items():
                if oev.get("state") == PROPOSED and oev.get("by") == item_id:
                    add(other)
        elif action == "accept":  # a proposal takes effect as it was judged
            out.append((item_id, str(ev.get("proposes") or "superseded"), ev.get("reason") or "",
                        ev.get("by"), ev.get("invalid_at"), {}))
            by = ev.get("by")
            if isinstance(by, str) and (events.get(by) or {}).get("state") == PENDING:
                add(by)
        else:  # a proposal rejected: the event before it comes back
            was = ev.get("before") or {}
            extra = _kept(was)
            out.append((item_id, was.get("state") or CURRENT,
                        reason or was.get("reason") or "proposal rejected", was.get("by"),
                        was.get("invalid_at"), extra))

    for item_id in ids:
        add(item_id)
    return out
