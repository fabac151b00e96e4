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
never hidden.
"""

from __future__ import annotations

import json
import logging
import re
import threading
from pathlib import Path
from typing import Any, Callable

from .errors import NotFoundError, ValidationError
from .files.atomic import append_line
from .files.jsonl_tail import JsonlTail, tail
from .models import Hit, parse_iso, utcnow

log = logging.getLogger("graphmem.validity")
FILE_NAME = "validity.jsonl"
POSSIBLY = "possibly superseded"
MAX_REASON = 2_000
_ID = re.compile(r"[0-9a-f]{24}")
_lock = threading.Lock()


def validity_file(spec_dir: str | Path) -> Path:
    """Where a spec folder keeps its validity log."""
    return Path(spec_dir) / "memory" / FILE_NAME


class ValidityLog(JsonlTail):
    """Item id -> its latest validity event, read incrementally from one ``validity.jsonl``."""

    def reset(self) -> None:
        self.events: dict[str, dict] = {}

    def take(self, rec: dict) -> None:
        if isinstance(rec.get("item"), str):
            self.events[rec["item"]] = rec


def validity_log(spec_dir: str | Path) -> ValidityLog:
    """The (cached, refreshed) validity events of one spec folder."""
    return tail(ValidityLog, validity_file(spec_dir))


def apply_validity(hits: list[Hit], include_history: bool,
                   spec_dir_of: Callable[[Hit], Path | None]) -> tuple[list[Hit], int]:
    """Hits without retired/superseded ones (and how many were hidden), or all of them marked.

    A memory only *possibly* superseded (the rule in ``possible_update``) stays, marked, and
    moves below the newer memory when both are in the list.
    """
    out, hidden = [], 0
    logs: dict[Path, ValidityLog] = {}  # one refresh per spec folder, not per hit
    for hit in hits:
        where = spec_dir_of(hit)
        if where is not None and where not in logs:
            logs[where] = validity_log(where)
        ev = logs[where].events.get(hit.id) if where else None
        if ev is None:
            out.append(hit)
        elif include_history or ev.get("state") == POSSIBLY:
            out.append(hit.model_copy(update={"metadata": {**hit.metadata, "validity": {
                "state": ev.get("state"), "reason": ev.get("reason"), "by": ev.get("by"),
                "valid_at": hit.time.isoformat() if hit.time else None,
                "invalid_at": ev.get("invalid_at"), "recorded_at": ev.get("recorded_at")}}}))
        else:
            hidden += 1
    pos = {h.id: i for i, h in enumerate(out)}
    for h in list(out):
        by = (h.metadata.get("validity") or {}).get("by")
        if (h.metadata.get("validity") or {}).get("state") == POSSIBLY and by in pos \
                and pos[by] > pos[h.id]:
            out.remove(h)
            out.insert(out.index(next(x for x in out if x.id == by)) + 1, h)
            pos = {x.id: i for i, x in enumerate(out)}
    return out, hidden


_NUMBER = re.compile(r"\d+(?:[.,_]\d+)*")
_skeletons: dict[str, tuple[int, dict[str, list[str]]]] = {}


def skeleton(text: str) -> str | None:
    """A note with its numbers blanked (None when it has none): the key of the no-LLM rule."""
    from .models import normalise

    norm = normalise(text)
    blank = _NUMBER.sub("#", norm)
    return blank if blank != norm else None


def possible_update(old: str, new: str) -> bool:
    """The rule without an LLM: the new note reads exactly like the old one except for its
    numbers (a version, a limit, a default), and those differ."""
    key = skeleton(new)
    return key is not None and key == skeleton(old) and \
        _NUMBER.findall(old.casefold()) != _NUMBER.findall(new.casefold())


def older_versions(bullets_file: Path, bullets: list[str], new: str) -> list[str]:
    """The latest older note of ``bullets`` (file order) that ``new`` updates (``possible_update``).

    The skeleton map is kept per file and extended with the lines appended since the last call.
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
        older = [t for t in index.get(key, []) if possible_update(t, new)]
        return older[-1:]  # the latest: older ones were flagged when it came (one event a write)


class ValidityMixin:
    """``retire`` and ``supersede`` on ``AsyncMemory``."""

    def _own_item(self, item_id: Any) -> Any:
        if not isinstance(item_id, str) or not _ID.fullmatch(item_id):
            raise ValidationError("must be a memory id (24 hex characters, as search returns)",
                                  field="id")
        if self.spec_dir is None:
            raise ValidationError("this operation needs a spec folder", field="spec_dir")
        rows = self.backends.local.index.rows_by_id([item_id])
        if not rows or rows[0]["spec"] != self.spec_key:
            raise NotFoundError(f"no memory {item_id} in {self.spec_dir}")
        return rows[0]

    def _log_event(self, item_id: str, state: str, reason: str, by: str | None, at: Any) -> dict:
        when = utcnow() if at is None else parse_iso(at)
        if when is None:
            raise ValidationError(f"must be an ISO 8601 time, got {at!r}", field="at")
        ev = {"item": item_id, "state": state, "by": by, "reason": self._clean(reason),
              "invalid_at": when.isoformat(timespec="seconds"),
              "recorded_at": utcnow().isoformat(timespec="seconds")}
        path = validity_file(self.spec_dir)
        append_line(path, json.dumps(ev, ensure_ascii=False))  # the truth: synced, never via a link
        return ev

    async def _flag_updates(self, kind: str, text: str, new_id: str) -> None:
        """After a new gotcha or pattern: with an LLM, the older ones it replaces are judged by
        the LLM and superseded (``supersession.py``); without one, or when its answer cannot be
        used, the older ones it seems to update are flagged (``possible_update``)."""
        from .models import stable_id

        llm = self._supersession_llm()
        if llm is None and skeleton(text) is None:
            return
        path = self.files.bullet_file(kind)
        bullets = self.files.load_bullets(kind)
        rule = older_versions(path, bullets, text) if skeleton(text) is not None else []
        rule_ids = [stable_id(self.project.key, self.spec_key, kind, old) for old in rule]
        judged = None if llm is None else \
            await self._judged_updates(llm, kind, text, new_id, bullets, rule_ids)
        if judged is not None:
            ids, reason = judged
            for old_id in ids:
                self._log_event(old_id, "superseded", reason or "replaced by a newer note",
                                new_id, None)
            if ids:
                await self._validity_to_graph(ids)
            return
        for old_id in rule_ids:
            if old_id != new_id:
                self._log_event(old_id, POSSIBLY, "a newer note says the same with other numbers",
                                new_id, None)
                await self._validity_to_graph([old_id])

    def _supersession_llm(self) -> Any:
        """The configured LLM, or None (none set, or it cannot be made: the rule decides)."""
        from .errors import GraphmemError
        from .providers import get_llm

        try:
            return get_llm(self.settings)
        except GraphmemError as exc:
            log.warning("no LLM for supersession: %s", exc)
            return None

    async def _judged_updates(self, llm: Any, kind: str, text: str, new_id: str,
                              bullets: list[str], rule_ids: list[str]) -> tuple[list[str], str] | None:
        """The LLM's judgement (ids it supersedes, reason), or None without a usable one."""
        from .errors import GraphmemError
        from .models import stable_id
        from .supersession import judge, same_anchor

        texts = {stable_id(self.project.key, self.spec_key, kind, b): b for b in bullets}
        texts.pop(new_id, None)
        gone = {i for i, ev in validity_log(self.spec_dir).events.items()
                if ev.get("state") in ("retired", "superseded")}
        order = [i for i in [*rule_ids, *same_anchor(self.spec_dir, new_id, texts)]
                 if i in texts and i not in gone]
        candidates = [(i, texts[i]) for i in dict.fromkeys(order)]
        if not candidates:
            return [], ""
        try:
            ids, reason = await judge(llm, kind, text, candidates)
        except GraphmemError as exc:  # a failed or unusable answer: the rule decides
            log.warning("supersession not judged: %s", exc)
            return None
        return ids, f"judged by {getattr(llm, 'name', 'the LLM')}: {reason}" if reason else \
            f"judged by {getattr(llm, 'name', 'the LLM')}"

    async def retire(self, id: str, reason: str, *, at: Any = None) -> dict:
        """Mark a memory as no longer true (it stays in the files; searches hide it)."""
        if not isinstance(reason, str) or not reason.strip() or len(reason) > MAX_REASON \
                or "\x00" in reason:
            raise ValidationError(f"must be a non-empty text of at most {MAX_REASON} characters",
                                  field="reason")
        await self._ep_settle()
        self._own_item(id)
        ev = self._log_event(id, "retired", reason.strip(), None, at)
        await self._validity_to_graph([id])  # code/about.py: ABOUT edges take invalid_at
        return ev

    async def supersede(self, id: str, new_text: str, *, reason: str = "", at: Any = None) -> dict:
        """Replace a gotcha or pattern with ``new_text``: the new one is written, the old one is
        logged as superseded by it."""
        await self._ep_settle()
        row = self._own_item(id)
        if row["kind"] not in ("gotcha", "pattern"):
            raise ValidationError(f"supersede takes a gotcha or a pattern, not a {row['kind']}; "
                                  "retire it and write the new memory instead", field="id")
        if not isinstance(reason, str) or len(reason) > MAX_REASON:
            raise ValidationError(f"must be a text of at most {MAX_REASON} characters",
                                  field="reason")
        report = await self._append(row["kind"], new_text, flag_updates=False)
        from .models import stable_id

        clean = self._clean(" ".join(new_text.split()) if isinstance(new_text, str) else new_text)
        new_id = stable_id(self.project.key, self.spec_key, row["kind"], clean)
        if new_id == id:
            raise ValidationError("is the same text as the memory it would supersede",
                                  field="new_text")
        ev = self._log_event(id, "superseded", reason or "superseded", new_id, at)
        await self._validity_to_graph([id])
        return {**ev, "new_id": new_id, "path": report.path}
