"""Code recall and freshness checked against their code at a pinned commit (``bench/codemem_exact.py``).

The plain way of these stages is the modules as they were before their speed-ups
(``code/recall.py`` and ``code/freshness.py`` at ``BASE``, read with ``git show``), loaded beside
the current ones in the same package. The memos they keep on shared objects (the anchor book,
the snapshot) are renamed in the pinned copy, so neither way ever reads the other's memo: each
call of the current code computes from its own caches, the pinned one from its own, on the same
state, and the results must be equal field for field (scores bit for bit).
"""

from __future__ import annotations

import subprocess
import types
from pathlib import Path

BASE = "e326048"  # the commit before issue 17's h33 speed-ups of code recall and freshness
ROOT = Path(__file__).resolve().parents[1]
# memo names on shared objects -> the pinned copy's own
MEMOS = {'"_newest_works"': '"_pinned_newest_works"', '"_freshness"': '"_pinned_freshness"',
         '"_kept"': '"_pinned_kept"'}


def pinned(name: str, base: str = BASE) -> types.ModuleType:
    """``graphmem.code.<name>`` as it was at ``base``, its shared memos renamed (``MEMOS``)."""
    try:
        src = subprocess.run(["git", "-C", str(ROOT), "show", f"{base}:src/graphmem/code/{name}.py"],
                             capture_output=True, text=True, check=True).stdout
    except subprocess.CalledProcessError as exc:
        raise SystemExit(f"cannot read code/{name}.py at {base}: {exc.stderr.strip()}") from None
    for old, new in MEMOS.items():
        src = src.replace(old, new)
    mod = types.ModuleType(f"graphmem.code._pinned_{name}")
    mod.__package__ = "graphmem.code"
    mod.__file__ = f"{base}:src/graphmem/code/{name}.py"
    exec(compile(src, mod.__file__, "exec"), mod.__dict__)
    return mod


def hit_fields(hits) -> list[dict]:
    """What a caller sees of each hit, in order."""
    return [dict(h.__dict__) for h in hits]


def first_difference(got: list[dict], want: list[dict]) -> str:
    if len(got) != len(want):
        return f"{len(got)} hits, {len(want)} before"
    for n, (a, b) in enumerate(zip(got, want)):
        for k in sorted(a.keys() | b.keys()):
            if a.get(k) != b.get(k):
                return f"hit {n} ({a.get('id')}) field {k}: {a.get(k)!r} != {b.get(k)!r}"
    return "?"


def outcome(fn):
    """(result, None) or (None, the exception's type and text)."""
    try:
        return fn(), None
    except Exception as exc:
        return None, f"{type(exc).__name__}: {exc}"


def check_code_stages(checked, timed, base: str = BASE) -> None:
    """Wrap ``code_recall`` and ``annotate``: each call also runs their way at ``base`` and must
    match; ``timed(stage, fast, plain)`` runs both and keeps their times in ``checked.ms``."""
    import graphmem.code.freshness as freshness
    import graphmem.code.reorder as recall

    before = {"code recall": pinned("recall", base), "freshness": pinned("freshness", base)}
    fast = {"code recall": recall.code_recall, "freshness": freshness.annotate}
    plain = {"code recall": before["code recall"].code_recall,
             "freshness": before["freshness"].annotate}
    for stage in fast:
        checked.ms.setdefault(stage, {"fast": [], "plain": []})

    def wrap(stage: str):
        def call(*a, **kw):
            (got, err), (want, perr) = timed(stage, lambda: outcome(lambda: fast[stage](*a, **kw)),
                                             lambda: outcome(lambda: plain[stage](*a, **kw)))
            if err != perr:
                raise AssertionError(f"{stage}: {err or 'no error'} != {perr or 'no error'} before")
            if err:
                raise RuntimeError(err)
            g, w = hit_fields(got), hit_fields(want)
            if g != w:
                raise AssertionError(f"{stage} differs: {first_difference(g, w)}")
            checked.code_hits[stage] = checked.code_hits.get(stage, 0) + len(g)
            return got
        return call

    recall.code_recall = wrap("code recall")
    freshness.annotate = wrap("freshness")
    check_rows_by_id(checked, timed)


def check_rows_by_id(checked, timed) -> None:
    """``IndexStore.rows_by_id`` (one read by id) against a read of the rowids, then the rows."""
    from graphmem.index.storage import IndexStore

    fast = IndexStore.rows_by_id
    checked.ms.setdefault("index rows by id", {"fast": [], "plain": []})

    def rows_by_id(self, ids):
        got, want = timed("index rows by id", lambda: fast(self, ids),
                          lambda: list(self.rows(list(self.rowids_by_id(ids).values())).values()))
        if sorted(map(tuple, got)) != sorted(map(tuple, want)):
            raise AssertionError(f"rows by id differ for {len(ids)} ids")
        checked.code_hits["index rows by id"] = checked.code_hits.get("index rows by id", 0) + len(got)
        return got

    IndexStore.rows_by_id = rows_by_id
