"""Marks for work that never reached the tree, measured first (issue 34): what an agent
session's memory shows when its own commit is not in the tree at the query, and which true
rule could mark it.

An agent session's codebase-map entries describe its files as the session saw them ("package
cli: defines A, B, ..."): on its own branch. When a name an entry gives is not defined in that
file in the replayed tree at the session's write (and nowhere else), the session's version of
the file is not the tree's: its work had not reached the tree. Each rule below reads only what
a memory system sees (the session's steps and map, the tree at its write and at the query, the
times), except the ceilings marked *oracle*, which use the data's task files (what the task
will change) or, with ``--repo``, where the session's own commit is (``codemem_landing.py``).

For every mapped top-10 hit of a ``bench/codemem.py --leaks`` dump the script prints how many
unmarked stale hits and unmarked current-labelled hits each rule would mark, and StaleLeak@10
and OverMark@10 recomputed from the dump with those hits marked (per task, then averaged, as
the bench scores them)::

    .venv/bin/python bench/codemem.py --datasets entire-cli --leaks /tmp/leaks.jsonl
    .venv/bin/python bench/codemem_unlanded.py --leaks /tmp/leaks.jsonl [--repo entireio-cli.git]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from collections import defaultdict
from datetime import datetime
from pathlib import Path
from typing import Callable

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _codemem_replay import load_dataset
from _common import need, table, write_json
from codemem_landing import Replay, Source, landings, where

DATA = Path(os.environ.get("GRAPHMEM_CODEMEM_DATA") or "/work/shared/data/codemem")
DEFINES = re.compile(r"defines (.*?)(?:;|\(\+|$)")
IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*")


def looks_like_symbol(name: str, text: str, start: int) -> bool:
    """A code name, as graphmem's anchors read one (``anchors._looks_like_symbol``)."""
    if "." in name or "_" in name.strip("_") or any(c.isupper() for c in name[1:]):
        return True
    return text[start - 1:start] == "`" or text[start + len(name):start + len(name) + 1] == "("


def entry_names(purpose: str) -> list[str]:
    """The names a map entry's purpose says its file defines ("defines A, B (+3 more)")."""
    m = DEFINES.search(purpose)
    return [n.strip() for n in m.group(1).split(",") if n.strip()] if m else []


def edited(session: dict) -> list[str]:
    """The paths the session's Edit and Write steps name."""
    return list(dict.fromkeys(
        st["detail"]["path"] for st in session.get("steps") or ()
        if st.get("action") in ("Edit", "Write") and isinstance(st.get("detail"), dict)
        and isinstance(st["detail"].get("path"), str)))


class Hits:
    """The dump's rows with what each rule reads of them."""

    def __init__(self, data: dict, replay: Replay, rows: list[dict]):
        """Index the sessions and tasks; ``rows`` are the dump's hits of this dataset."""
        self.data, self.replay, self.rows = data, replay, rows
        self.sessions = data["sessions"]
        self.index = {s["id"]: i for i, s in enumerate(self.sessions)}
        self.tasks = {t["id"]: t for t in data["tasks"]}
        self.times = [datetime.fromisoformat(s["time"].replace("Z", "+00:00")) for s in self.sessions]
        self._own: dict[int, list[tuple[str, str]]] = {}
        self._loose: dict[int, set[str]] = {}

    def at(self, r: dict) -> tuple[int, int]:
        """(the hit's session index, the query's last session index)."""
        return self.index[r["session"]], self.tasks[r["task"]]["after"]

    def own_names(self, i: int) -> list[tuple[str, str]]:
        """(path, name) the session's map entries give that the tree at its write defines
        nowhere: code of its own version of the files."""
        if i not in self._own:
            defs, syms = self.replay.defs(i), self.replay.symbols[i]
            out = []
            for path, purpose in (self.sessions[i].get("codebase_map") or {}).items():
                here = {e.partition(" ")[2] for e in syms.get(path, ())}
                out += [(path, n) for n in entry_names(purpose) if n not in here and not defs.get(n)]
            self._own[i] = out
        return self._own[i]

    def absent(self, r: dict) -> tuple[int, int]:
        """(its own names, how many of them are defined nowhere at the query)."""
        i, a = self.at(r)
        own = self.own_names(i)
        defs = self.replay.defs(a)
        return len(own), sum(1 for _, n in own if not defs.get(n))

    def loose_names(self, i: int) -> set[str]:
        """The code-looking names (dotted, snake, camel, backticked or called) the session's
        prompts, subjects and discoveries use that the tree at its write defines nowhere: the
        same sign read from free text instead of the map's name lists."""
        if i not in self._loose:
            s, defs = self.sessions[i], self.replay.defs(i)
            texts = [t.get("content") or "" for t in s.get("turns") or ()]
            texts += [*(s["insights"].get("subtasks_completed") or ()),
                      json.dumps(s["insights"].get("discoveries") or {})]
            self._loose[i] = {n.rsplit(".", 1)[-1] for t in texts for m in IDENT.finditer(t)
                              if looks_like_symbol(n := m.group(0), t, m.start())
                              and not defs.get(n.rsplit(".", 1)[-1])}
        return self._loose[i]

    def came_and_went(self, r: dict) -> tuple[int, int]:
        """(its own names that reached the tree after its write, before the query; how many of
        those are defined nowhere again at the query): its work landed, then left."""
        i, a = self.at(r)
        names = {n for _, n in self.own_names(i)}
        came = {n for j in range(i + 1, a + 1) for n in names if self.replay.defs(j).get(n)}
        return len(came), sum(1 for n in came if not self.replay.defs(a).get(n))

    def days(self, r: dict) -> float:
        """Days from the session's write to the query."""
        i, a = self.at(r)
        return (self.times[a] - self.times[i]).total_seconds() / 86400

    def unchanged_edits(self, r: dict, only: set[str] | None = None) -> bool:
        """Whether a file its steps edited (of ``only``) has the blob it had at its write still:
        its edits are not in the tree (the replay writes before the session's commit lands)."""
        i, a = self.at(r)
        then, now = self.replay.trees[i], self.replay.trees[a]
        return any(p in then and now.get(p) == then[p] for p in edited(self.sessions[i])
                   if only is None or p in only)

    def absent_in(self, r: dict, only: set[str]) -> bool:
        """Whether its map gives, for a file of ``only``, own names all defined nowhere now."""
        i, a = self.at(r)
        defs = self.replay.defs(a)
        by: dict[str, list[str]] = defaultdict(list)
        for p, n in self.own_names(i):
            by[p].append(n)
        return any(p in only and not any(defs.get(n) for n in by[p]) for p in by)

    def task_files(self, r: dict) -> set[str]:
        """*oracle*: the code files the task will change (the data's ``files``)."""
        return set(self.tasks[r["task"]].get("files") or ())

    def recompute(self, extra: Callable[[dict], bool]) -> tuple[float, float]:
        """(StaleLeak@10, OverMark@10) of the dump with ``extra(row)`` hits marked too."""
        per: dict[str, list[tuple[str, bool]]] = defaultdict(list)
        for r in self.rows:
            per[r["task"]].append((r["label"], bool(r["marked"] or extra(r))))
        leak = [sum(1 for lab, m in hs if lab != "CURRENT" and not m) / len(hs) for hs in per.values()]
        over = [sum(m for lab, m in hs if lab == "CURRENT") / n for hs in per.values()
                if (n := sum(1 for lab, _ in hs if lab == "CURRENT"))]
        return sum(leak) / max(1, len(leak)), sum(over) / max(1, len(over))


def rules(h: Hits, landed: Callable[[dict], str] | None) -> dict[str, Callable[[dict], bool]]:
    """The rules tried, by name (``landed``: the hit's group in ``codemem_landing.where``)."""
    def own(least: int, days: float = 0.0) -> Callable[[dict], bool]:
        def rule(r: dict) -> bool:
            n, gone = h.absent(r)
            return n >= least and gone == n and (not days or h.days(r) >= days)
        return rule
    def since(r: dict) -> bool:  # its freshness names files whose content differs now
        return bool((r.get("freshness") or {}).get("changed_since"))
    out = {
        "its own names (1+) all defined nowhere now": own(1),
        "the same, 2+ names": own(2),
        "the same, 3+ names": own(3),
        "the same, 5+ names": own(5),
        "own names (1+) nowhere, and a file of it changed since (`changed_since`)":
            lambda r: own(1)(r) and since(r),
        "own names (3+) nowhere, and a file of it changed since": lambda r: own(3)(r) and since(r),
        "own names (1+) nowhere, a day or more after its write": own(1, 1.0),
        "own names (2+) nowhere, two days or more after": own(2, 2.0),
        "own names that reached the tree later (1+), all gone again":
            lambda r: (c := h.came_and_went(r))[0] >= 1 and c[1] == c[0],
        "a file it edited has its blob of the write still": h.unchanged_edits,
        "code names in its texts (3+) the tree lacked at its write, none defined now":
            lambda r: len(h.loose_names(h.at(r)[0])) >= 3 and not any(
                h.replay.defs(h.at(r)[1]).get(n) for n in h.loose_names(h.at(r)[0])),
        "*oracle* a task file it edited has its blob of the write still":
            lambda r: h.unchanged_edits(r, h.task_files(r)),
        "*oracle* own names of a task file all nowhere now": lambda r: h.absent_in(r, h.task_files(r)),
        "*oracle* it edited a task file": lambda r: bool(set(edited(h.sessions[h.at(r)[0]])) & h.task_files(r)),
    }
    if landed is not None:
        def unlanded(r: dict) -> bool:
            return landed(r).startswith(("on main after", "never on main"))
        out["*oracle* its commit is not on main at the query"] = unlanded
        out["*oracle* not on main, and it edited a task file"] = \
            lambda r: unlanded(r) and out["*oracle* it edited a task file"](r)
        out["*oracle* not on main, and it edited or mapped a task file"] = lambda r: unlanded(r) and bool(
            {*edited(h.sessions[h.at(r)[0]]), *(h.sessions[h.at(r)[0]].get("codebase_map") or {})}
            & h.task_files(r))
        out["*oracle* its commit on main at the query (every landed stale hit)"] = \
            lambda r: r["label"] != "CURRENT" and landed(r).startswith("landed")
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--leaks", required=True, help="a bench/codemem.py --leaks dump of the dataset")
    ap.add_argument("--dataset", default="entire-cli")
    ap.add_argument("--repo", default=None, help="git folder of the dataset's source repository "
                    "(optional: the *oracle* rules by where the session's own commit is)")
    ap.add_argument("--branch", default="main")
    ap.add_argument("--out", default="codemem_unlanded")
    args = ap.parse_args()
    need(DATA, "the codemem datasets", "GRAPHMEM_CODEMEM_DATA")
    data = load_dataset(DATA / args.dataset)
    replay = Replay(data)
    rows = [json.loads(x) for x in Path(args.leaks).read_text().splitlines() if x.strip()]
    tasks = {t["id"] for t in data["tasks"]}  # the value questions are not the data's tasks
    rows = [r for r in rows if r.get("dataset", args.dataset) == args.dataset and r["task"] in tasks]
    h = Hits(data, replay, rows)
    landed = None
    if args.repo:
        found, files_of = landings(data, Source(args.repo, args.branch))
        groups = {(r["task"], r["session"]): where(r["session"], h.tasks[r["task"]]["after"], found,
                                                   files_of, data, replay) for r in rows}
        landed = lambda r: groups[(r["task"], r["session"])]  # noqa: E731
    leaks = [r for r in rows if r["label"] != "CURRENT" and not r["marked"]]
    fine = [r for r in rows if r["label"] == "CURRENT" and not r["marked"]]
    base = h.recompute(lambda r: False)
    out = [["today", 0, 0, round(base[0], 3), round(base[1], 3)]]
    for name, rule in rules(h, landed).items():
        sl, om = h.recompute(rule)
        out.append([name, sum(1 for r in leaks if rule(r)), sum(1 for r in fine if rule(r)),
                    round(sl, 3), round(om, 3)])
    table(f"{args.dataset}: {len(leaks)} unmarked stale and {len(fine)} unmarked current top-10 "
          f"hits; what each rule would mark, and the dump's figures with it",
          ["rule", "stale marked", "current marked", "staleleak@10", "overmark@10"], out)
    write_json(args.out, {"dataset": args.dataset, "hits": len(rows), "leaks": len(leaks),
                          "rules": {r[0]: dict(zip(("stale", "current", "staleleak", "overmark"),
                                                   r[1:])) for r in out}})
    return 0


if __name__ == "__main__":
    sys.exit(main())
