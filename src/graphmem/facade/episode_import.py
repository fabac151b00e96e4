"""An import's episodes on the façade: each checked against this memory's size limits and
redacted, written whole or its new tail appended (``files/episode_transfer.py``: never over
other content here), then its rows
in the episodes index (``graphmem sessions``, ``get_session``) and its turns, steps and summary in
the search index and the graph, in one index-journal entry as any spec write.
"""

from __future__ import annotations

import logging
from contextlib import nullcontext
from typing import TYPE_CHECKING

from ..errors import StorageError, ValidationError
from ..files import episode_transfer as et
from ..files.episode_items import summary_item
from ..models import MemoryItem, SaveReport

if TYPE_CHECKING:
    from .derived_sync import DerivedSync
    from .episode_log import EpisodeLog, _EpisodeState
    from .scope import Scope
    from .write_rules import WriteRules

log = logging.getLogger("graphmem.sessions")


async def import_episodes(episodes: EpisodeLog, scope: Scope, rules: WriteRules, sync: DerivedSync,
                          incoming: list[et.Incoming], skipped: list[tuple[str, str]],
                          later: bool = False) -> tuple[int, list[dict]]:
    """Write the exported episodes here -> how many were written, and each one taken (written,
    grown or already here) as its ``from``, ``to`` (its session id), ``new``, ``grew``, ``turns``,
    ``steps``, ``new_turns`` and ``new_steps``; one over a size limit, or whose id here holds
    other content, is added to ``skipped``. ``later``:
    indexed by their words, embedded by the next ``reindex`` (``embed_later``)."""
    from ..index.local_index import embed_later

    if not incoming:
        return 0, []
    state = episodes.state  # opened (so caught up with the files here) before anything is written
    ready = []
    for raw in incoming:
        inc = et.prepare(raw, rules.clean, scope.root, state.store.spec_dir)
        try:
            _fits(rules, inc)
        except ValidationError as exc:
            skipped.append((inc.where, f"episode {inc.sid} not written: {exc}"))
            continue
        ready.append(inc)
    await sync.guard()

    written: list[MemoryItem] = []

    def rows(p: et.Placed) -> None:  # under the session's lock: sizes and lines agree
        inc = p.incoming
        written.extend(_items(state, scope, inc, p.since or (0, 0),
                              p.since is None or inc.meta.get("summary") != p.summary_was))
        try:
            state.index.replace_session(state.spec, inc.meta, inc.turns, inc.steps,
                                        state.store.sizes(inc.sid))
        except StorageError as exc:  # the files have it; the next open re-reads them
            log.warning("episode %s: episodes index not updated: %s", inc.sid, exc)

    state.writer.settle()  # this process's queued rows first
    with sync.journal() as entry:
        try:
            placed = et.place(state.store, ready, then=rows)
        finally:  # the episodes written, also when a later one could not be (a full disk)
            with embed_later() if later else nullcontext():
                await sync.propagate(written, SaveReport(path=str(state.store.root)), entry)
    out = []
    for p in placed:
        inc = p.incoming
        if not p.new and p.since is None and not p.why.startswith("already here"):
            skipped.append((inc.where, f"episode {inc.sid} not written: {p.why}"))
            continue
        was = (0, 0) if p.new else p.since or (len(inc.turns), len(inc.steps))
        out.append({"from": f"{inc.where}: {inc.source}", "to": inc.sid, "new": p.new,
                    "grew": p.since is not None, "turns": len(inc.turns), "steps": len(inc.steps),
                    "new_turns": len(inc.turns) - was[0], "new_steps": len(inc.steps) - was[1]})
    return sum(p.new for p in placed), out


def _fits(rules: WriteRules, inc: et.Incoming) -> None:
    """Refuse an episode holding what ``record_turn``, ``record_step`` or
    ``set_session_summary`` would refuse here by size (``ValidationError`` naming the field)."""
    for n, t in enumerate(inc.turns):
        rules.check_size(t["content"], f"turns[{n}].content")
        rules.check_json_size(t.get("metadata"), f"turns[{n}].metadata")
    for n, s in enumerate(inc.steps):
        rules.check_json_size(s.get("payload"), f"steps[{n}].payload")
    if isinstance(inc.meta.get("summary"), str):
        rules.check_size(inc.meta["summary"], "meta.summary")


def _items(state: _EpisodeState, scope: Scope, inc: et.Incoming, since: tuple[int, int],
           summary: bool) -> list[MemoryItem]:
    """The searchable items an episode written or grown here adds: its turns and steps past the
    first ``since`` and (``summary``) its summary."""
    items = state.items(inc.sid, inc.turns[since[0]:], inc.steps[since[1]:])
    if summary and inc.meta.get("summary"):
        proj = scope.project
        items.append(summary_item(proj.key, proj.rel(state.store.spec_dir), inc.meta,
                                  proj.rel(state.store.session_file(inc.sid))))
    return items
