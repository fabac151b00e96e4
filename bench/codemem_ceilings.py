"""Ceilings of session-level ranking signals on the codemem datasets, from the data alone.

Each ceiling ranks the sessions ingested before a task (one slot per session, so ten slots are ten
sessions) and scores recall@10 against the task's blame-linked ``relevant`` sessions, beside BM25
over the items graphmem would hold (the bench's baseline), in the same run:

- ``bm25``: the bench's baseline (items; ten items may come from three sessions);
- ``bm25 one/session``: the same order, one item per session (session diversity alone);
- ``files known, newest``: the task's files are known (its ``files``, and for locate/removed tasks the
  symbol's old and new file): the sessions that changed them (``tree_changes``), newest first;
- ``files known, bm25 order``: the same sessions in BM25's order (the earlier "oracle");
- ``files known, mentioned, newest``: sessions that changed or described the files (their map);
- ``files predicted, newest``: files predicted from the task text (paths and symbols it names that
  exist in the tree, then the files of BM25's best items' sessions), the sessions that changed them
  newest first, filled with BM25's sessions.

    .venv/bin/python bench/codemem_ceilings.py [--datasets pytest,entire-cli] [--prf 5]
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _codemem_replay import Items, load_dataset
from _common import need, table, write_json

DATA = Path(os.environ.get("GRAPHMEM_CODEMEM_DATA") or "/work/shared/data/codemem")
WORD = re.compile(r"[A-Za-z_][\w./-]*")


def recall(ranked: list[str], rel: dict[str, float], k: int = 10) -> float:
    """Weighted share of ``rel`` among the first ``k`` distinct sessions of ``ranked``."""
    top = list(dict.fromkeys(ranked))[:k]
    return sum(w for s, w in rel.items() if s in top) / (sum(rel.values()) or 1.0)


def newest_writers(files: list[str], wrote: dict[str, list[int]], ids: list[str]) -> list[str]:
    """Sessions that wrote any of ``files``, newest first."""
    idx = sorted({i for f in files for i in wrote.get(f, ())}, reverse=True)
    return [ids[i] for i in idx]


def named(text: str, tree: set[str], defined: dict[str, set[str]]) -> list[str]:
    """Files of the tree that the text names by path, file name, or a symbol they define."""
    by_name: dict[str, list[str]] = {}
    for p in tree:
        by_name.setdefault(p.rsplit("/", 1)[-1], []).append(p)
    out: list[str] = []
    for w in WORD.findall(text):
        w = w.strip("./`")
        if w in tree:
            out.append(w)
        elif w in by_name and len(by_name[w]) <= 2:
            out += by_name[w]
        elif len(w) > 3 and w.split(".")[-1] in defined:
            hits = defined[w.split(".")[-1]]
            if len(hits) <= 2:
                out += sorted(hits)
    return list(dict.fromkeys(out))


def run(name: str, prf: int) -> dict:
    data = load_dataset(DATA / name)
    sessions, tasks = data["sessions"], data["tasks"]
    by_after: dict[int, list[dict]] = {}
    for t in tasks:
        by_after.setdefault(t["after"], []).append(t)
    ids = [s["id"] for s in sessions]
    items = Items()
    wrote: dict[str, list[int]] = {}  # path -> sessions that changed it, in order
    said: dict[str, list[int]] = {}  # path -> sessions that changed or described it
    files_of: dict[str, set[str]] = {}
    tree = set(data["tree0"])
    symbols = {p: list(v) for p, v in data["symbols0"].items()}
    rows: dict[str, list[float]] = {}

    def put(key: str, ranked: list[str], rel: dict) -> None:
        rows.setdefault(key, []).append(recall(ranked, rel))

    for i, s in enumerate(sessions[:max(by_after) + 1]):
        items.add(s)
        for p, syms in (s.get("symbols") or {}).items():
            if syms is not None:
                symbols[p] = syms
        changed = s.get("tree_changes") or {}
        for p, blob in changed.items():
            if blob is None:
                tree.discard(p)
                symbols.pop(p, None)
            else:
                tree.add(p)
            wrote.setdefault(p, []).append(i)
        ins = s.get("insights") or {}
        described = {**((ins.get("discoveries") or {}).get("files_understood") or {}),
                     **(s.get("codebase_map") or {})}
        for p in {*changed, *described}:
            said.setdefault(p, []).append(i)
        files_of[s["id"]] = set(changed) | set(described)
        if i not in by_after:
            continue
        defined: dict[str, set[str]] = {}
        for p, syms in symbols.items():
            for e in syms:
                n = e.split(" ", 1)[-1]
                defined.setdefault(n.split(".")[-1], set()).add(p)
                defined.setdefault(n, set()).add(p)
        for t in by_after[i]:
            rel = t["relevant"]
            bm = items.bm25(t["text"], 200)
            bm_items = [r["session"] for r in bm]
            rows.setdefault("bm25", []).append(
                sum(w for s_, w in rel.items() if s_ in bm_items[:10]) / (sum(rel.values()) or 1))
            put("bm25 one/session", bm_items, rel)
            known = list(dict.fromkeys([*(t.get("files") or []),
                                        *([t["current_answer"]] if t.get("current_answer") else []),
                                        *(t.get("stale_answers") or [])]))
            writers = newest_writers(known, wrote, ids)
            put("files known, newest", writers + bm_items, rel)
            ws = set(writers)
            put("files known, bm25 order", [s_ for s_ in bm_items if s_ in ws] + writers, rel)
            put("files known, mentioned, newest",
                newest_writers(known, said, ids) + bm_items, rel)
            said_w = newest_writers(known, said, ids)
            sw = set(said_w)
            put("files known, mentioned, bm25 order", [s_ for s_ in bm_items if s_ in sw] + said_w,
                rel)
            rows.setdefault("(files known, mentioned: recall at any depth)", []).append(
                recall(said_w, rel, 10**6))
            rank = {s_: n for n, s_ in enumerate(dict.fromkeys(bm_items))}
            mix = sorted(said_w, key=lambda s_: min(rank.get(s_, 99), said_w.index(s_)))
            put("files known, mentioned, best of bm25/newest rank", mix + bm_items, rel)
            guess = named(t["text"], tree, defined)
            for s_ in list(dict.fromkeys(bm_items))[:prf]:
                guess += [f for f in sorted(files_of.get(s_, ())) if f not in guess]
            put("files predicted, newest", newest_writers(guess, wrote, ids)[:10] + bm_items, rel)
            top = list(dict.fromkeys(bm_items))[:prf]
            pw = [s_ for s_ in newest_writers(guess, wrote, ids) if s_ not in top]
            put("bm25 top-5 sessions + newest writers of their files", top + pw + bm_items, rel)
            named_only = named(t["text"], tree, defined)
            put("files named in text, newest", newest_writers(named_only, wrote, ids)[:10]
                + bm_items, rel)
            rows.setdefault("(tasks naming a file)", []).append(float(bool(named_only)))
    return {k: sum(v) / len(v) for k, v in rows.items()} | {"tasks": len(rows["bm25"])}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--datasets", default="pytest,entire-cli")
    ap.add_argument("--prf", type=int, default=5, help="BM25's best sessions whose files count")
    ap.add_argument("--out", default="codemem_ceilings")
    args = ap.parse_args()
    need(DATA, "the codemem datasets", "GRAPHMEM_CODEMEM_DATA")
    res = {name: run(name, args.prf) for name in args.datasets.split(",")}
    names = list(dict.fromkeys(k for r in res.values() for k in r if k != "tasks"))
    table("R@10 ceilings (one slot per session unless it says items)", ["ranking", *res],
          [[n, *(r.get(n, float("nan")) for r in res.values())] for n in names]
          + [["x BM25, files known newest", *(r["files known, newest"] / r["bm25"]
                                               for r in res.values())]])
    write_json(args.out, res)
    return 0


if __name__ == "__main__":
    sys.exit(main())
