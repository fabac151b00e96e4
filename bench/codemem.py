"""Coding memory on real repository histories (../shared/data/codemem) through graphmem's public API.

Replays each dataset as its README's protocol says: the project is a git repository that evolves
session by session (skeleton source files from the symbol lists), each session is written through
``save_session_insights``, ``update_codebase_map``, ``append_gotcha``/``append_pattern`` and the
episodic sessions API, and every task asks ``search`` and ``context`` at its point in the history.
Value-update questions built from the dataset's own history (``_codemem_values.py``) join the
tasks. Scores recall@5/10, nDCG@10, Hit@10, MRR, FileRecall@B, StaleLeak@10, StaleLeakText, CurrentHit,
tokens per task and search/context latency, beside BM25, recency and random baselines over the
same memories in the same run.

    .venv/bin/python bench/codemem.py [--datasets pytest,entire-cli] [--tasks N] [--budgets 1000,4000]
"""

from __future__ import annotations

import argparse
import math
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _codemem_replay import (Items, Repo, gone_mentions, load_dataset, normalise, plain_context,
                             start, write_session)
from _codemem_values import old_first, stated, value_tasks
from _common import need, pct, table, write_json

DATA = Path(os.environ.get("GRAPHMEM_CODEMEM_DATA") or "/work/shared/data/codemem")
MARKED = ("changed", "moved", "gone", "stale", "superseded", "retired")


def spread(tasks: list[dict], n: int | None) -> list[dict]:
    """At most ``n`` tasks spread evenly over the list (all when ``n`` is None)."""
    if not n or n >= len(tasks):
        return tasks
    return [tasks[round(i * (len(tasks) - 1) / max(1, n - 1))] for i in range(n)]


def marked(meta: dict, words: tuple[str, ...] = MARKED) -> bool:
    """Whether a hit's metadata says its code is not current (the README's rule)."""
    if meta.get("stale") is True:
        return True
    for key in ("freshness", "state", "validity"):
        v = meta.get(key)
        v = v.get("state") if isinstance(v, dict) else v
        if isinstance(v, str) and any(w in v.lower() for w in words):
            return True
    return False


STRICT = tuple(w for w in MARKED if w != "changed")  # "the file changed since" does not count


class Mapper:
    """Hit -> source session id, as the protocol's step 4 says."""

    def __init__(self) -> None:
        self.by_num: dict[str, str] = {}
        self.by_sid: dict[str, str] = {}
        self.text_first: dict[str, str] = {}
        self.text_last: dict[str, str] = {}

    def add(self, i: int, s: dict, sid: str | None) -> None:
        self.by_num[str(i + 1)] = s["id"]
        if sid:
            self.by_sid[sid] = s["id"]
        ins = s.get("insights") or {}
        files = {**((ins.get("discoveries") or {}).get("files_understood") or {}),
                 **(s.get("codebase_map") or {})}
        for path, purpose in files.items():
            self.text_last[normalise(f"{path}: {purpose}")] = s["id"]
        for text in [*(s.get("gotchas") or []), *(s.get("patterns") or [])]:
            self.text_first.setdefault(normalise(text), s["id"])

    def __call__(self, hit) -> str | None:
        if hit.kind == "insight":
            return self.by_num.get(str(hit.session))
        if hit.kind == "turn":
            return hit.metadata.get("codemem_session") or self.by_sid.get(str(hit.session))
        if hit.kind in ("step", "fact"):
            return self.by_sid.get(str(hit.session))
        key = normalise(hit.text)
        return self.text_last.get(key) if hit.kind == "file" else self.text_first.get(key)


def score(task: dict, ranked: list[str | None], marks: list[bool], texts: list[str],
          contexts: dict[int, str], repo: Repo, strict: list[bool] | None = None,
          shown: list[str] | None = None) -> dict:
    """One task's metrics from its ranked sessions and its contexts."""
    rel = task["relevant"]
    total = sum(rel.values()) or 1.0
    out: dict = {"type": task["type"]}
    for k in (5, 10):
        out[f"r@{k}"] = sum(w for s, w in rel.items() if s in ranked[:k]) / total
    seen, dcg = set(), 0.0
    for i, s in enumerate(ranked[:10]):
        if s in rel and s not in seen:
            seen.add(s)
            dcg += rel[s] / math.log2(i + 2)
    ideal = sum(w / math.log2(i + 2) for i, w in enumerate(sorted(rel.values(), reverse=True)[:10]))
    out["ndcg@10"] = dcg / ideal if ideal else 0.0
    out["hit@10"] = float(any(s in rel for s in ranked[:10]))
    out["mrr"] = next((1 / (i + 1) for i, s in enumerate(ranked[:20]) if s in rel), 0.0)
    mapped = [(s, m) for s, m in zip(ranked[:10], marks[:10]) if s is not None]
    labels = task.get("labels") or {}
    if mapped:
        out["staleleak@10"] = sum(1 for s, m in mapped
                                  if labels.get(s, "CURRENT") != "CURRENT" and not m) / len(mapped)
    for s, m in mapped:  # which kinds of stale hit leak (JSON only: leak_<LABEL>)
        label = labels.get(s, "CURRENT")
        if label != "CURRENT" and not m:
            out[f"leak_{label}"] = out.get(f"leak_{label}", 0.0) + 1 / len(mapped)
    strict_mapped = [m for s, m in zip(ranked[:10], (strict or marks)[:10]) if s is not None]
    if strict_mapped:  # StaleLeak counting only moved/gone/superseded/retired marks
        out["staleleak_strict@10"] = sum(
            1 for (s, _), m in zip(mapped, strict_mapped)
            if labels.get(s, "CURRENT") != "CURRENT" and not m) / len(mapped)
    fine = [m for s, m in mapped if labels.get(s, "CURRENT") == "CURRENT"]
    if fine:  # false alarms: hits about code that is still current, marked anyway
        out["overmark@10"] = sum(fine) / len(fine)
    out["unmapped@10"] = sum(1 for s in ranked[:10] if s is None) / max(1, len(ranked[:10]))
    for b, ctx in contexts.items():
        out[f"tokens@{b}"] = len(ctx) / 4
        if task.get("files"):
            out[f"filerecall@{b}"] = sum(1 for f in task["files"] if f in ctx) / len(task["files"])
    big = contexts[max(contexts)]
    mentions, stale = gone_mentions(big, repo)
    if mentions:
        out["staleleaktext"] = stale / mentions
    cur = task.get("current_answer")
    if task["type"] in ("locate", "value_update") and cur:
        out["currenthit"] = float(cur in big)
        out["currenthit@10"] = float(any(cur in t for t in texts[:10]))
        pos = big.find(cur)
        olds = [big.find(a) for a in task.get("stale_answers") or [] if a in big]
        out["stalefirst"] = float(bool(olds) and (pos < 0 or min(olds) < pos))
        if task["type"] == "value_update":  # "from 5.1.5 to 5.1.6" states 5.1.6: by line
            out["stalefirst"] = old_first(task, big)
    above = current_above(task, big, shown or texts, marks)
    out.update(above)
    return out


def current_above(task: dict, ctx: str, shown: list[str], marks: list[bool]) -> dict:
    """"The current value ranked above the superseded ones": for a task with ``current_answer``
    and ``stale_answers`` (locate: the symbol's new and old file; value_update: the pinned
    version and the older ones), 1 when the current one comes first, 0 when an old one does or
    the current one is missing; only tasks where either appears count. In the context, an old
    answer inside a "<old> is now <new>" note is a marked mention; among the top-10 hits an old
    answer counts only in a hit not marked stale (a hit shows its text, moved paths rewritten,
    and its anchored files)."""
    cur, olds = task.get("current_answer"), task.get("stale_answers") or []
    if not cur or not olds:
        return {}
    out = {}
    plain = ctx
    for old in olds:
        plain = plain.replace(f"{old} is now", "")
    first_cur = plain.find(cur)
    first_old = min((plain.find(o) for o in olds if o in plain), default=-1)
    if first_cur >= 0 or first_old >= 0:
        out["currentabove_ctx"] = float(first_cur >= 0 and (first_old < 0 or first_cur < first_old))
    if task["type"] == "value_update":  # a hit states one version ("from A to B" states B)
        values = [stated(t) for t in shown[:10]]
        rank_cur = next((i for i, v in enumerate(values) if v == cur), None)
        rank_old = next((i for i, (v, m) in enumerate(zip(values, marks[:10]))
                         if not m and v in olds), None)
        out["currentabove_ctx"] = 1.0 - old_first(task, ctx)
    else:
        rank_cur = next((i for i, t in enumerate(shown[:10]) if cur in t), None)
        rank_old = next((i for i, (t, m) in enumerate(zip(shown[:10], marks[:10]))
                         if not m and any(o in t for o in olds)), None)
    if rank_cur is not None or rank_old is not None:
        out["currentabove@10"] = float(rank_cur is not None and (rank_old is None
                                                                 or rank_cur < rank_old))
    return out


def presented(hit) -> str:
    """What an agent reads of a hit: its text with moved paths rewritten, and its files."""
    text = hit.text
    fresh = hit.metadata.get("freshness") if isinstance(hit.metadata.get("freshness"), dict) else {}
    for old, new in (fresh.get("moved") or {}).items():
        text = text.replace(old, new)
    return " ".join([text, *(fresh.get("paths") or [])])


def leak_rows(name: str, task: dict, hits, mapper, spec: Path) -> list[dict]:
    """For ``--leaks``: each top-10 hit mapped to a session, with its label, whether it is marked,
    its kind, text, freshness and anchor record (a leak: labelled stale and not marked)."""
    from graphmem.code.anchors import book

    labels, out = task.get("labels") or {}, []
    b = book(spec)
    for rank, h in enumerate(hits[:10]):
        s = mapper(h)
        if s is None:
            continue
        label, m = labels.get(s, "CURRENT"), marked(h.metadata)
        rec = b.records.get(h.id) or (b.session_record(h.session) if h.session else None)
        out.append({"dataset": name, "task": task["id"], "type": task["type"], "rank": rank,
                    "label": label, "marked": m, "session": s, "kind": h.kind,
                    "text": h.text[:200], "freshness": h.metadata.get("freshness"),
                    "anchors": (rec or {}).get("anchors")})
    return out


def average(rows: list[dict]) -> dict:
    keys = sorted({k for r in rows for k in r if k != "type"})
    counted = {f"{k}_n": sum(1 for r in rows if k in r) for k in keys if k.startswith("currentabove")}
    scored = max(1, sum(1 for r in rows if "staleleak@10" in r))  # leak_<LABEL>: over every task
    return {k: sum(r[k] for r in rows if k in r) / (scored if k.startswith("leak_") else max(
        1, sum(1 for r in rows if k in r))) for k in keys} | counted | {"n": len(rows)}


# the stages of a search and a context that ``--profile`` times (module, function)
STAGES = (("graphmem.code", "named_files"), ("graphmem.facade.derived", "DerivedStores.search_local"),
          ("graphmem.index.local_search", "_encode"), ("graphmem.index.ranker", "rank"),
          ("graphmem.code.reorder", "code_recall"), ("graphmem.code", "with_freshness"),
          ("graphmem.files.validity_log", "apply_validity"), ("graphmem.code", "defined_now"),
          ("graphmem.rules.context", "build_context"))


class Profiled:
    """Around the timed calls only (``--profile N``): the milliseconds of each of ``STAGES``
    per call (p50/p95), and cProfile's N costliest functions by cumulative and own time per
    dataset, on the event loop's thread (the query encoder's worker threads show only as the
    wait for them); a no-op context without it."""

    def __init__(self, top: int | None, extra: tuple = (), clock: bool = False):
        """``extra``: more (module, function) stages to time; ``clock``: time the stages of each
        call (kept in ``calls``) without cProfile when ``top`` is not given."""
        import cProfile

        self.top = top
        self.prof = cProfile.Profile() if top else None
        self.spans: dict[str, list[float]] = {}
        self.calls: list[dict[str, float]] = []  # each timed call's stages, in call order
        self.call: dict[str, float] | None = None
        self.plain: list[tuple] = []  # (owner, attr, function) to put back
        self.clock = bool(top) or clock
        if self.clock:
            for mod, name in (*STAGES, *extra):
                self._wrap(mod, name)
            import gc

            gc.callbacks.append(self._gc)
        self._gc_start = 0.0

    def _gc(self, phase: str, info: dict) -> None:
        """Garbage collections inside timed calls, as a stage of their own ("gc <generation>")."""
        if self.call is None:
            return
        if phase == "start":
            self._gc_start = time.perf_counter()
        else:
            key = f"gc {info.get('generation')}"
            self.call[key] = self.call.get(key, 0.0) + (time.perf_counter() - self._gc_start) * 1000

    def _wrap(self, mod: str, name: str) -> None:
        import asyncio
        import functools
        import importlib

        owner = importlib.import_module(mod)
        cls, _, attr = name.rpartition(".")
        if cls:
            owner = getattr(owner, cls)
        plain = getattr(owner, attr)
        self.plain.append((owner, attr, plain))

        def add(t: float) -> None:
            if self.call is not None:
                self.call[name] = self.call.get(name, 0.0) + (time.perf_counter() - t) * 1000

        if asyncio.iscoroutinefunction(plain):
            @functools.wraps(plain)
            async def timed(*a, **kw):
                t = time.perf_counter()
                try:
                    return await plain(*a, **kw)
                finally:
                    add(t)
        else:
            @functools.wraps(plain)
            def timed(*a, **kw):
                t = time.perf_counter()
                try:
                    return plain(*a, **kw)
                finally:
                    add(t)
        setattr(owner, attr, timed)

    def _on_loop(self, fn) -> None:
        """``fn()`` on the sync façade's event loop thread, where the async core runs."""
        from graphmem import _sync

        async def call():
            fn()

        _sync.run(call())

    def __enter__(self):
        if self.clock:
            self.call = {}
        if self.prof is not None:
            self._on_loop(self.prof.enable)

    def __exit__(self, *exc):
        if self.prof is not None:
            self._on_loop(self.prof.disable)
        if self.clock:
            for k, v in self.call.items():
                self.spans.setdefault(k, []).append(v)
            self.calls.append(self.call)
            self.call = None

    def report(self, name: str) -> None:
        for owner, attr, plain in reversed(self.plain):
            setattr(owner, attr, plain)
        import gc

        if self._gc in gc.callbacks:
            gc.callbacks.remove(self._gc)
        if not self.clock:
            return
        how = "under cProfile" if self.prof is not None else "clocked, no profiler"
        table(f"{name}: ms per timed call in each stage ({how})", ["stage", "calls", "p50",
              "p95", "total"], [[k, len(v), pct(v, 50), pct(v, 95), sum(v)]
                                for k, v in self.spans.items()])
        if self.prof is None:
            return
        import pstats

        print(f"\n{name}: the timed search and context calls under cProfile")
        pstats.Stats(self.prof).sort_stats("cumulative").print_stats(self.top)
        pstats.Stats(self.prof).sort_stats("tottime").print_stats(self.top)


def run_dataset(name: str, args, tmp: Path) -> dict:
    from graphmem import Memory, Settings

    data = load_dataset(DATA / name)
    sessions = data["sessions"]
    lo = data["meta"].get("task_window", [0, len(sessions)])[0]
    tasks = spread([t for t in data["tasks"] if t["after"] < len(sessions)
                    and (not args.types or t["type"] in args.types)], args.tasks)
    if args.values and (not args.types or "value_update" in args.types):  # _codemem_values.py
        tasks += [t for t in value_tasks(name) if t["after"] < len(sessions)]
    root = tmp / name / "project"
    by_after, last, repo, spec = start(root, data, tasks)
    settings = Settings.load(home=str(tmp / name / "home"))
    budgets = sorted(args.budgets)
    rankers = ("graphmem", "bm25", "recency", "random")
    rows: dict[str, list[dict]] = {r: [] for r in rankers}
    lat = {"search": [], "context": [], "write": []}
    items, mapper = Items(), Mapper()
    import graphmem.code

    plain_fresh = graphmem.code.with_freshness
    fresh_ms: list[float] = []

    def timed_freshness(hits, project_dir, **kw):  # the share of a search spent on freshness
        t = time.perf_counter()
        try:
            return plain_fresh(hits, project_dir, **kw)
        finally:
            fresh_ms.append((time.perf_counter() - t) * 1000)

    graphmem.code.with_freshness = timed_freshness
    plain_anchor = graphmem.code.record_anchors
    anchor_ms: list[float] = []

    def timed_anchors(*a, **kw):  # the share of a write spent finding anchors
        t = time.perf_counter()
        try:
            return plain_anchor(*a, **kw)
        finally:
            anchor_ms.append((time.perf_counter() - t) * 1000)

    graphmem.code.record_anchors = timed_anchors
    import graphmem.code.reorder as code_recall_mod

    plain_recall = code_recall_mod.code_recall
    recall_ms: list[float] = []

    def timed_recall(*a, **kw):  # the share of a search spent re-ranking by code (code/recall.py)
        t = time.perf_counter()
        try:
            return plain_recall(*a, **kw)
        finally:
            recall_ms.append((time.perf_counter() - t) * 1000)

    code_recall_mod.code_recall = timed_recall
    import graphmem.code.whereabouts as where_mod

    plain_where = {f: getattr(where_mod, f) for f in ("asked_homes", "mark_moved", "former_homes",
                                                   "promote")}
    where_ms: list[float] = []

    def timed_where(f):  # "where is X now" (code/whereabouts.py): its steps summed per search
        def timed(*a, **kw):
            t = time.perf_counter()
            try:
                return plain_where[f](*a, **kw)
            finally:
                ms = (time.perf_counter() - t) * 1000
                if f == "asked_homes" or not where_ms:  # asked once per search with code
                    where_ms.append(ms)
                else:
                    where_ms[-1] += ms
        return timed

    for f in plain_where:
        setattr(where_mod, f, timed_where(f))
    prof = Profiled(args.profile)
    t_start = time.perf_counter()
    with Memory(spec, root, settings=settings) as mem:
        for i, s in enumerate(sessions[:last + 1]):
            t0 = time.perf_counter()
            repo.apply(s)
            repo.commit(s["id"], s["time"])
            sid = write_session(mem, i, s)
            if i >= lo:
                lat["write"].append((time.perf_counter() - t0) * 1000)
            items.add(s)
            mapper.add(i, s, sid)
            group = by_after.get(i)
            if not group:
                continue
            mem.search("warm up before the tasks of this point", scope="project", limit=1)
            for task in group:
                n, text = len(rows["graphmem"]), task["text"]
                ctx: dict[int, str] = {}
                if n % 2 == 0:
                    t = time.perf_counter()
                    with prof:
                        hits = mem.search(text, scope="project", limit=20)
                    lat["search"].append((time.perf_counter() - t) * 1000)
                    for b in budgets:
                        ctx[b] = mem.context(text, max_tokens=b)
                else:
                    t = time.perf_counter()
                    with prof:
                        ctx[budgets[-1]] = mem.context(text, max_tokens=budgets[-1])
                    lat["context"].append((time.perf_counter() - t) * 1000)
                    hits = mem.search(text, scope="project", limit=20)
                    for b in budgets[:-1]:
                        ctx[b] = mem.context(text, max_tokens=b)
                if args.leaks is not None:
                    args.leaks.extend(leak_rows(name, task, hits, mapper, spec))
                rows["graphmem"].append(score(task, [mapper(h) for h in hits],
                                              [marked(h.metadata) for h in hits],
                                              [h.text for h in hits], ctx, repo,
                                              [marked(h.metadata, STRICT) for h in hits],
                                              [presented(h) for h in hits]))
                for rk, ranked in (("bm25", items.bm25(text, 200)), ("recency", items.recency(200)),
                                   ("random", items.random(200, task["id"]))):
                    rctx = {b: plain_context(text, ranked, b) for b in budgets}
                    rows[rk].append(score(task, [r["session"] for r in ranked[:20]],
                                          [False] * 20, [r["text"] for r in ranked[:20]], rctx, repo))
            print(f"{name}: after session {i}: {len(rows['graphmem'])}/{len(tasks)} tasks, "
                  f"{time.perf_counter() - t_start:.0f} s", flush=True)
    replay_s = time.perf_counter() - t_start
    prof.report(name)
    graphmem.code.with_freshness = plain_fresh
    graphmem.code.record_anchors = plain_anchor
    code_recall_mod.code_recall = plain_recall
    for f, fn in plain_where.items():
        setattr(where_mod, f, fn)
    lat["freshness"], lat["anchors"], lat["recall"] = fresh_ms, anchor_ms, recall_ms
    lat["whereabouts"] = where_ms
    anchors = spec / "memory" / "anchors.jsonl"
    from graphmem.code.anchor_file import needed

    if args.keep_anchors and anchors.exists():
        Path(args.keep_anchors).mkdir(parents=True, exist_ok=True)
        shutil.copy(anchors, Path(args.keep_anchors) / f"{name}.anchors.jsonl")
    result = {"sessions": last + 1, "tasks": len(tasks), "replay_s": replay_s,
              "anchors_bytes": anchors.stat().st_size if anchors.exists() else 0,
              "anchors_compacted_bytes": len("".join(needed(anchors.read_bytes().splitlines()))
                                             .encode()) if anchors.exists() else 0,
              "latency_ms": {k: {"p50": pct(v, 50), "p95": pct(v, 95)} for k, v in lat.items()},
              "rankers": {}}
    for rk in rankers:
        block = {"overall": average(rows[rk])}
        for typ in sorted({r["type"] for r in rows[rk]}):
            block[typ] = average([r for r in rows[rk] if r["type"] == typ])
        result["rankers"][rk] = block
    return result


def report(name: str, res: dict, budgets: list[int]) -> list[list]:
    b = max(budgets)
    cols = ["r@10", "ndcg@10", "hit@10", "mrr", f"filerecall@{b}", "staleleak@10",
            "staleleak_strict@10", "overmark@10",
            "staleleaktext", "currentabove_ctx", "currentabove@10", f"tokens@{b}", "unmapped@10"]
    trows = []
    for rk, block in res["rankers"].items():
        for typ, m in block.items():
            trows.append([rk, typ, m["n"], *(m.get(c, float("nan")) for c in cols)])
    lat = res["latency_ms"]
    table(f"{name}: {res['tasks']} tasks after {res['sessions']} sessions, replay "
          f"{res['replay_s']:.0f} s; search p50/p95 {lat['search']['p50']:.1f}/"
          f"{lat['search']['p95']:.1f} ms, context {lat['context']['p50']:.1f}/"
          f"{lat['context']['p95']:.1f} ms, write {lat['write']['p50']:.1f}/"
          f"{lat['write']['p95']:.1f} ms (freshness in each search {lat['freshness']['p50']:.1f}/"
          f"{lat['freshness']['p95']:.1f} ms; code recall {lat['recall']['p50']:.1f}/"
          f"{lat['recall']['p95']:.1f} ms; where-is-it-now {lat['whereabouts']['p50']:.3f}/"
          f"{lat['whereabouts']['p95']:.3f} ms; anchors in each write call {lat['anchors']['p50']:.1f}/"
          f"{lat['anchors']['p95']:.1f} ms); anchors.jsonl {res['anchors_bytes'] / 1e6:.2f} MB, "
          f"{res.get('anchors_compacted_bytes', 0) / 1e6:.2f} MB compacted",
          ["ranker", "type", "n", *cols], trows)
    vcols = ["currenthit", "stalefirst", "hit@10", "r@10", "overmark@10", "staleleak@10"]
    vrows = [[rk, *(block["value_update"].get(c, float("nan")) for c in vcols)]
             for rk, block in res["rankers"].items() if "value_update" in block]
    if vrows:
        table(f"{name}: value questions ({vrows and res['rankers']['graphmem']['value_update']['n']}"
              f"; currenthit: the current version in the {b}-token context, stalefirst: an old "
              "version stated first or the current one missing, hit@10: the announcing session "
              "in the top 10)", ["ranker", *vcols], vrows)
    labels = ("REVERTED", "GONE", "OVERWRITTEN", "SYMBOL_GONE", "SYMBOL_MOVED")
    leak_cols = ["staleleak@10", "staleleak_strict@10", "overmark@10", *(f"leak_{x}" for x in labels)]
    table(f"{name}: what leaks, by label (share of top-10 hits per task; overmark: current hits "
          "marked)", ["ranker", *leak_cols],
          [[rk, *(block["overall"].get(c, 0.0) for c in leak_cols)]
           for rk, block in res["rankers"].items()])
    return trows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--datasets", default="pytest,entire-cli")
    ap.add_argument("--tasks", type=int, default=None, help="at most N tasks, spread evenly")
    ap.add_argument("--budgets", default="1000,4000")
    ap.add_argument("--types", default=None, help="only tasks of these types (e.g. locate)")
    ap.add_argument("--no-values", dest="values", action="store_false",
                    help="leave out the value-update questions (bench/codemem_values.jsonl)")
    ap.add_argument("--out", default="codemem")
    ap.add_argument("--profile", type=int, default=None, metavar="N",
                    help="profile the timed calls; print the N costliest functions")
    ap.add_argument("--recall", default=None,
                    help="try other code recall knobs, e.g. file_gain=0.5,recency_gain=0 "
                         "(fields of graphmem.code.code_tuning.CodeTuning)")
    ap.add_argument("--gone-drop", type=int, default=None,
                    help="try moving gone hits this many places down instead of last")
    ap.add_argument("--floor", type=float, default=None,
                    help="try another context relevance floor (graphmem.rules.context.RELEVANCE_FLOOR)")
    ap.add_argument("--keep-anchors", default=None,
                    help="copy each dataset's anchors.jsonl after the replay into this folder")
    ap.add_argument("--leaks", default=None,
                    help="write every mapped top-10 hit, labelled and marked or not, to this JSONL file")
    args = ap.parse_args()
    leaks_path, args.leaks = args.leaks, [] if args.leaks else None
    from dataclasses import asdict, replace

    from graphmem.code import code_tuning

    knobs = {} if args.gone_drop is None else {"gone_drop": args.gone_drop}
    for knob in (args.recall or "").split(","):
        if knob:
            name, _, value = knob.partition("=")
            name = name.lower()  # FILE_GAIN, as before the knobs were one value, is file_gain
            knobs[name] = type(getattr(code_tuning.DEFAULT, name))(float(value))
    code_tuning.use(replace(code_tuning.DEFAULT, **knobs))
    tuning = asdict(code_tuning.current())
    if args.floor is not None:
        import graphmem.rules.context

        graphmem.rules.context.RELEVANCE_FLOOR = args.floor
    args.budgets = [int(b) for b in args.budgets.split(",")]
    args.types = set(args.types.split(",")) if args.types else None
    need(DATA, "the codemem datasets", "GRAPHMEM_CODEMEM_DATA")
    import graphmem.rules.context

    results: dict = {"data": str(DATA), "budgets": args.budgets, "tasks_limit": args.tasks,
                     "floor": graphmem.rules.context.RELEVANCE_FLOOR, "gone_drop": tuning["gone_drop"],
                     "recall": tuning,
                     "datasets": {}}
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.datasets.split(","):
            res = run_dataset(name, args, Path(tmp))
            results["datasets"][name] = res
            report(name, res, args.budgets)
    results["load_average"] = os.getloadavg()
    write_json(args.out, results)
    if leaks_path:
        import json

        Path(leaks_path).write_text("".join(json.dumps(r, default=str) + "\n" for r in args.leaks))
    return 0


if __name__ == "__main__":
    sys.exit(main())
