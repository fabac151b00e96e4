"""The codemem replay protocol (../shared/data/codemem/README.md): the data, the project
materialised as a git repository that evolves session by session, and the items a baseline ranks.
"""

from __future__ import annotations

import gzip
import json
import os
import random
import re
import subprocess
from collections import Counter
from pathlib import Path

SPEC = ".auto-claude/specs/001-codemem"
INSIGHT_LISTS = ("what_worked", "what_failed", "recommendations_for_next_session", "subtasks_completed")


def load_dataset(folder: Path) -> dict:
    """meta, tree0, symbols0, sessions and tasks of one dataset folder."""
    def jsonl(name: str) -> list[dict]:
        p = folder / name
        if not p.exists():
            p = folder / (name + ".gz")
            return [json.loads(x) for x in gzip.open(p, "rt") if x.strip()]
        return [json.loads(x) for x in p.open() if x.strip()]

    return {"meta": json.loads((folder / "meta.json").read_text()),
            "tree0": json.loads((folder / "tree0.json").read_text()),
            "symbols0": json.loads((folder / "symbols0.json").read_text()),
            "sessions": jsonl("sessions.jsonl"), "tasks": jsonl("tasks.jsonl")}


def skeleton(path: str, blob: str, symbols: list[str] | None) -> str:
    """The file text the protocol writes for ``path`` at ``blob`` with its symbol list."""
    if path.endswith(".py") and symbols is not None:
        return _python(blob, symbols)
    if path.endswith(".go") and symbols is not None:
        return _go(path, blob, symbols)
    return f"blob {blob}\n"


def _python(blob: str, symbols: list[str]) -> str:
    blocks: list[tuple[str | None, str | None, list[str]]] = []  # (class, function, methods)
    for entry in symbols:
        kind, _, name = entry.partition(" ")
        if kind == "class":
            blocks.append((name, None, []))
        elif "." in name:
            cls, meth = name.split(".", 1)
            if blocks and blocks[-1][0] == cls and blocks[-1][1] is None:
                blocks[-1][2].append(meth)
            else:
                blocks.append((cls, None, [meth]))
        else:
            blocks.append((None, name, []))
    out = [f"# blob {blob}\n"]
    for cls, fn, methods in blocks:
        if cls is None:
            out.append(f"def {fn}(*a, **k): ...\n")
        elif not methods:
            out.append(f"class {cls}: ...\n")
        else:
            out.append(f"class {cls}:\n")
            out.extend(f"    def {m}(self, *a, **k): ...\n" for m in methods)
    return "".join(out)


def _go(path: str, blob: str, symbols: list[str]) -> str:
    pkg = next((e.split(" ", 1)[1] for e in symbols if e.startswith("package ")), None)
    pkg = pkg or (Path(path).parent.name or "main").replace("-", "_")
    out = [f"// blob {blob}\n", f"package {pkg}\n"]
    for entry in symbols:
        kind, _, name = entry.partition(" ")
        if kind == "type":
            out.append(f"type {name} struct{{}}\n")
        elif kind == "func" and "." in name:
            t, m = name.split(".", 1)
            out.append(f"func (r *{t}) {m}() {{}}\n")
        elif kind == "func":
            out.append(f"func {name}() {{}}\n")
    return "".join(out)


class Repo:
    """The materialised project: a git repository whose tree follows the sessions."""

    def __init__(self, root: Path, tree0: dict, symbols0: dict):
        self.root = root
        self.tree: dict[str, str] = dict(tree0)
        self.symbols: dict[str, list[str]] = {k: list(v) for k, v in symbols0.items()}
        self.ever: set[str] = set(tree0)
        root.mkdir(parents=True, exist_ok=True)
        self._git("init", "-q", "-b", "main")
        self._git("config", "user.email", "bench@example.invalid")
        self._git("config", "user.name", "codemem bench")
        self._git("config", "core.autocrlf", "false")
        (root / ".git" / "info" / "exclude").write_text(".auto-claude/\n.graphmem*/\n")
        for path, blob in tree0.items():
            self._write(path, blob)
        self.commit("tree0", None)

    @classmethod
    def resume(cls, root: Path, state: dict) -> "Repo":
        """The repository a replay left at ``root``, with the ``state()`` it saved."""
        repo = cls.__new__(cls)
        repo.root, repo.tree = root, dict(state["tree"])
        repo.symbols = {k: list(v) for k, v in state["symbols"].items()}
        repo.ever = set(state["ever"])
        return repo

    def state(self) -> dict:
        """What ``resume`` needs besides the folder (JSON)."""
        return {"tree": self.tree, "symbols": self.symbols, "ever": sorted(self.ever)}

    def _git(self, *args: str, env: dict | None = None) -> str:
        return subprocess.run(["git", "-C", str(self.root), *args], check=True, text=True,
                              capture_output=True, env=env).stdout

    def _write(self, path: str, blob: str) -> None:
        p = self.root / path
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(skeleton(path, blob, self.symbols.get(path)))

    def apply(self, session: dict) -> None:
        """The session's symbols, then its tree changes (the protocol's step 2)."""
        for path, syms in (session.get("symbols") or {}).items():
            if syms is not None:
                self.symbols[path] = list(syms)
        for path, blob in (session.get("tree_changes") or {}).items():
            if blob is None:
                self.tree.pop(path, None)
                self.symbols.pop(path, None)
                try:
                    (self.root / path).unlink()
                except FileNotFoundError:
                    pass
            else:
                self.tree[path] = blob
                self.ever.add(path)
                self._write(path, blob)

    def commit(self, message: str, when: str | None) -> None:
        env = dict(os.environ)
        if when:
            env.update(GIT_AUTHOR_DATE=when, GIT_COMMITTER_DATE=when)
        self._git("add", "-A")
        self._git("commit", "-q", "--allow-empty", "--no-verify", "-m", message, env=env)


def start(root: Path, data: dict,
          tasks: list[dict]) -> tuple[dict[int, list[dict]], int, Repo, Path]:
    """A replay's start: the tasks by the session they follow, the last such session, the
    project's repository at its first tree, and its new spec folder."""
    by_after: dict[int, list[dict]] = {}
    for t in tasks:
        by_after.setdefault(t["after"], []).append(t)
    repo = Repo(root, data["tree0"], data["symbols0"])
    spec = root / SPEC
    spec.mkdir(parents=True)
    return by_after, (max(by_after) if by_after else -1), repo, spec


def write_session(mem, i: int, s: dict) -> str | None:
    """Session ``i`` written through the public API (the protocol's step 2); its episodic
    session id, if it had turns or steps."""
    mem.save_session_insights(i + 1, s["insights"])
    if s.get("codebase_map"):
        mem.update_codebase_map(s["codebase_map"])
    for g in s.get("gotchas") or []:
        mem.append_gotcha(g)
    for p in s.get("patterns") or []:
        mem.append_pattern(p)
    if not (s.get("turns") or s.get("steps")):
        return None
    sid = mem.start_session(model=s.get("agent"), mode="agent", at=s["time"])
    if s.get("turns"):
        mem.record_turns(sid, [{"role": t["role"], "content": t["content"],
                                "metadata": {"codemem_session": s["id"]}, "at": s["time"]}
                               for t in s["turns"]])
    for st in s.get("steps") or []:
        mem.record_step(sid, st["action"], st["status"], st.get("detail"), at=s["time"])
    mem.end_session(sid)
    return sid


# ---- baselines over the items graphmem would hold --------------------------------------------


def terms(text: str) -> list[str]:
    """BM25's terms: graphmem's lexical tokenizer (stemmed words, identifiers and paths whole and
    split), so the baseline is as strong lexically as the index it is compared with."""
    from graphmem.index.text import tokenize

    return tokenize(text)


def normalise(text: str) -> str:
    return " ".join(text.casefold().split())


PATHLIKE = re.compile(r"[\w./-]+")


def gone_mentions(text: str, repo: Repo) -> tuple[int, int]:
    """StaleLeakText's counts in ``text``: mentions of paths the replay's tree ever held, and
    those naming a path gone now on a line that does not say "stale", "changed since" or "gone"."""
    gone = repo.ever - set(repo.tree)
    mentions = stale = 0
    for line in text.splitlines():
        lower = line.lower()
        ok = any(w in lower for w in ("stale", "changed since", "gone"))
        for tok in PATHLIKE.findall(line):
            tok = tok.strip(".")
            if tok in repo.ever:
                mentions += 1
                stale += tok in gone and not ok
    return mentions, stale


class Items:
    """One item per insight line, per file path (latest purpose), per distinct gotcha or pattern
    (first writer), per turn and step; each with its session and its order of arrival."""

    def __init__(self) -> None:
        self.rows: dict[str, dict] = {}  # key -> {text, kind, session, order}
        self.order = 0

    def _put(self, key: str, kind: str, text: str, session: str, replace: bool = True) -> None:
        if key in self.rows and not replace:
            return
        self.order += 1
        self.rows[key] = {"key": key, "kind": kind, "text": text, "session": session,
                          "order": self.order, "toks": Counter(terms(text))}

    def add(self, s: dict) -> None:
        sid, ins = s["id"], s.get("insights") or {}
        for field in INSIGHT_LISTS:
            for n, text in enumerate(ins.get(field) or []):
                if text.strip():
                    self._put(f"i|{sid}|{field}|{n}", "insight", text.strip(), sid)
        files = {**((ins.get("discoveries") or {}).get("files_understood") or {}),
                 **(s.get("codebase_map") or {})}
        for path, purpose in files.items():
            self._put(f"f|{path}", "file", f"{path}: {purpose}", sid)
        for kind in ("gotcha", "pattern"):
            for text in s.get(kind + "s") or []:
                self._put(f"{kind}|{normalise(text)}", kind, text.strip(), sid, replace=False)
        for n, t in enumerate(s.get("turns") or []):
            self._put(f"t|{sid}|{n}", "turn", t["content"], sid)
        for n, st in enumerate(s.get("steps") or []):
            text = f"{st['action']}: {st['status']}"
            if st.get("detail") not in (None, {}, []):
                text += " " + json.dumps(st["detail"], ensure_ascii=False, separators=(",", ":"))
            self._put(f"s|{sid}|{n}", "step", text, sid)

    def bm25(self, query: str, k: int, k1: float = 1.2, b: float = 0.75) -> list[dict]:
        rows = list(self.rows.values())
        q = set(terms(query))
        if not rows or not q:
            return []
        import math

        avg = sum(sum(r["toks"].values()) for r in rows) / len(rows)
        df = Counter(t for r in rows for t in q if t in r["toks"])
        idf = {t: math.log(1 + (len(rows) - n + 0.5) / (n + 0.5)) for t, n in df.items()}
        scored = []
        for r in rows:
            toks, dl, s = r["toks"], None, 0.0
            for t in idf:
                f = toks.get(t)
                if f:
                    dl = dl if dl is not None else sum(toks.values())
                    s += idf[t] * f * (k1 + 1) / (f + k1 * (1 - b + b * dl / avg))
            if s > 0:
                scored.append((s, r["order"], r))
        scored.sort(key=lambda x: (-x[0], -x[1]))
        return [r for _, _, r in scored[:k]]

    def recency(self, k: int) -> list[dict]:
        return sorted(self.rows.values(), key=lambda r: -r["order"])[:k]

    def random(self, k: int, seed: str) -> list[dict]:
        rows = list(self.rows.values())
        return random.Random(seed).sample(rows, min(k, len(rows)))


def plain_context(task: str, rows: list[dict], max_tokens: int) -> str:
    """A baseline's context in graphmem's pre-freshness layout: sections, best first, deduped,
    cut to the budget (chars / 4)."""
    import math

    est = lambda s: math.ceil(len(s) / 4)  # noqa: E731
    sections = (("Gotchas", ("gotcha",)), ("Patterns", ("pattern",)), ("Files", ("file",)),
                ("Lessons from past sessions", ("insight", "turn", "step")))
    section_of = {k: t for t, kinds in sections for k in kinds}
    header = f"## Memory relevant to: {task[:120]}\n"
    budget = max_tokens - est(header)
    chosen: dict[str, list[str]] = {t: [] for t, _ in sections}
    seen: set[str] = set()
    for r in rows:
        key = normalise(r["text"])
        if key in seen:
            continue
        title = section_of[r["kind"]]
        line = f"- {' '.join(r['text'].split())} _(source: session {r['session']})_\n"
        cost = est(line) + (0 if chosen[title] else est(f"\n### {title}\n"))
        if cost > budget:
            continue
        seen.add(key)
        chosen[title].append(line)
        budget -= cost
    if not seen:
        return ""
    out = [header]
    for title, _ in sections:
        if chosen[title]:
            out.append(f"\n### {title}\n")
            out.extend(chosen[title])
    return "".join(out)
