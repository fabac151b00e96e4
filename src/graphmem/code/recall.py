"""Code recall: re-rank a project's search candidates by the files the best of them are about.

A coding task's text rarely names the code it will change, but its best lexical and semantic
matches usually are about that code. So the files anchored to the top ``PRF_HITS`` candidates
(their own paths and their session's files, each weighted by the candidate's score and shared
among its files) plus the files the query names (weight 1) predict where the task is; every
candidate gains ``FILE_GAIN`` times the summed weight of its files (against the best candidate's
sum), and the memories most about the best predicted files join the candidates
(pseudo-relevance feedback on files, not on words). Newer memories gain ``RECENCY_GAIN * position ** RECENCY_POWER``, where
``position`` is the item's place in the project's write history (1 = newest): code written
last is what later changes touch. Then one item per session before a second one: a session is
one piece of work, and ten lines of one change crowd out the others.

Measured on ``bench/codemem.py`` (pytest, entire-cli); see the README's "Coding memory" part.
Items with no anchor record are untouched (prose memories: LoCoMo ranks as before).

``rerank`` is pure (arrays in, order out); ``code_recall`` gathers its inputs from the anchor
books and the index.
"""

from __future__ import annotations

import bisect
from pathlib import Path
from typing import Callable, Sequence

from ..models import Hit
from .anchors import AnchorBook, book

# Chosen on bench/codemem.py R@10 (pytest / entire-cli; BM25 .345 / .158; the index alone,
# one item per session, .367 / .153): these values .456 / .239; FILE_GAIN .8 .436 / .248; a
# candidate's best file weight instead of the sum .443 / .238, the sum over sqrt(files) .404 /
# .238; with an earlier extras rule, RECENCY_GAIN .6 .443 / .183 and PRF_HITS 5 .451 / .178.
PRF_HITS = 10  # candidates whose files predict the task's files
FILE_GAIN = 1.2  # weight of the file prediction, against a best match scoring 1
RECENCY_GAIN = 1.0
RECENCY_POWER = 8.0
NAMED_WEIGHT = 1.0  # a file the query names, against a best match's whole weight of 1
EXTRA_FILES = 5  # best predicted files whose memories may join the candidates
EXTRA_ITEMS = 20
SCAN = 100  # newest memories of a predicted file considered for the extras
ONE_PER_SESSION = True


def predict_files(scores: Sequence[float], files: Sequence[Sequence[str]],
                  named: set[str] | frozenset[str] = frozenset(), top: int | None = None
                  ) -> dict[str, float]:
    """File -> weight: the files of the ``top`` best candidates (each candidate's score shared
    among its files by ``1 / sqrt(n)``) plus ``NAMED_WEIGHT`` for each file the query names."""
    weight: dict[str, float] = {}
    best = max(scores, default=0.0) or 1.0
    ranked = sorted(range(len(scores)), key=lambda i: -scores[i])[:top or PRF_HITS]
    for i in ranked:
        fs = files[i]
        if not fs or scores[i] <= 0:
            continue
        share = scores[i] / best / len(fs) ** 0.5
        for f in fs:
            weight[f] = weight.get(f, 0.0) + share
    for f in named:
        weight[f] = weight.get(f, 0.0) + NAMED_WEIGHT
    return weight


def rerank(scores: Sequence[float], files: Sequence[Sequence[str]], groups: Sequence[str],
           positions: Sequence[float | None], named: set[str] | frozenset[str] = frozenset()
           ) -> tuple[list[int], list[float]]:
    """The candidates' new order and scores (see the module docstring).

    ``scores``: first-stage scores (best 1, extras 0); ``files``: each candidate's anchored
    files (empty: no anchors, left as it was); ``groups``: its session (or its own id);
    ``positions``: its place in the write history, 1 = newest (None: unknown). A candidate's
    file gain is the summed weight of its files, against the best candidate's sum.
    """
    weight = predict_files(scores, files, named)
    about = [sum(weight.get(f, 0.0) for f in fs) for fs in files]
    top = max(about, default=0.0) or 1.0
    new = []
    for s, fs, a, pos in zip(scores, files, about, positions):
        if not fs:
            new.append(s)
            continue
        s = s + FILE_GAIN * a / top
        if pos is not None:
            s += RECENCY_GAIN * pos ** RECENCY_POWER
        new.append(s)
    order = sorted(range(len(new)), key=lambda i: -new[i])
    seen: set[str] = set()
    first, later = [], []
    for i in order:  # one item per session first, repeats after every session's best
        (later if ONE_PER_SESSION and groups[i] in seen and files[i] else first).append(i)
        seen.add(groups[i])
    return first + later, new


class _History:
    """Write times of a book's records, sorted, to place an item in the project's history."""

    def __init__(self) -> None:
        self.key: tuple[int, int] | None = None
        self.times: list[str] = []

    def position(self, b: AnchorBook, at: str | None) -> float | None:
        key = (id(b), b.offset)
        if key != self.key:
            self.times = sorted(r.get("at") or "" for r in b.records.values())
            self.key = key
        if not at or not self.times:
            return None
        return bisect.bisect_right(self.times, at) / len(self.times)


_history: dict[str, _History] = {}


def code_recall(hits: list[Hit], spec_dir_of: Callable[[Hit], Path | None],
                specs: Sequence[str | Path], named: set[str],
                fetch: Callable[[list[str], set[str]], list[Hit]] | None = None,
                keep: int | None = None) -> list[Hit]:
    """``hits`` re-ranked by ``rerank``, with the memories most about the predicted files added
    (``fetch(ids, known) -> hits``), the best ``keep`` of them (all: None); unchanged when no
    hit has an anchor record."""
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
        return hits
    files = [_files(r) for r, _ in recs]
    scores = [h.score for h in hits]
    if fetch is not None:
        weight = predict_files(scores, files, named)
        ids = _about([book(s) for s in specs], weight,
                     {h.id for h in hits})
        extra = fetch(ids, {h.id for h in hits}) if ids else []
        if extra:
            hits = [*hits, *extra]
            more = [record(h) for h in extra]
            recs += more
            files += [_files(r) for r, _ in more]
            scores += [0.0] * len(extra)
    positions = []
    for rec, b in recs:
        if rec is None or b is None:
            positions.append(None)
            continue
        hist = _history.setdefault(str(b.path), _History())
        positions.append(hist.position(b, rec.get("at")))
    groups = [f"{h.spec}|{h.session}" if h.session else h.id for h in hits]
    order, new = rerank(scores, files, groups, positions, named)
    return [hits[i].model_copy(update={"score": round(new[i], 6)}) for i in order[:keep]]


def _about(books: list[AnchorBook], weight: dict[str, float], known: set[str]) -> list[str]:
    """Ids of the ``EXTRA_ITEMS`` memories most about the predicted files: among the newest
    ``SCAN`` anchored to each of the ``EXTRA_FILES`` best, by the summed weight of those files."""
    best = sorted(weight, key=lambda f: -weight[f])[:EXTRA_FILES]
    found: dict[str, float] = {}
    for b in books:
        for path in best:
            w = weight[path]
            for item_id in dict.fromkeys(reversed(b.by_path.get(path, ())[-SCAN:])):
                if item_id not in known:  # newest first: ties go to the newer memory
                    found[item_id] = found.get(item_id, 0.0) + w
    return sorted(found, key=lambda i: -found[i])[:EXTRA_ITEMS]


_files_memo: dict[int, tuple[dict, list[str]]] = {}


def _files(rec: dict | None) -> list[str]:
    """The paths a record anchors (memoised: records are shared and never change)."""
    if not rec:
        return []
    got = _files_memo.get(id(rec))
    if got is not None and got[0] is rec:
        return got[1]
    fs = list(dict.fromkeys(a["path"] for a in rec.get("anchors") or []
                            if isinstance(a, dict) and isinstance(a.get("path"), str)))
    if len(_files_memo) > 100_000:
        _files_memo.clear()
    _files_memo[id(rec)] = (rec, fs)
    return fs
