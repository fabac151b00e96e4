"""Every knob of code memory (anchoring, freshness, code recall, the tree's caches), in one frozen value.

Code memory's caches are process-wide (``code_caches.py``), so its tuning is too: the modules of
``code/`` read the value in force with ``current()`` when they run, never at import. A test or a
benchmark that wants another value builds one with ``dataclasses.replace`` and puts it in force
with ``use`` (which gives back the one it replaced). What each value is, what was measured to
choose it and with which bench: ``docs/tuning.md`` ("Code recall", "Stale marks", and the issue 17
sections named below).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..errors import ValidationError


@dataclass(frozen=True)
class CodeTuning:
    """Caps, shares, gains, TTLs and cache sizes of ``code/``, by the module that reads them."""

    # ---- the project snapshot (``tree.py``); docs/tuning.md, issue 17 h39 "untracked files"
    max_walk_files: int = 5_000  # files anchored at most: a walk outside git, untracked in git
    walk_ttl: float = 2.0  # seconds a walked (non-git) snapshot is reused by a write
    untracked_ttl: float = 2.0  # seconds an unwatched (or too widely watched) untracked list is reused
    check_each_read: int = 5_000  # watched paths stat-ed at every read (~6 ms); past it, after the TTL
    max_parse_bytes: int = 1_000_000  # a bigger file is neither hashed untracked nor parsed
    max_cached_blobs: int = 100_000  # blobs whose parsed symbols are kept (then all dropped)
    # ---- whether a listing of the work tree changed (``tree_watch.py``); same section
    max_watched: int = 100_000  # paths a watch keeps (a check ~1.2 us each); past it, the caller's TTL
    racy_fine_ns: int = 20_000_000  # a kernel tick is 1-10 ms: 20 ms covers the lag of its clock
    racy_coarse_ns: int = 2_000_000_000  # file systems with 1 s (ext3, HFS+) or 2 s (FAT) mtimes
    excludes_memo: int = 64  # (root, git config stats) whose core.excludesFile is remembered
    # ---- git history and blobs (``history.py``); issue 17 h33 "exact speed-ups"
    max_commits: int = 20_000  # commits of the history window (older anchors: commits unknown)
    max_blob_bytes: int = 512_000  # a bigger blob's lines are not compared (kept share unknown)
    max_pairs: int = 50_000  # (old blob, new blob) kept shares remembered (then all dropped)
    line_blobs: int = 20_000  # blobs whose line counts are kept (a few KB each), least recent out
    # ---- what is anchored (``anchors.py``)
    max_symbol_files: int = 3  # a name defined in more files than this says too little to anchor
    max_anchors: int = 40  # anchors an item keeps (and session files it names)
    max_touched: int = 30  # symbols a session added or changed, kept with its files
    query_memo: int = 64  # query texts whose code names are remembered (three stages ask; h24)
    no_work_memo: int = 10_000  # (spec, base, HEAD) known to have changed no code (then all dropped)
    # ---- ``anchors.jsonl`` (``anchor_file.py``)
    compact_ratio: int = 2  # the file stays within about twice what its readers need
    compact_min_bytes: int = 256_000  # a smaller file is never compacted
    max_session_files: int = 40  # an episodic session keeps at most this many files for its turns/steps
    # ---- what a session's commits did (``changes.py``); docs/tuning.md "Code recall" (h22)
    work_files: int = 200  # changed source files parsed per work (a bigger diff: the first ones)
    work_symbols: int = 300  # symbols listed per work, removed ones first
    work_items: int = 6  # memories a work line names: lessons first, then turns and steps
    max_derive: int = 1_000  # works ``reindex`` derives at most per spec
    # ---- freshness (``freshness.py``); docs/tuning.md "Stale marks" and issue 17 h25, h31
    min_touched: int = 2  # an item naming no code is gone when every one of at least this many
    # symbols its session added or changed is defined nowhere (on pytest's replay: 7 of 104 leaks,
    # no false mark among 1,557 current hits; one symbol alone marked 4 current hits)
    work_gone_share: float = 0.5  # as the GONE label: at least half of the files a work wrote are gone
    min_work_files: int = 2  # one file alone says too little about a work
    keep_share: float = 0.5  # a whole-file anchor stays current while half the lines it saw are kept
    renamed_share: float = 0.75  # a function's old file, gone, was renamed to its new one when this
    # share of its lines is there (git mv and an edit); less: the function moved out of a deleted file
    memo_size: int = 100_000  # answers a per-snapshot memo keeps (``work_gone``, ``prepare``)
    gone_drop: int | None = 5  # places a gone hit moves down (None: below every other hit); on
    # entire-cli locate tasks R@10 .258 last, .292 five places down (bench/codemem.py --gone-drop)
    # ---- code recall (``reorder.py``); docs/tuning.md "Code recall": chosen on bench/codemem.py
    # R@10 (pytest / entire-cli; BM25 .345 / .158)
    prf_hits: int = 10  # candidates whose files predict the task's files
    file_gain: float = 1.2  # weight of the file prediction, against a best match scoring 1
    # code gains count fully once the best anchored candidate scores this share of the best
    # match (less: in proportion, ``reorder.prediction_trust``)
    trust_full: float = 0.5
    recency_gain: float = 1.0  # gain of the newest write (position 1), times position ** power
    recency_power: float = 8.0  # how fast that gain falls with an item's place in the history
    named_weight: float = 1.0  # a file the query names, against a best match's whole weight of 1
    extra_files: int = 8  # best predicted files whose memories may join the candidates
    extra_items: int = 40  # pieces of work (one item each) joining the candidates
    scan: int = 40  # newest pieces of work anchored to a predicted file, for extras and file_recency
    scan_items: int = 2000  # items of one file walked at most to find them
    file_recency: float = 0.15  # gain of the newest work about a predicted file (of weight 1)
    file_recency_decay: float = 0.6  # the next newest gains this times as much
    one_per_session: bool = True  # one item per session before any session's second
    removed_items: int = 2  # memories of the work that removed a symbol the query names, put first
    touched_works: int = 3  # newest works that wrote a symbol the query names (defined now) joining
    touched_after: int = 1  # ... placed after this many of the best candidates
    max_removals: int = 3  # removed symbols of one query whose works are put first
    files_memo: int = 100_000  # anchor records whose file lists are remembered (then all dropped)
    # ---- where is it now (``whereabouts.py``); issue 17 h30 "where is it now"
    max_names: int = 2  # defined names a query may use and still ask where one thing is
    max_promoted: int = 2  # map entries of those files put among the first hits
    promote_at: int = 2  # the lowest place of the first of them (0: first)
    asked_memo: int = 64  # queries whose asked names a snapshot remembers
    # ---- what ``context(files=[...])`` pins (``pins.py``); issue 17 h40
    folder_pins: int = 5  # memories a folder pins at most, newest first
    # ---- ``about(path_or_symbol)`` (``about_answer.py``)
    max_target: int = 1_000  # characters of a path or symbol asked about

    @property
    def max_homes(self) -> int:
        """Files defining a name, at most, for it to have a home (as for anchoring it)."""
        return self.max_symbol_files

    @property
    def folder_candidates(self) -> int:
        """Memories read per folder before validity and freshness filter them."""
        return 4 * self.folder_pins


DEFAULT = CodeTuning()
_current = DEFAULT


def current() -> CodeTuning:
    """The tuning in force for this process (``DEFAULT`` unless ``use`` put another)."""
    return _current


def use(tuning: CodeTuning) -> CodeTuning:
    """Put ``tuning`` in force for this process -> the one it replaces (to put back)."""
    global _current
    if not isinstance(tuning, CodeTuning):
        raise ValidationError(f"must be a CodeTuning, not {type(tuning).__name__}", field="tuning")
    previous, _current = _current, tuning
    return previous
