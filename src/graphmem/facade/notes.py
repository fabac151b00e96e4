"""A spec's notes on the façade: session insights, the codebase map, gotchas and patterns.

Each write: validate (``models.py``) -> size and redaction (``write_rules.py``) -> the file store
(``files/spec_store.py``, atomic, locked) -> the derived stores (``derived_sync.py``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import json
import logging
import threading
from pathlib import Path

from ..errors import ValidationError
from .derived import Collaborator
from ..models import (CodebaseMap, MemoryItem, Note, SaveReport, SessionInsights, SessionNumber,
                     check_json, parse)

log = logging.getLogger("graphmem")
_WARNED: set[tuple[str, str]] = set()
_WARNED_LOCK = threading.Lock()


def as_json(value: dict) -> dict:
    """``value`` as a JSON file would hold it once ``json.dump`` wrote it (keys as text, tuples
    as lists); what ``json.dump`` refuses (sets, bytes, cycles) is refused here too."""
    try:
        return json.loads(json.dumps(value))
    except (TypeError, ValueError, RecursionError) as exc:
        raise ValidationError(f"cannot be written as JSON: {exc}", field="insights") from None


def kept_as_written(spec_dir: Path | None, exc: ValidationError) -> None:
    """Warn once per process, spec and field that a session is kept as the agent wrote it."""
    key = (str(spec_dir), exc.field or "")
    with _WARNED_LOCK:
        if key in _WARNED:
            return
        _WARNED.add(key)
    log.warning("session kept as written (graphmem reads its text; `graphmem doctor` lists it): "
                "%s", exc)

if TYPE_CHECKING:
    from .derived_sync import DerivedSync
    from ..files.spec_store import SpecStore
    from .episode_log import EpisodeLog
    from .validity import Validity
    from .write_rules import WriteRules


@dataclass(eq=False)
class SpecNotes(Collaborator):
    """The reference layout's notes of one spec (``Scope.files``: a project-only scope refuses
    every operation, naming ``spec_dir``)."""

    rules: WriteRules
    episodes: EpisodeLog
    sync: DerivedSync
    validity: Validity

    @property
    def files(self) -> "SpecStore":
        return self.scope.files

    # ---- session insights -----------------------------------------------------------------
    async def save_session_insights(self, session_num: int, insights: dict,
                                    as_written: bool = False, hold: bool = False) -> SaveReport:
        """Save one session's learnings to ``session_insights/session_NNN.json``; with
        ``as_written`` (an agent's own output) what the model cannot interpret is kept as given,
        read for its text and reported once, never refused (``kept_as_written``); with ``hold``
        the memories it adds are pending review (``held``)."""
        parse(SessionNumber, {"session_num": session_num}, "session_num", wrapped=True)
        if as_written and isinstance(insights, dict):
            insights = as_json(insights)  # what json.dump would store: int keys, tuples
        if isinstance(insights, dict):  # extra keys are kept as given: they must be JSON
            check_json(insights, "insights")
        try:
            data = parse(SessionInsights, insights, "insights").model_dump(exclude_none=True)
        except ValidationError as exc:
            if not as_written or not isinstance(insights, dict):
                raise
            data = insights  # the agent's output as it wrote it; its text is still read
            kept_as_written(self.scope.spec_dir, exc)
        else:
            self.rules.check_size(insights, "insights")
        await self.sync.guard()
        data = self.rules.clean(data)  # unset optional keys stay out
        files = self.files
        before = self._ids() if hold else None
        with self.sync.journal() as entry:
            old = files.read_session_insights(session_num)
            path, saved = files.save_session_insights(session_num, data)
            if self.sync.deferred and before is None:  # the rest once the caller has its answer
                olds: list[MemoryItem] = []  # (write_behind.py; a held write is never deferred)

                def behind() -> list[MemoryItem]:
                    got, olds[:] = self._session_items(session_num, old, path)
                    return got
                return self.sync.defer(entry, behind, SaveReport(path=str(path)), lambda got: (
                    self._after_session(session_num, data, old, olds, got)))
            items, old_items = self._session_items(session_num, old, path)
            self.held(before, items, f"session {session_num}")
            report = await self.sync.propagate(items, SaveReport(path=str(path)), entry)
        await self._after_session(session_num, data, old, old_items, items)
        return report

    def _session_items(self, session_num: int, old: dict | None,
                       path: Path) -> tuple[list[MemoryItem], list[MemoryItem]]:
        """A saved session's items (counted over all sessions, with the items its old version
        shared with others counted again) and its old version's items."""
        files = self.files
        items = files.insight_items(only_session=session_num)  # counted over all sessions
        old_items = files.session_items(old, path) if old is not None else []
        shared = {i.id for i in old_items} - {i.id for i in items}
        if shared:  # what the old version shared with other sessions: counted again without it
            items += [i for i in files.insight_items() if i.id in shared]
        return items, old_items

    async def _after_session(self, session_num: int, data: dict, old: dict | None,
                             old_items: list[MemoryItem], items: list[MemoryItem]) -> None:
        """After a saved session's items are indexed: the old version's own items dropped, the
        validity flags it raises."""
        if old is not None:  # saved again: what only the old version held is no longer memory
            await self.sync.forget_replaced(old_items, items)
        await self.validity.flag_value_updates(session_num, items)
        await self.validity.flag_failed_approaches(session_num, data, items)
        done = data.get("subtasks_completed")
        if isinstance(done, list) and all(isinstance(x, str) for x in done):
            await self.validity.flag_reverts(session_num, done, items)

    async def load_all_insights(self) -> list[dict]:
        """Every session's insights, oldest first."""
        return self.files.load_all_insights()

    # ---- codebase map -----------------------------------------------------------------------
    async def update_codebase_map(self, discoveries: dict[str, str],
                                  hold: bool = False) -> SaveReport:
        """Merge file purposes into ``codebase_map.json`` (with ``hold``, the purposes it adds
        are pending review: ``held``)."""
        if isinstance(discoveries, dict):
            check_json(discoveries, "discoveries")
        files = parse(CodebaseMap, {"files": discoveries}, "discoveries", wrapped=True).files
        self.rules.check_size(files, "discoveries")
        await self.sync.guard()
        files = self.rules.clean(files)
        before = self._ids() if hold else None
        with self.sync.journal() as entry:
            path = self.files.update_codebase_map(files)
            report = SaveReport(path=str(path))
            if self.sync.deferred and before is None:
                return self.sync.defer(entry, lambda: self.files.map_items(files), report)
            items = self.files.map_items(files)
            self.held(before, items, "the codebase map")
            return await self.sync.propagate(items, report, entry)

    def _ids(self) -> set[str]:
        """The ids of every memory in the spec's files (what a held write adds is the rest)."""
        return {i.id for i in self.files.items()}

    def held(self, before: set[str] | None, items: list[MemoryItem], where: str) -> None:
        """With ``before`` (a held write: the ids there were), log the new ``items`` pending
        review, after the files have them and before any index does (``Validity.hold``)."""
        if before is not None:
            self.validity.hold([i.id for i in items if i.id not in before], "agent-hooks",
                               f"held for review: written by the agent hooks ({where})")

    async def load_codebase_map(self) -> dict[str, str]:
        """File path -> purpose."""
        return self.files.load_codebase_map()

    # ---- gotchas and patterns -------------------------------------------------------------
    async def append(self, kind: str, text: str, flag_updates: bool = True) -> SaveReport:
        """Add a gotcha or pattern (deduplicated); with ``flag_updates``, an older note it seems
        to update is marked "possibly superseded" (``validity.py``)."""
        note = parse(Note, {"text": text}, kind, wrapped=True)
        self.rules.check_size(note.text, kind)
        await self.sync.guard()
        clean = self.rules.clean(note.text)
        files = self.files
        with self.sync.journal() as entry:
            added = files.append_bullet(kind, clean)
            report = SaveReport(path=str(files.bullet_file(kind)),
                                files="written" if added else "unchanged")
            items = files.bullet_items(kind, [clean]) if added else []
            if self.sync.deferred and items:
                report.items = len(items)
                after = (lambda got: self.validity.flag_updates(kind, clean, got[0].id)) \
                    if flag_updates else None
                return self.sync.defer(entry, lambda: items, report, after)
            report = await self.sync.propagate(items, report, entry)
        if items and flag_updates:
            await self.validity.flag_updates(kind, clean, items[0].id)
        return report

    async def take_note(self, kind: str, text: str) -> SaveReport:
        """A gotcha or pattern an agent tool may have written to the file itself: indexed as
        the file says it when it is there already, else appended (``append``)."""
        said = self.files.said(kind, text) if isinstance(text, str) and text.strip() else None
        if said is None:
            return await self.append(kind, text)
        await self.sync.guard()
        clean = self.rules.clean(said)
        with self.sync.journal() as entry:
            report = SaveReport(path=str(self.files.bullet_file(kind)), files="unchanged")
            items = self.files.bullet_items(kind, [clean])
            if self.sync.deferred:
                report.items = len(items)
                return self.sync.defer(entry, lambda: items, report)
            return await self.sync.propagate(items, report, entry)

    async def supersede(self, id: str, new_text: str, *, reason: str = "", at: Any = None) -> dict:
        """Replace a gotcha or pattern with ``new_text``: the new one is written, the old one is
        logged as superseded by it."""
        from ..errors import ValidationError
        from ..models import stable_id
        from graphmem.files.validity_log import MAX_REASON

        await self.episodes.settle()
        row = self.validity.own_item(id)
        if row["kind"] not in ("gotcha", "pattern"):
            raise ValidationError(f"supersede takes a gotcha or a pattern, not a {row['kind']}; "
                                  "retire it and write the new memory instead", field="id")
        if not isinstance(reason, str) or len(reason) > MAX_REASON:
            raise ValidationError(f"must be a text of at most {MAX_REASON} characters",
                                  field="reason")
        with self.validity.claim(id):  # the loser of a race writes no new note
            try:
                report = await self.append(row["kind"], new_text, flag_updates=False)
            except ValidationError as exc:  # name the argument the caller gave, not the writer's
                if (exc.field or "").split(".")[0] != row["kind"]:
                    raise
                raise ValidationError(str(exc).removeprefix(f"{exc.field}: "),
                                      field="new_text") from None
            clean = self.rules.clean(" ".join(new_text.split()) if isinstance(new_text, str)
                                      else new_text)
            assert self.scope.spec_key is not None  # append wrote to the spec's files
            new_id = stable_id(self.scope.project.key, self.scope.spec_key, row["kind"], clean)
            if new_id == id:
                raise ValidationError("is the same text as the memory it would supersede",
                                      field="new_text")
            # the mark reads "superseded: replaced by ..."
            ev = self.validity.log_event(id, "superseded", reason.strip() or
                                         f"replaced by {new_id}", new_id, at)
        await self.validity.to_graph([id])
        return {**ev, "new_id": new_id, "path": report.path}

    async def load_bullets(self, kind: str) -> list[str]:
        """Every gotcha or pattern, in file order."""
        return self.files.all_bullets(kind)

    # ---- whole spec -------------------------------------------------------------------------
    async def summary(self) -> dict[str, Any]:
        """Counts and the last three sessions, in the reference's shape."""
        files = self.files
        sessions = files.sessions()  # read once for every count
        recent = [files.insight_copy(s) for _, s in sessions[-3:]]
        return {
            "total_sessions": len(sessions),
            "total_files_mapped": len(files.load_codebase_map(sessions)),
            "total_patterns": len(files.all_bullets("pattern", sessions)),
            "total_gotchas": len(files.all_bullets("gotcha", sessions)),
            "recent_insights": recent,
        }

    async def clear(self) -> None:
        """Delete this spec's memory files and its derived index entries."""
        await self.episodes.settle()  # queued session rows land before the spec's rows are dropped
        await self.sync.adopt()
        self.files.clear()
        if self.derived_ref.opened or self.settings.home.exists():
            await self.derived.forget_spec(self.scope)

    async def items(self) -> list[MemoryItem]:
        """Every searchable item held in this spec's files: insights, map, bullets and sessions."""
        from ..files.walk import spec_items

        return spec_items(self.scope.project, self.files.spec_dir)
