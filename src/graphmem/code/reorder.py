"""Code recall: re-rank a project's search candidates by the files the best of them are about.

A coding task's text rarely names the code it will change, but its best lexical and semantic
matches usually are about that code. So the files anchored to the top ``prf_hits`` candidates
(their own paths and their session's files, each weighted by the candidate's score and shared
among its files) plus the files the query names (weight 1) predict where the task is; every
candidate gains ``file_gain`` times the summed weight of its files (against the best candidate's
sum), and the memories most about the best predicted files join the candidates
(pseudo-relevance feedback on files, not on words). Newer memories gain
``recency_gain * position ** recency_power``, where
``position`` is the item's place in the project's write history (1 = newest): code written
last is what later changes touch. These gains count as far as the prediction is trusted
(``prediction_trust``): when the best match has no anchor and the anchored candidates barely
match, twenty memories about one file do not outrank it. Among the memories about one predicted file, the newest pieces
of work gain most (``file_recency * file_recency_decay ** rank``, rank 0 = the latest work
anchored there, weighted by the file's predicted weight): the code a task changes was last
written by them. The extras are one item per piece of work (a session, or the items written
together), so forty extras are forty sessions, not three sessions' turns. Then one item per
session before a second one: a session is one piece of work, and ten lines of one change crowd
out the others.

A query naming a symbol that a recorded piece of work removed (``changes.py``; "How does
``refund`` work?" after ``refund`` was deleted) puts that work's memories first, its newest
insight, then its newest step or turn (``removed_items`` of them), each saying in
``metadata["removed"]`` what was removed, where and at which commit: the session that removed a
symbol is what explains it. It costs a dict lookup per word of the query.

Measured on ``bench/codemem.py`` (pytest, entire-cli); see the README's "Coding memory" part.
Items with no anchor record are untouched (prose memories: LoCoMo ranks as before).

``rerank`` is pure (arrays in, order out); ``code_recall`` gathers its inputs from the anchor
books and the index.
"""

from __future__ import annotations

import bisect
from itertools import repeat
from pathlib import Path
from typing import Callable, Sequence

from ..models import Hit
from .anchors import AnchorBook, book, query_symbols
from .code_caches import CACHES
from .code_tuning import current

# The knobs (``prf_hits``, ``file_gain``, ...) are ``code_tuning.CodeTuning``'s, chosen on
# bench/codemem.py R@10: docs/tuning.md, "Code recall".
KIND_ORDER = {"insight": 0, "step": 1, "turn": 2}  # which of a work's memories come first


def predict_files(scores: Sequence[float], files: Sequence[Sequence[str]],
                  named: set[str] | frozenset[str] = frozenset(), top: int | None = None
                  ) -> dict[str, float]:
    """File -> weight: the files of the ``top`` best candidates (each candidate's score shared
    among its files by ``1 / sqrt(n)``) plus ``named_weight`` for each file the query names."""
    t = current()
    weight: dict[str, float] = {}
    best = max(scores, default=0.0) or 1.0
    ranked = sorted(range(len(scores)), key=lambda i: -scores[i])[:top or t.prf_hits]
    for i in ranked:
        fs = files[i]
        if not fs or scores[i] <= 0:
            continue
        share = scores[i] / best / len(fs) ** 0.5
        for f in fs:
            weight[f] = weight.get(f, 0.0) + share
    for f in named:
        weight[f] = weight.get(f, 0.0) + t.named_weight
    return weight


def prediction_trust(scores: Sequence[float], files: Sequence[Sequence[str]],
                     named: set[str] | frozenset[str] = frozenset()) -> float:
    """How much the code gains count (0..1): fully when the query names a file or the best
    match is about code, or the best anchored candidate scores ``trust_full`` of the best
    match's score; in proportion below that. Memories about one file that barely match (a
    prose note matching best) do not rise above it by their number and their recency alone."""
    best = max(scores, default=0.0)
    if named or best <= 0:
        return 1.0
    anchored = max((s for s, fs in zip(scores, files) if fs), default=0.0)
    return min(1.0, anchored / best / current().trust_full)


def rerank(scores: Sequence[float], files: Sequence[Sequence[str]], groups: Sequence[str],
           positions: Sequence[float | None], named: set[str] | frozenset[str] = frozenset(),
           latest: Sequence[dict[str, int]] | None = None) -> tuple[list[int], list[float]]:
    """The candidates' new order and scores (see the module docstring).

    ``scores``: first-stage scores (best 1, extras 0); ``files``: each candidate's anchored
    files (empty: no anchors, left as it was); ``groups``: its session (or its own id);
    ``positions``: its place in the write history, 1 = newest (None: unknown); ``latest``:
    for each candidate, predicted file -> its piece of work's rank among the newest anchored
    there (0 = the latest; absent: older than ``scan``). A candidate's file gain is the summed
    weight of its files, against the best candidate's sum.
    """
    t = current()
    weight = predict_files(scores, files, named)
    recent = newest_work_gain(weight, latest) if latest is not None else [0.0] * len(scores)
    about = _file_sums(weight, files)
    top = max(about, default=0.0) or 1.0
    trust = prediction_trust(scores, files, named)
    new = []
    for s, fs, a, pos, r in zip(scores, files, about, positions, recent):
        if not fs:
            new.append(s)
            continue
        gain = t.file_gain * a / top + r
        if pos is not None:
            gain += t.recency_gain * pos ** t.recency_power
        new.append(s + trust * gain)
    order = sorted(range(len(new)), key=lambda i: -new[i])
    seen: set[str] = set()
    first: list[int]
    later: list[int]
    first, later = [], []
    for i in order:  # one item per session first, repeats after every session's best
        (later if t.one_per_session and groups[i] in seen and files[i] else first).append(i)
        seen.add(groups[i])
    return first + later, new


def _file_sums(weight: dict[str, float], files: Sequence[Sequence[str]]) -> list[float]:
    """Each candidate's summed file weight, added in its files' order (candidates of one
    record share its list of files: summed once)."""
    done: dict[int, float]  # id(list of files) -> its sum
    get, done = weight.get, {}
    out = []
    for fs in files:
        got = done.get(id(fs))
        if got is None:
            got = done[id(fs)] = sum(map(get, fs, repeat(0.0)))
        out.append(got)
    return out


def newest_work_gain(weight: dict[str, float], latest: Sequence[dict[str, int]]) -> list[float]:
    """Each candidate's gain as recent work about the predicted files: the sum over its files of
    ``file_recency * file_recency_decay ** rank``, each scaled by the file's weight against the
    best file's."""
    t = current()
    best = max(weight.values(), default=0.0) or 1.0
    return [t.file_recency * sum(weight.get(f, 0.0) / best * t.file_recency_decay ** r
                               for f, r in ranks.items()) for ranks in latest]


class _History:
    """Write times of a book's records, sorted, to place an item in the project's history.

    Kept up to date from the items the book read since (``AnchorBook.recorded``): each moves
    its time in the sorted list, so a search after a write does not sort every record again."""

    REBUILD_SHARE = 8  # more new items than 1/8 of those known: sorted again from scratch

    def __init__(self) -> None:
        self.records: dict | None = None  # the book's records this follows (a new dict: over)
        self.seen = 0  # entries of ``recorded`` taken
        self.at: dict[str, str] = {}  # item id -> its record's time, as in ``times``
        self.times: list[str] = []

    def position(self, b: AnchorBook, at: str | None) -> float | None:
        if b.records is not self.records or self.seen > len(b.recorded):
            self.records, self.seen, self.at, self.times = b.records, 0, {}, []
        if self.seen < len(b.recorded):
            self._catch_up(b)
        if not at or not self.times:
            return None
        return bisect.bisect_right(self.times, at) / len(self.times)

    def _catch_up(self, b: AnchorBook) -> None:
        new = dict.fromkeys(b.recorded[self.seen:])
        self.seen = len(b.recorded)
        if len(new) * self.REBUILD_SHARE > len(self.at):
            self.at = {i: r.get("at") or "" for i, r in b.records.items()}
            self.times = sorted(self.at.values())
            return
        for item_id in new:
            t = b.records[item_id].get("at") or ""
            old = self.at.get(item_id)
            if old is not None:
                del self.times[bisect.bisect_left(self.times, old)]
            bisect.insort(self.times, t)
            self.at[item_id] = t


def code_recall(hits: list[Hit], spec_dir_of: Callable[[Hit], Path | None],
                specs: Sequence[str | Path], named: set[str],
                fetch: Callable[[list[str], set[str]], list[Hit]] | None = None,
                keep: int | None = None, query: str = "", snap=None) -> list[Hit]:
    """``hits`` re-ranked by ``rerank``, with the memories most about the predicted files added
    (``fetch(ids, known) -> hits``), the best ``keep`` of them (all: None); unchanged when no
    hit has an anchor record. The works that removed symbols ``query`` names come first (not
    when ``snap``, the project now, defines them again)."""
    books, t = [book(s) for s in specs], current()
    order, scores = _by_files(hits, spec_dir_of, specs, named, fetch)
    removed = removals(query, books, snap) if query else []
    works = touched_works(query, books, snap) if query and t.touched_works else []
    if not removed and not works:  # the usual: only the hits kept are copied with their score
        return _scored(order, scores, keep)
    ranked = _scored(order, scores, None)
    first = removal_hits(removed, ranked, fetch)
    wrote = touched_hits(works, ranked, fetch)
    if wrote:
        ids = {h.id for h in wrote}
        rest = [h for h in ranked if h.id not in ids]
        after = t.touched_after
        at = rest[after - 1].score if 0 < after <= len(rest) else \
            max((h.score for h in rest), default=0.0)
        wrote = [h.replaced(score=round(max(h.score, at - (n + 1) * 1e-4), 6))
                 for n, h in enumerate(wrote)]  # scored as where they stand
        ranked = rest[:after] + wrote + rest[after:]
    if first:
        ids = {h.id for h in first}
        ranked = first + [h for h in ranked if h.id not in ids]
    return ranked[:keep]


def _scored(order: list[Hit], scores: list[float] | None, keep: int | None) -> list[Hit]:
    """The first ``keep`` of ``order`` (all: None), each with its new score (as they are when
    ``scores`` is None)."""
    if scores is None:
        return order[:keep]
    return [h.replaced(score=round(s, 6)) for h, s in zip(order[:keep], scores)]


def removals(query: str, books: Sequence[AnchorBook], snap=None) -> list[tuple[str, dict]]:
    """(name, work) of the works that removed symbols ``query`` names and the project does not
    define again, at most ``max_removals``."""
    found: list[tuple[str, dict]] = []
    most = current().max_removals
    for asked in query_symbols(query):
        for b in books:
            got = b.works.removal_named(asked)
            if got is None or len(found) >= most or _defined(snap, got[0]) \
                    or (got[0] != asked and _defined(snap, asked, short=True)):
                continue  # defined again, or a method's own name another class still defines
            found.append(got)
    return found


def removal_hits(found: list[tuple[str, dict]], hits: list[Hit],
                 fetch: Callable[[list[str], set[str]], list[Hit]] | None) -> list[Hit]:
    """The memories of the works that removed symbols the query names (``removals``; see the
    module docstring), best first, scored above every candidate."""
    if not found:
        return []
    got = _with_fetched(hits, [i for _, w in found for i in reversed(w["items"])], fetch)
    # just above the best candidate: a context's relevance floor (a share of the best score)
    # keeps what it kept
    top = max((h.score for h in hits), default=0.0) + 0.01
    out: list[Hit] = []
    most = current().removed_items
    for name, w in found:
        taken = {h.id for h in out}
        mine = _best_first([got[i] for i in reversed(w["items"]) if i in got and i not in taken], w)
        paths = sorted(p for p, names in w["removed"].items() if name in names)
        why = {"symbol": name, "paths": paths, "commit": w["head"], "at": w.get("at")}
        for h in mine[:most]:
            out.append(h.replaced(score=round(top - len(out) * 1e-4, 6),
                                  metadata={**h.metadata, "removed": why}))
    return out


def touched_works(query: str, books: Sequence[AnchorBook], snap=None) -> list[dict]:
    """The ``touched_works`` newest works that added, changed or moved a symbol ``query``
    names and the project defines now (the sessions that wrote its code)."""
    works: list[dict] = []
    for name in query_symbols(query):
        if not _defined(snap, name):
            continue
        for b in books:
            for head in reversed(b.works.touched_by.get(name, ())):
                w = b.works.by_head.get(head)
                if w is not None and w not in works:
                    works.append(w)
    return works[:current().touched_works]


def touched_hits(works: list[dict], hits: list[Hit],
                 fetch: Callable[[list[str], set[str]], list[Hit]] | None) -> list[Hit]:
    """One memory of each of ``works`` (``touched_works``), newest work first."""
    if not works:
        return []
    got = _with_fetched(hits, [i for w in works for i in reversed(w["items"])], fetch)
    out: list[Hit] = []
    for w in works:
        mine = _best_first([got[i] for i in reversed(w["items"]) if i in got], w)
        if mine and mine[0] not in out:
            out.append(mine[0])
    return out


def _with_fetched(hits: list[Hit], want: list[str],
                  fetch: Callable[[list[str], set[str]], list[Hit]] | None) -> dict[str, Hit]:
    """Id -> hit: the candidates, and those of ``want`` fetched from the index."""
    have = {h.id: h for h in hits}
    extra = fetch(list(dict.fromkeys(want)), set(have)) if fetch else []
    return {**have, **{h.id: h for h in extra}}


def _best_first(hits: list[Hit], w: dict) -> list[Hit]:
    """A work's memories (newest first) in the order they stand for it: still its session's
    (an insight another session said again is that session's now), insights, steps, turns."""
    return sorted(hits, key=lambda h: (h.session not in w["sessions"], KIND_ORDER.get(h.kind, 3)))


def _defined(snap, name: str, short: bool = False) -> bool:
    """Whether the project defines ``name`` now (with ``short``, also as a method's own name;
    unknown without a snapshot: no)."""
    if snap is None or not getattr(snap, "files", None):
        return False
    return any(short or s.name == name for _, s in snap.definitions.get(name, ()))


def _by_files(hits: list[Hit], spec_dir_of: Callable[[Hit], Path | None],
              specs: Sequence[str | Path], named: set[str],
              fetch: Callable[[list[str], set[str]], list[Hit]] | None
              ) -> tuple[list[Hit], list[float] | None]:
    """``hits`` re-ranked by the files the best of them are about (``rerank``), and their new
    scores (None: no hit has an anchor record, the order is as it was); copied with them only
    when kept (``_scored``)."""
    books: dict[Path, AnchorBook] = {}

    def record(hit: Hit) -> tuple[dict | None, AnchorBook | None]:
        where = spec_dir_of(hit)
        if where is None:
            return None, None
        b = books.get(where)
        if b is None:
            b = books[where] = book(where)
        rec = b.records.get(hit.id)
        if rec is None and hit.kind in ("turn", "step") and hit.session:
            rec = b.session_record(hit.session)
        return rec, b

    recs = [record(h) for h in hits]
    if not any(r for r, _ in recs):
        return hits, None
    files = [_files(r) for r, _ in recs]
    scores = [h.score for h in hits]
    weight = predict_files(scores, files, named)
    work = _NewestWork([book(s) for s in specs], weight)
    if fetch is not None:
        held = {_work_key(h, r, b) for h, (r, b) in zip(hits, recs) if r is not None and b is not None}
        ids = work.extras(held, {h.id for h in hits})
        extra = fetch(ids, {h.id for h in hits}) if ids else []
        if extra:
            hits = [*hits, *extra]
            more = [record(h) for h in extra]
            recs += more
            files += [_files(r) for r, _ in more]
            scores += [0.0] * len(extra)
    positions: list[float | None]
    latest: list[dict[str, int]]
    positions, latest = [], []
    hists: dict[int, _History] = {}  # per book
    for h, (rec, b) in zip(hits, recs):
        if rec is None or b is None:
            positions.append(None)
            latest.append({})
            continue
        hist = hists.get(id(b))
        if hist is None:
            hist = hists[id(b)] = CACHES.write_times.setdefault(str(b.path), _History())
        positions.append(hist.position(b, rec.get("at")))
        latest.append(work.ranks.get(_work_key(h, rec, b), {}))
    groups = [f"{h.spec}|{h.session}" if h.session else h.id for h in hits]
    order, new = rerank(scores, files, groups, positions, named, latest)
    return [hits[i] for i in order], [new[i] for i in order]


def _work_key(hit: Hit, rec: dict, b: AnchorBook) -> tuple[int, object]:
    """The piece of work a memory belongs to: its episodic session, or the write that anchored
    it (items written together share one record)."""
    if hit.kind in ("turn", "step") and hit.session:
        return id(b), hit.session
    return _record_work(b, rec)


def _record_work(b: AnchorBook, rec: dict) -> tuple[int, object]:
    """The piece of work of an anchor record: its session, else the record itself."""
    return id(b), rec["session"] if isinstance(rec.get("session"), str) else id(rec)


class _NewestWork:
    """The newest ``scan`` pieces of work anchored to each of the ``extra_files`` best predicted
    files: their rank there (``ranks``), their summed file weight and their newest item."""

    def __init__(self, books: list[AnchorBook], weight: dict[str, float]) -> None:
        self.ranks: dict[tuple[int, object], dict[str, int]] = {}
        self.found: dict[tuple[int, object], float] = {}
        self.item: dict[tuple[int, object], str] = {}
        best = sorted(weight, key=lambda f: -weight[f])[:current().extra_files]
        for b in books:
            for path in best:
                for rank, (key, item_id) in enumerate(newest_works(b, path)):
                    self.ranks.setdefault(key, {})[path] = rank
                    self.found[key] = self.found.get(key, 0.0) + weight[path]
                    self.item.setdefault(key, item_id)  # ties go to the newer memory

    def extras(self, held: set[tuple[int, object]], known: set[str]) -> list[str]:
        """One item of each of the ``extra_items`` pieces of work most about the predicted files
        (by their summed weight) that no candidate already stands for."""
        keys = [k for k in self.found if k not in held and self.item[k] not in known]
        most = current().extra_items
        return [self.item[k] for k in sorted(keys, key=lambda k: -self.found[k])[:most]]


def newest_works(b: AnchorBook, path: str) -> list[tuple[tuple[int, object], str]]:
    """The newest ``scan`` pieces of work anchored to ``path`` in ``b`` (of its newest
    ``scan_items`` items), newest first: (work, its newest item there). Kept on the book: a
    search asks for the same files as the last ones. A file whose list grew is walked only
    through its new items, before the works its last walk found (``_extended``); it is walked
    again from the newest when the book has read a newer record of an item its walk met (a
    newer record of an item may be another piece of work), or started over."""
    memo = b.__dict__.get("_newest_works")
    if memo is None or memo.records is not b.records or memo.seen > len(b.recorded):
        memo = b.__dict__["_newest_works"] = _WorksMemo(b.records)
    if memo.seen < len(b.recorded):
        memo.forget_changed(b)
    listed = b.by_path.get(path, ())
    got = memo.paths.get(path)
    if got is not None and got[0] == len(listed):
        return got[2]
    kept = _extended(b, listed, got) if got is not None else None
    if kept is None:
        kept = _walked(b, listed)
    if len(memo.paths) >= _WorksMemo.MAX_PATHS:
        memo.paths.clear()
    memo.paths[path] = kept
    return kept[2]


def _walked(b: AnchorBook, listed) -> tuple[int, set[str], list, int]:
    """``newest_works`` from scratch: (items listed, the items the walk met, the answer, how
    many items it walked back from the newest)."""
    out: list[tuple[tuple[int, object], str]] = []
    walked = listed[-current().scan_items:]
    met = _walk(b, walked, set(), out)
    if met is not None:
        walked = walked[len(walked) - met:]
    return len(listed), set(walked), out, len(walked)


def _extended(b: AnchorBook, listed, got: tuple) -> tuple | None:
    """``newest_works`` of a file whose list grew since ``got`` (and no item its walk met was
    recorded again): its new items walked, then the works ``got`` found, as a walk from
    scratch would meet them; None when the window of ``scan_items`` moved past an item its
    walk met."""
    known, walked, out, depth = got
    t = current()
    if len(listed) < known or len(listed) - (known - depth) > t.scan_items:
        return None
    new = listed[known:]
    seen: set = set()
    merged: list[tuple[tuple[int, object], str]] = []
    met = _walk(b, new, seen, merged)
    if met is not None:  # a walk from scratch stops among the new items too
        return len(listed), set(new[len(new) - met:]), merged, met
    for key, item_id in out:
        if key not in seen:
            seen.add(key)
            merged.append((key, item_id))
            if len(merged) >= t.scan:
                break
    # the works it found are at least ``scan`` when its walk stopped early: none is needed beyond
    return len(listed), walked | set(new), merged, depth + len(new)


def _walk(b: AnchorBook, items, seen: set, out: list) -> int | None:
    """Walk ``items`` from the newest, adding each piece of work not in ``seen`` to ``out``
    with its item -> how many items it met when ``out`` reached ``scan`` (None: never)."""
    most = current().scan
    for n, item_id in enumerate(reversed(items)):
        rec = b.records.get(item_id)
        if rec is None:
            continue
        key = _record_work(b, rec)
        if key not in seen:
            seen.add(key)
            out.append((key, item_id))
            if len(out) >= most:
                return n + 1
    return None


class _WorksMemo:
    """``newest_works`` of one book state per file: (how many items the file listed, the items
    its walk met, the answer, how many items it walked)."""

    MAX_PATHS = 4096

    def __init__(self, records: dict) -> None:
        self.records = records  # the book's: a new dict means it started over
        self.seen = 0  # entries of ``AnchorBook.recorded`` accounted for
        self.paths: dict[str, tuple[int, set[str], list, int]] = {}

    def forget_changed(self, b: AnchorBook) -> None:
        """Drop the files whose walk met an item recorded again since (a file listing more
        items is extended when asked: ``_extended``)."""
        new = set(b.recorded[self.seen:])
        self.seen = len(b.recorded)
        for path, (_, walked, _, _) in list(self.paths.items()):
            if not walked.isdisjoint(new):
                del self.paths[path]


def _files(rec: dict | None) -> list[str]:
    """The paths a record anchors (memoised: records are shared and never change)."""
    if not rec:
        return []
    memo = CACHES.record_files
    got = memo.get(id(rec))
    if got is not None and got[0] is rec:
        return got[1]
    fs = list(dict.fromkeys(a["path"] for a in rec.get("anchors") or []
                            if isinstance(a, dict) and isinstance(a.get("path"), str)))
    if len(memo) > current().files_memo:
        memo.clear()
    memo[id(rec)] = (rec, fs)
    return fs
