"""Recall on the façade: ``Memory.search`` and ``Memory.context`` over the derived stores.

Routing: the local index always answers (it is fast and offline). When the graph is on and
``DerivedStores.search_graph`` answers within ``settings.graph.search_deadline``, the graph adds what
the index lacks: its hits that the local index does not hold (written from another machine to a
shared FalkorDB, or while this index was failing) are fused with the local ones (weighted
reciprocal ranks, local first). Hits the index holds keep the index's ranking: on LoCoMo
(``bench/locomo.py --graph``) any weight given to the graph's order of the same items lowered
R@10 (.808 -> .805 at weight .1, .752 at .8), as Graphiti's BM25 + cosine alone ranks them far
below the index (R@10 .46). Each hit says which backend found it.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Sequence

from graphmem.graph.presence import in_use as graph_in_use
from ..errors import GraphError, ValidationError
from ..models import _SURROGATE, KINDS, Hit
from .scope import project_memory_dir

from graphmem.facade.derived import Collaborator

if TYPE_CHECKING:
    from .derived_sync import DerivedSync
    from .episode_log import EpisodeLog
    from .write_rules import WriteRules

log = logging.getLogger("graphmem.search")

SCOPES = ("spec", "project", "all")
MAX_LIMIT = 1000
MAX_QUERY_CHARS = 10_000
# Reciprocal-rank fusion: a graph-only hit ranked 1st lands after the local top 3; a hit both
# backends found rises. A small k keeps the top ranks apart (k=60 flattens them).
GRAPH_WEIGHT = 0.8
RRF_K = 10
CODE_POOL = 60  # local candidates that the files they are about re-order (code/recall.py)
CODE_SLACK = 10  # re-ranked hits kept beyond the limit, for freshness to move gone ones down

def check_query(query: Any, scope: Any, kinds: Any, limit: Any) -> tuple[str, tuple[str, ...] | None]:
    """Validate search arguments; returns the query and the kinds as a tuple (or None)."""
    if not isinstance(query, str) or not query.strip():
        raise ValidationError("must be a non-empty string", field="query")
    if len(query) > MAX_QUERY_CHARS or "\x00" in query or _SURROGATE.search(query):
        raise ValidationError(f"must be at most {MAX_QUERY_CHARS} characters of valid UTF-8, "
                              "without NUL", field="query")
    if scope not in SCOPES:
        raise ValidationError(f"must be one of {', '.join(SCOPES)}, got {scope!r}", field="scope")
    if isinstance(kinds, str):
        kinds = [kinds]
    if kinds is not None:
        if not isinstance(kinds, (list, tuple, set)) or not kinds:
            raise ValidationError(f"must be a list of kinds from {', '.join(KINDS)}", field="kinds")
        bad = [k for k in kinds if k not in KINDS]
        if bad:
            raise ValidationError(f"unknown kind {bad[0]!r}; known kinds: {', '.join(KINDS)}",
                                  field="kinds")
        kinds = tuple(sorted(set(kinds)))
    if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_LIMIT:
        raise ValidationError(f"must be an integer from 1 to {MAX_LIMIT}, got {limit!r}",
                              field="limit")
    return query.strip(), kinds


def check_files(files: Any, root: Path | None = None) -> list[str]:
    """Validate ``context(files=...)``: a list of at most 50 paths of files or folders, relative
    to the project (an absolute one inside ``root``, as agents' tools give them, is made
    relative; ``src/`` is ``src``, the project itself ``.``)."""
    if files is None:
        return []
    if isinstance(files, str) or not isinstance(files, (list, tuple)) or len(files) > 50:
        raise ValidationError("must be a list of at most 50 paths relative to the project",
                              field="files")
    from ..models import project_path

    out = []
    for n, f in enumerate(files):
        if not isinstance(f, str):
            raise ValidationError(f"must be a path string, got {type(f).__name__}",
                                  field=f"files[{n}]")
        try:
            out.append(project_path(f, root))
        except ValueError as exc:
            raise ValidationError(str(exc), field=f"files[{n}]") from None
    return out


@dataclass(eq=False)
class Recall(Collaborator):
    """Search and context of ``AsyncMemory`` over one ``Scope``; ``notes`` says what the
    caller of the last search or context should know (the graph did not answer, retired
    memories left out, a file nothing is known about)."""

    rules: WriteRules
    episodes: EpisodeLog
    sync: DerivedSync
    notes: list[str] = field(default_factory=list, init=False)
    # spec key -> its folder here: asked for every hit at every stage of a search
    _spec_dirs: dict[str, Path] = field(default_factory=dict, init=False, repr=False)


    async def search(self, query: str, scope: str = "spec", kinds: Sequence[str] | None = None,
                     limit: int = 10, rerank: bool = False, include_history: bool = False,
                     pending: bool = True) -> list[Hit]:
        """Memories ranked by relevance to ``query`` within this spec, project, or every project.

        Retired and superseded memories are left out unless ``include_history`` (then they carry
        ``metadata["validity"]``); ``notes`` then says how many matched. A memory repeating the
        query verbatim comes first; with ``pending``, the prompts agent hooks captured that no
        digest has read yet are searched too (``pending_recall.py``).
        """
        hits, hidden = await self._search(query, scope, kinds, limit, rerank, include_history,
                                          lookup=True, pending=pending)
        if hidden:
            self.notes.append(hidden_note(hidden))
        return hits

    async def _search(self, query: str, scope: str, kinds: Sequence[str] | None, limit: int,
                      rerank: bool, include_history: bool = False, lookup: bool = False,
                      pending: bool = False) -> tuple[list[Hit], int]:
        """``search``'s hits and how many retired or superseded ones it left out (``lookup``: a
        search's, verbatim memories first; ``pending``: with the spools' undigested prompts;
        a context's are neither)."""
        query, kinds = check_query(query, scope, kinds, limit)
        query = self.rules.clean(query)  # a pasted secret goes to no embedder, graph or log
        self.notes = []  # what the caller should know (the graph did not answer)
        if not isinstance(rerank, bool):
            raise ValidationError("must be true or false", field="rerank")
        if not isinstance(include_history, bool):
            raise ValidationError("must be true or false", field="include_history")
        if scope == "spec" and self.scope.project_wide:
            scope = "project"  # opened on a project: its own memory and every spec folder
        project, root = self.scope.project, self.scope.root
        projects = None if scope == "all" else [project.key]
        spec = self.scope.spec_key if scope == "spec" else None
        await self.episodes.settle()  # session turns queued for the index are in it before we search
        await self.sync.adopt()
        # After a pull from a shared graph the local index holds what the graph has for this
        # project, so the graph is not asked again (its search cost more than the pull).
        pulled = scope != "all" and await self._team_pull()
        be = self.derived
        from graphmem.code import named_files

        # In a project with code, a few more candidates than asked, for code recall to re-order
        # (LoCoMo, with no code, keeps its cost: p50 8 ms, not 22).
        focus, snap = named_files(query, root)
        code = bool(focus or (snap is not None and snap.files))  # a project with code
        fetch = min(MAX_LIMIT, max(limit, CODE_POOL)) if code else limit
        from graphmem.facade.team import own_key, team_key

        # teammates' items taken in from a shared graph rank with the project's own
        mine = None if projects is None else [*projects, team_key(project.key)]
        local = own_key(await be.search_local(query, projects=mine, spec=spec, kinds=kinds,
                                              catch_up=project if projects else None,
                                              limit=fetch, rerank=rerank))
        graph = None if pulled else await self._search_graph(query, projects, spec, kinds, limit)
        hits = fuse(local, graph, fetch) if graph else local
        specs = {self._spec_dir_of(h) for h in hits} - {None}
        if spec is not None:
            specs = {Path(root) / spec}
        else:
            specs.add(Path(self.scope.spec_dir))

        from ..code.after_ranking import rerank_and_mark

        # re-ranked by code, freshness marked, "where is X now" answered (code/after_ranking.py)
        hits = rerank_and_mark(hits, query, code=code, focus=focus, snap=snap, root=root,
                               project=project.key, spec=spec, own_spec=self.scope.spec_key,
                               specs=sorted(map(str, specs)), spec_dir_of=self._spec_dir_of,
                               fetch=self._fetcher(kinds), keep=limit + CODE_SLACK)
        if lookup:
            hits = self._lookup(hits, local, query, kinds, snap, pending and (
                scope != "spec" or spec == self.scope.project.rel(project_memory_dir(root))),
                limit)
        from graphmem.files.validity_log import apply_validity

        hits = self._version_answer(hits, query, kinds, snap)
        hits, hidden = apply_validity(hits, include_history, self._spec_dir_of,
                                      fetch=self._fresh_fetcher(kinds, snap, query))
        return be.localise(hits[:limit], project), hidden  # only the hits returned: fewer copies

    def _lookup(self, hits: list[Hit], local: list[Hit], query: str,
                kinds: tuple[str, ...] | None, snap, pending: bool, limit: int) -> list[Hit]:
        """A search's hits with the memories repeating ``query`` first, and with ``pending``
        the project's undigested prompts among them (``pending_recall.py``)."""
        from graphmem.agent_spool import pending_prompts

        from .pending_recall import verbatim_first, with_pending

        fresh = self._fresh_fetcher(kinds, snap, query)
        hits = verbatim_first(hits, local, query, fresh)
        if not pending or (kinds is not None and "turn" not in kinds):
            return hits
        proj = self.scope.project
        prompts = [{**p, "prompt": self.rules.clean(p["prompt"])}
                   for p in pending_prompts(self.scope.root)]
        return with_pending(hits, prompts, query, proj.key,
                            proj.rel(project_memory_dir(self.scope.root)), limit)

    def _version_answer(self, hits: list[Hit], query: str, kinds: tuple[str, ...] | None,
                        snap=None) -> list[Hit]:
        """``hits`` with the current memory of a package's version first when ``query`` asks
        which version of a package this spec's sessions announced ("Which version of django do
        we pin?"): the latest session's note stating it (``validity_log.statement``), scoring as
        the best hit, fetched when the search did not find it, and marked
        ``metadata["current_value"]`` (a context shows it first, under "Current value")."""
        from graphmem.files.validity_log import asked_packages

        asked = asked_packages(query) if self.scope.spec_dir is not None else []
        if not asked:
            return hits
        from .validity import current_versions

        ids = current_versions(self.scope.files, asked)
        if not ids:
            return hits
        have = {h.id: h for h in hits}
        missing = [i for i in ids if i not in have]
        have.update({h.id: h for h in self._fresh_fetcher(kinds, snap, query)(missing)}
                    if missing else {})
        top = max((h.score for h in hits), default=0.0)
        first = [have[i].model_copy(update={"score": max(have[i].score, top), "metadata": {
            **have[i].metadata, "current_value": True}}) for i in ids if i in have]
        taken = {h.id for h in first}
        return [*first, *(h for h in hits if h.id not in taken)]

    def _fresh_fetcher(self, kinds: tuple[str, ...] | None, snap=None, query: str = ""):
        """``fetch(ids)`` for validity (``apply_validity``): the index rows of ``ids`` as hits
        of ``kinds``, with their freshness marks."""
        from ..code import with_freshness

        fetch = self._fetcher(kinds)
        return lambda ids: with_freshness(fetch(ids, set()), self.scope.root,
                                          spec_dir_of=self._spec_dir_of, snap=snap, query=query)

    def _fetcher(self, kinds: tuple[str, ...] | None):
        """``fetch(ids, known)`` for code recall: the index rows of ``ids`` that ``known`` lacks,
        as hits of ``kinds``."""
        return lambda ids, known: [h for h in self.hits_by_id(ids, known, localise=False)
                                   if kinds is None or h.kind in kinds]

    def _spec_dir_of(self, hit: Hit) -> Path | None:
        """The spec folder on this machine that holds a hit of this project (None otherwise)."""
        if not hit.spec or hit.project != self.scope.project.key:
            return None
        got = self._spec_dirs.get(hit.spec)
        if got is None:
            got = self._spec_dirs[hit.spec] = Path(self.scope.root) / hit.spec
        return got

    def hits_by_id(self, ids: list[str], known: set[str] | frozenset[str] = frozenset(),
                   localise: bool = True) -> list[Hit]:
        """Index rows of ``ids`` (those it holds and ``known`` lacks) as hits scoring 0, with
        ``local_path`` set unless not ``localise`` (a search sets it on the hits it returns)."""
        from ..index.local_search import hit_of as _hit

        ids = [i for i in ids if i not in known]
        rows = {r["id"]: r for r in self.derived.local.index.rows_by_id(ids)} if ids else {}
        hits = [_hit(rows[i], 0.0) for i in ids if i in rows]
        return self.derived.localise(hits, self.scope.project) if localise else hits

    async def _team_pull(self) -> bool:
        """Take in teammates' writes from a shared graph first (``team.py``) -> whether that
        worked; never fails a search."""
        if not graph_in_use(self.settings):
            return False
        from graphmem.facade import team
        from ..errors import GraphmemError, IndexMismatchError

        try:
            return await asyncio.wait_for(team.pull(self.sync), self.settings.graph.timeout) \
                is not None
        except IndexMismatchError:  # another embedder's graph: the user must act (as for search)
            raise
        except asyncio.TimeoutError:
            log.warning("taking in the shared graph's changes took over %.0fs; searched without",
                        self.settings.graph.timeout)
        except GraphmemError as exc:
            log.warning("could not take in the shared graph's changes (%s)", exc)
        return False

    async def _search_graph(self, query: str, projects: list[str] | None, spec: str | None,
                            kinds: tuple[str, ...] | None, limit: int) -> list[Hit] | None:
        """The graph's hits, or None when it is off, failing or slower than the deadline."""
        fn = getattr(self.derived, "search_graph", None)
        if fn is None or not graph_in_use(self.settings):
            return None
        try:
            # Items the local index holds keep its rank (``search``), so the graph skips them
            # and returns its best others (and fetches no fields when there are none).
            hits = await asyncio.wait_for(fn(query, projects, list(kinds) if kinds else None, limit,
                                             spec=spec, exclude=self.derived.known_locally),
                                          self.settings.graph.search_deadline)
        except asyncio.TimeoutError:
            note = (f"graph search slower than {self.settings.graph.search_deadline:.1f}s; "
                    "the local index answered alone")
            log.info(note)  # the caller is told by ``notes`` (the CLI prints them on stderr)
            self.notes.append(note)
            return None
        except GraphError as exc:
            note = f"graph search failed ({exc}); the local index answered alone"
            log.info(note)
            self.notes.append(note)
            return None
        if hits is None:
            return None
        refused = getattr(hits, "refused", None)  # winners that failed their checks
        if refused:
            from graphmem.facade.team import note_refused

            note_refused(self.derived.local.index, refused)  # one warning per home, not per call
        return [h for h in hits if spec is None or h.spec in (None, spec)]

    async def context(self, task: str, max_tokens: int = 1500,
                      files: Sequence[str] | None = None) -> str:
        """A markdown block of the gotchas, patterns, files and lessons most relevant to ``task``.

        ``files``: paths (relative to the project) the agent is working on; memories anchored
        to them come first, whatever their score; a folder pins the newest few anchored to
        files under it (``code/pins.py``).
        """
        from graphmem.rules.context import build_context, check_budget

        check_budget(max_tokens)
        query, _ = check_query(task, "project", None, 1)
        paths = check_files(files, self.scope.root)
        hits, retired = await self._search(query, "project", None, 40, False)
        pinned = await self._anchored_hits(paths) if paths else []
        if paths:  # not fatal (a file about to be created), but a typo must show
            from ..code.pins import unknown
            from ..code.tree import snapshot

            lost = unknown(self._specs(), paths, self.scope.root, snapshot(self.scope.root))
            if lost:
                self.notes.append(unknown_note(lost))
        if pinned:  # first, with the score the search gave them: the floor is the best score
            ids, score = {h.id for h in pinned}, {h.id: h.score for h in hits}
            hits = [*{h.id: h.replaced(score=score.get(h.id, 0.0)) for h in pinned}.values(),
                    *(h for h in hits if h.id not in ids)]
        return build_context(query, hits, max_tokens, self.scope.root,
                             pinned={h.id for h in pinned}, retired=retired, notes=self.notes)

    def _specs(self) -> list:
        """The spec folders whose anchors ``context(files=)`` reads: this one, or the project's."""
        from ..files.walk import spec_folders

        return spec_folders(self.scope.root) if self.scope.project_wide else [self.scope.spec_dir]

    async def _anchored_hits(self, paths: list[str]) -> list[Hit]:
        """The memories anchored to ``paths`` (files or folders, ``code/pins.py``), newest first,
        with their freshness and validity marks; gone, retired and superseded ones out (as a
        search leaves them out)."""
        from graphmem.code import with_freshness
        from ..code.pins import cap_folders, pinned_ids
        from ..code.tree import snapshot
        from graphmem.files.validity_log import apply_validity

        root = self.scope.root
        ids, folder_of = pinned_ids(self._specs(), paths, root, snapshot(root))
        hits, _ = apply_validity(self.hits_by_id(ids), False, self._spec_dir_of,
                                 fetch=lambda more: self.hits_by_id(more, localise=False))
        hits = with_freshness(hits, root, spec_dir_of=self._spec_dir_of)
        return cap_folders((h for h in hits
                            if (h.metadata.get("freshness") or {}).get("state") != "gone"), folder_of)


def hidden_note(count: int) -> str:
    """What a search says of the retired and superseded memories it left out (and those
    pending or rejected in review)."""
    return (f"{count} matching {'memory' if count == 1 else 'memories'} left out: retired or "
            "superseded, or not accepted in review (include_history, CLI --include-history, "
            "shows them)")


def unknown_note(paths: list[str], shown: int = 5) -> str:
    """What a context says of the files given that nothing is known about (a typo must show)."""
    named = ", ".join(paths[:shown]) + (f" and {len(paths) - shown} more" if len(paths) > shown else "")
    return (f"nothing is known about {named} yet: not in the project, and no memory names "
            f"{'it' if len(paths) == 1 else 'them'}")


def fuse(local: list[Hit], graph: list[Hit], limit: int) -> list[Hit]:
    """Weighted reciprocal-rank fusion of local and graph hits (local weighs more)."""
    scores: dict[str, float] = {}
    by_id: dict[str, Hit] = {}
    for weight, hits in ((1.0, local), (GRAPH_WEIGHT, graph)):
        for rank, hit in enumerate(hits):
            scores[hit.id] = scores.get(hit.id, 0.0) + weight / (RRF_K + rank + 1)
            by_id.setdefault(hit.id, hit)
    ranked = sorted(by_id.values(), key=lambda h: -scores[h.id])[:limit]
    return [h.replaced(score=round(scores[h.id] * RRF_K, 6)) for h in ranked]
