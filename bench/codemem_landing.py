"""Where an agent session's own commit is when its stale memories leak (the ceiling of judging
a session's memories against its own commit, issue 34).

In the agent replay (entire-cli) the project tree is main's first-parent branch at each session's
time: a session's linked commit (``Entire-Checkpoint:`` trailer) reaches the tree only when its
pull request is merged, with a later session's tree changes. Reading the source repository named
in the dataset's ``NOTICE`` (a git folder, e.g. from ``git clone --bare``), this script finds
for every session the replay session whose tree first holds its commit, and sorts the unmarked
stale top-10 hits of a ``bench/codemem.py --leaks`` dump by it:

- ``no linked commit``: no commit carries the session's trailer;
- ``never on main``: none of its commits is an ancestor of main (an abandoned, rebased or
  squashed branch);
- ``on main after the query``: merged later than the query; split by whether the commit is in
  the history of the task's own commit (the label was judged on a feature branch) or not (its
  lines and symbols never reached the code the label reads);
- ``landed before the query``: re-anchoring the session's memories on the code files its commit
  changed, as they were when the merge reached the tree, would show them ``visible`` to the
  existing marks (half or more of those files gone, at least two; or every symbol the merge
  added to them gone or moved), some of those symbols gone or moved, only ``changed since`` (a
  file's blob differs: a skeleton shows a rewritten body or overwritten lines only so, and
  current hits show it as often), or nothing (no file changed on main since it landed).

For a commit dataset (pytest) no repository is needed: a session's commit is its own tree
change, so every hit is ``landed`` and the groups say what the skeleton tree shows of it since.

It prints the counts by label, the same for current-labelled hits, and StaleLeak@10 recomputed
from the dump with each group marked (the ceilings)::

    .venv/bin/python bench/codemem.py --datasets entire-cli --leaks /tmp/leaks.jsonl
    .venv/bin/python bench/codemem_landing.py --repo /path/to/entireio-cli.git --leaks /tmp/leaks.jsonl
    .venv/bin/python bench/codemem_landing.py --dataset pytest --types task,locate,removed --leaks ...
"""

from __future__ import annotations

import argparse
import bisect
import json
import os
import re
import subprocess
import sys
from collections import Counter, defaultdict
from datetime import datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _codemem_replay import load_dataset
from _common import need, table, write_json

DATA = Path(os.environ.get("GRAPHMEM_CODEMEM_DATA") or "/work/shared/data/codemem")
TRAILER = re.compile(r"Entire-Checkpoint:\s*([0-9a-f]+)")
CODE = (".go", ".py")


class Source:
    """The source repository: commits by checkpoint id, and when each reaches main."""

    def __init__(self, git_dir: str, branch: str):
        """Read every commit's trailers and main's first-parent line once."""
        self.git_dir = git_dir
        self.ancestry: dict[tuple[str, str], bool] = {}
        self.by_checkpoint: dict[str, list[str]] = defaultdict(list)
        for rec in self.git("log", "--all", "--format=%H%x09%B%x00").split("\0"):
            sha, _, body = rec.strip().partition("\t")
            for ck in TRAILER.findall(body):
                self.by_checkpoint[ck].append(sha)
        line = [r.split() for r in self.git("log", "--first-parent", "--format=%H %cI", branch).splitlines()]
        self.main = line[::-1]  # oldest first

    def git(self, *args: str) -> str:
        """Output of a git command on the source repository."""
        return subprocess.run(["git", "--git-dir", self.git_dir, *args], capture_output=True,
                              text=True, check=False).stdout

    def contains(self, older: str, newer: str) -> bool:
        """Whether ``older`` is in the history of ``newer``."""
        key = (older, newer)
        if key not in self.ancestry:
            self.ancestry[key] = subprocess.run(
                ["git", "--git-dir", self.git_dir, "merge-base", "--is-ancestor", older, newer],
                check=False).returncode == 0
        return self.ancestry[key]

    def landing(self, sha: str) -> datetime | None:
        """Commit time of the first first-parent commit of main holding ``sha`` (None: never)."""
        lo, hi = 0, len(self.main)
        while lo < hi:
            mid = (lo + hi) // 2
            if self.contains(sha, self.main[mid][0]):
                hi = mid
            else:
                lo = mid + 1
        return datetime.fromisoformat(self.main[lo][1]) if lo < len(self.main) else None

    def code_files(self, sha: str) -> set[str]:
        """The code files a commit adds or changes (not those it deletes)."""
        out = set()
        for row in self.git("diff-tree", "-r", "--no-commit-id", "--root", sha).splitlines():
            meta, _, path = row.partition("\t")
            if path.endswith(CODE) and not meta.split()[-1].startswith("D"):
                out.add(path)
        return out


class Replay:
    """The replayed tree and symbol lists after each session (the protocol's step 2)."""

    def __init__(self, data: dict):
        """Apply every session's symbols and tree changes, keeping each state."""
        tree, syms = dict(data["tree0"]), {k: list(v) for k, v in data["symbols0"].items()}
        self.trees, self.symbols = [], []
        for s in data["sessions"]:
            for p, lst in (s.get("symbols") or {}).items():
                if lst is not None:
                    syms[p] = list(lst)
            for p, b in (s.get("tree_changes") or {}).items():
                if b is None:
                    tree.pop(p, None)
                    syms.pop(p, None)
                else:
                    tree[p] = b
            self.trees.append(dict(tree))
            self.symbols.append({k: list(v) for k, v in syms.items()})
        self._defs: dict[int, dict[str, set[str]]] = {}

    def defs(self, i: int) -> dict[str, set[str]]:
        """Symbol name -> files defining it after session ``i``."""
        if i not in self._defs:
            out: dict[str, set[str]] = defaultdict(set)
            for p, lst in self.symbols[i].items():
                for e in lst:
                    kind, _, name = e.partition(" ")
                    if kind != "package":
                        out[name].add(p)
            self._defs[i] = out
        return self._defs[i]


def where(sid: str, after: int, landed: dict, files_of: dict, data: dict, replay: Replay) -> str:
    """The group of a hit of session ``sid`` asked after session ``after`` (``landed``: session ->
    {its commit on main: the replay session whose tree first holds it}; ``files_of``: commit ->
    its code files)."""
    got = landed.get(sid)
    if got is None:
        return "no linked commit"
    if not got:
        return "never on main"
    j = min(got.values())
    if j > after:
        return "on main after the query"
    tc = data["sessions"][j].get("tree_changes") or {}
    files = [p for sha, k in got.items() if k <= after for p in files_of[sha] if p in tc]
    if not files:
        return "landed, no code file of it"
    before = replay.symbols[j - 1] if j else data["symbols0"]
    added = [(p, e.partition(" ")[2]) for p in files for e in replay.symbols[j].get(p, [])
             if e not in before.get(p, []) and not e.startswith("package ")]
    now, defs = replay.trees[after], replay.defs(after)
    gone = [p for p in files if p not in now]
    left = [n for p, n in added if not defs.get(n) or p not in defs[n]]
    if len(files) >= 2 and 2 * len(gone) >= len(files):
        return "landed: visible (its files gone)"
    if added and len(left) == len(added) and (len(added) >= 2 or any(defs.get(n) for _, n in added)):
        return "landed: visible (its symbols gone or moved)"
    if left:
        return "landed: some of its symbols gone or moved"
    if any(p in now and now[p] != replay.trees[j][p] for p in files):
        return "landed: only changed since"
    return "landed: nothing changed on main since"


def landings(data: dict, src: Source | None) -> tuple[dict[str, dict[str, int]], dict[str, set[str]]]:
    """(session -> {its commit on main: the replay session whose tree first holds it}, commit
    -> its code files); without ``src`` (a commit dataset) a session's commit is its own tree
    change."""
    times = [datetime.fromisoformat(s["time"].replace("Z", "+00:00")) for s in data["sessions"]]
    landed: dict[str, dict[str, int]] = {}
    files_of: dict[str, set[str]] = {}
    for i, s in enumerate(data["sessions"]):
        if src is None:
            tc = s.get("tree_changes") or {}
            landed[s["id"]] = {s["id"]: i}
            files_of[s["id"]] = {p for p, b in tc.items() if b is not None and p.endswith(CODE)}
            continue
        shas = src.by_checkpoint.get(s["id"].removeprefix("ck-"), [])
        if not shas:
            continue
        landed[s["id"]] = {}
        for sha in shas:
            at = src.landing(sha)
            if at is not None:
                landed[s["id"]][sha] = bisect.bisect_left(times, at)
                files_of[sha] = src.code_files(sha)
    return landed, files_of


def staleleak(rows: list[dict], extra) -> float:
    """StaleLeak@10 of the dump, per task then averaged, with ``extra(row)`` hits also marked."""
    per: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for r in rows:
        per[r["task"]][1] += 1
        per[r["task"]][0] += r["label"] != "CURRENT" and not r["marked"] and not extra(r)
    return sum(a / b for a, b in per.values()) / max(1, len(per))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repo", default=None,
                    help="git folder of an agent dataset's source repository (commit datasets "
                         "need none: a session's commit is its own tree change)")
    ap.add_argument("--types", default=None, help="only tasks of these types (e.g. task,locate,removed)")
    ap.add_argument("--leaks", required=True, help="a bench/codemem.py --leaks dump of the dataset")
    ap.add_argument("--dataset", default="entire-cli")
    ap.add_argument("--branch", default="main")
    ap.add_argument("--out", default="codemem_landing")
    args = ap.parse_args()
    need(DATA, "the codemem datasets", "GRAPHMEM_CODEMEM_DATA")
    data = load_dataset(DATA / args.dataset)
    replay = Replay(data)
    src = Source(args.repo, args.branch) if args.repo else None
    landed, files_of = landings(data, src)
    commits = {s["id"]: src.by_checkpoint[s["id"].removeprefix("ck-")] for s in data["sessions"]
               if src is not None and s["id"].removeprefix("ck-") in src.by_checkpoint}
    tasks = {t["id"]: t for t in data["tasks"]}
    rows = [json.loads(x) for x in Path(args.leaks).read_text().splitlines() if x.strip()]
    rows = [r for r in rows if r.get("dataset", args.dataset) == args.dataset
            and (not args.types or r["type"] in args.types.split(","))]
    for r in rows:
        task = tasks[r["task"]]
        g = where(r["session"], task["after"], landed, files_of, data, replay)
        if g == "on main after the query" and src is not None:
            own = commits.get(task.get("source_session") or "", [])
            if own:
                inside = any(src.contains(c, own[0] + "^") for c in commits[r["session"]])
                g += ", in the task's history" if inside else ", not in the task's history"
        r["where"] = g
    labels = ("REVERTED", "GONE", "OVERWRITTEN", "SYMBOL_GONE", "SYMBOL_MOVED")
    leak = [r for r in rows if r["label"] != "CURRENT" and not r["marked"]]
    counts = {lab: Counter(r["where"] for r in leak if r["label"] == lab) for lab in labels}
    cur = Counter(r["where"] for r in rows if r["label"] == "CURRENT")
    names = sorted({g for c in (*counts.values(), cur) for g in c})
    table(f"{args.dataset}: unmarked stale top-10 hits by where the session's own commit is "
          f"at the query ({len(leak)} hits; last column: current-labelled hits)",
          ["group", *labels, "all stale", "current"],
          [[g, *(counts[lab][g] for lab in labels), sum(counts[lab][g] for lab in labels), cur[g]]
           for g in names])
    ceilings = {"today": staleleak(rows, lambda r: False),
                "the visible ones": staleleak(rows, lambda r: r["where"].startswith("landed: visible")),
                "every landed one": staleleak(rows, lambda r: r["where"].startswith("landed"))}
    table("StaleLeak@10 recomputed from the dump", ["marked besides today's", "staleleak@10"],
          [[k, round(v, 3)] for k, v in ceilings.items()])
    write_json(args.out, {"dataset": args.dataset, "hits": len(rows), "leaks": len(leak),
                          "by_label": {k: dict(v) for k, v in counts.items()},
                          "current": dict(cur), "staleleak": ceilings})
    return 0


if __name__ == "__main__":
    sys.exit(main())
