"""What a range of commits did to memory (``graphmem diff BASE..HEAD``).

- ``added``: memories the committed memory files hold at HEAD and not at BASE (read from git at
  both commits: the project memory ``.graphmem/memory/`` and every committed spec folder);
- ``retired`` / ``superseded``: validity events (``validity.jsonl``) HEAD holds and BASE does not;
- ``stale`` / ``moved`` / ``gone``: memories of the work tree's memory folders, learned at BASE or
  before, whose code the range changed: each anchored to a file the range touched is judged by
  ``freshness.item_state`` on the tree of BASE and on the tree of HEAD (``changes.tree_at``), and
  named when its state at HEAD is not ``current`` and is not what it already was at BASE
  (memories retired or superseded in the work tree are left out).

Only memories anchored to a touched file are judged, and the trees' symbols are parsed once per
blob, so one commit of a long history takes milliseconds (``bench/memory_diff.py``).
"""

from __future__ import annotations

import dataclasses
import json
import re
import tempfile
from pathlib import Path
from typing import Any

from ..errors import ValidationError
from .anchor_file import book
from .changes import tree_at
from .freshness import item_state, prepare
from .history import _git, cat_file
from .tree import Snapshot, snapshot

_MEMORY_FILE = re.compile(r"(?:^|/)memory/(?:gotchas\.md|patterns\.md|codebase_map\.json|"
                          r"validity\.jsonl|session_insights/session_[^/]+\.json)$")
STALE_STATES = {"changed": "stale", "moved": "moved", "gone": "gone"}


def resolve_range(root: Path, spec: str | None) -> tuple[str, str, str]:
    """``BASE..HEAD`` (``BASE...HEAD``: from their merge base; ``BASE``: to HEAD; nothing:
    ``HEAD~1..HEAD``) -> (base sha, head sha, the range as given)."""
    text = spec or "HEAD~1..HEAD"
    three = "..." in text
    base, _, head = text.partition("..." if three else "..")
    base, head = base or "HEAD", head or "HEAD"
    shas = []
    for name in (base, head):
        out = None if name.startswith("-") else _git(root, "rev-parse", "--verify", "--quiet",
                                                        f"{name}^{{commit}}")
        if not out:
            raise ValidationError(f"{name!r} is not a commit of {root} (range {text!r})",
                                  field="range")
        shas.append(out.decode().strip())
    if three:
        mb = _git(root, "merge-base", shas[0], shas[1])
        if not mb:
            raise ValidationError(f"{base} and {head} have no common ancestor", field="range")
        shas[0] = mb.decode().strip()
    return shas[0], shas[1], text


def memory_at(root: Path, commit: str, into: Path) -> list[str]:
    """Write the committed memory files of ``commit`` under ``into`` (same relative paths) ->
    the spec folders found (relative)."""
    raw = _git(root, "ls-tree", "-r", "-z", "--name-only", commit) or b""
    paths = [p for p in raw.decode("utf-8", "surrogateescape").split("\0") if _MEMORY_FILE.search(p)]
    texts = cat_file(root, [f"{commit}:{p}" for p in paths], limit=1 << 30)
    specs: set[str] = set()
    for p in paths:
        text = texts.get(f"{commit}:{p}")
        if text is None:
            continue
        dest = into / p
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_text(text, encoding="utf-8")
        specs.add(p[: p.index("memory/")].rstrip("/") or ".")
    return sorted(specs)


def _items_and_events(project: Any, root: Path, commit: str, into: Path
                      ) -> tuple[dict[str, Any], dict[str, dict]]:
    from ..files.spec_store import SpecStore
    from ..files.validity_log import STATES, ValidityLog

    items: dict[str, Any] = {}
    events: dict[str, dict] = {}
    there = dataclasses.replace(project, root=into)
    for spec in memory_at(root, commit, into):
        folder = into / spec
        for it in SpecStore(folder, there).items():
            items[it.id] = it
        vfile = folder / "memory" / "validity.jsonl"
        if vfile.exists():
            log = ValidityLog(vfile)
            log.refresh()
            for line in vfile.read_text(encoding="utf-8", errors="replace").splitlines():
                try:
                    rec = json.loads(line)
                except ValueError:
                    continue
                if isinstance(rec, dict) and isinstance(rec.get("item"), str) \
                        and rec["item"] in log.events and rec.get("state") in STATES:
                    events.setdefault(f"{rec['item']}\x1f{rec.get('state')}", rec)
    return items, events


def committed_changes(project: Any, base: str, head: str) -> dict[str, list[dict]]:
    """Memories added, retired and superseded between two commits, from the committed files."""
    root = project.root
    with tempfile.TemporaryDirectory(prefix="graphmem-diff-") as tmp:
        b_items, b_events = _items_and_events(project, root, base, Path(tmp) / "base")
        h_items, h_events = _items_and_events(project, root, head, Path(tmp) / "head")
        pending = _pending(Path(tmp) / "head")
    added = [{"id": i, "kind": it.kind, "text": it.text, "source": it.source,
              **({"review": "pending"} if i in pending else {})}
             for i, it in h_items.items() if i not in b_items]
    out: dict[str, list[dict]] = {"added": added, "retired": [], "superseded": []}
    for key, ev in h_events.items():
        if key in b_events:
            continue
        it = h_items.get(ev["item"]) or b_items.get(ev["item"])
        row = {"id": ev["item"], "text": it.text if it else None, "reason": ev.get("reason"),
               "by": ev.get("by"), "at": ev.get("invalid_at")}
        out["retired" if ev.get("state") == "retired" else "superseded"].append(row)
    return out


def _pending(into: Path) -> set[str]:
    """The memories pending review (``graphmem review``) in the memory folders written at
    ``into``: added on the branch, not yet accepted."""
    from ..files.validity_log import PENDING, ValidityLog

    out: set[str] = set()
    for vfile in into.rglob("validity.jsonl") if into.is_dir() else ():
        log = ValidityLog(vfile)
        log.refresh()
        out |= {i for i, ev in log.events.items() if ev.get("state") == PENDING}
    return out


def touched(root: Path, base: str, head: str) -> set[str]:
    """The paths the range changed, deleted or renamed (both names of a rename)."""
    raw = _git(root, "diff", "--name-status", "-z", "-M", base, head) or b""
    tokens = raw.decode("utf-8", "surrogateescape").split("\0")
    out: set[str] = set()
    i = 0
    while i < len(tokens) - 1:
        status = tokens[i]
        n = 2 if status[:1] in ("R", "C") else 1
        out.update(tokens[i + 1: i + 1 + n])
        i += 1 + n
    return out


class StaleFinder:
    """The memories each range made stale, moved or gone; trees kept from one call to the next
    (a history walked commit by commit parses each changed file once)."""

    def __init__(self, root: Path, spec_dirs: list[Path]):
        self.root = root
        self.spec_dirs = spec_dirs
        self.now = snapshot(root, max_age=0)
        self._trees: dict[str, Snapshot] = {}
        self._last: Snapshot | None = None

    def tree(self, commit: str) -> Snapshot:
        """The project's tree at ``commit`` (two kept)."""
        snap = self._trees.get(commit)
        if snap is None:
            got = tree_at(self.now, commit, self._last)
            if got is None:
                raise ValidationError(f"cannot read the tree of {commit}", field="range")
            snap = got
            if len(self._trees) >= 2:
                self._trees.pop(next(iter(self._trees)))
            self._trees[commit] = self._last = snap
        return snap

    def find(self, base: str, head: str) -> list[dict]:
        """``[{"id", "state": stale|moved|gone, "was", "paths", "moved", "gone", "spec"}]``."""
        paths = touched(self.root, base, head)
        if not paths:
            return []
        known = set((_git(self.root, "rev-list", base) or b"").decode().split())
        cands: list[tuple[Path, str, dict]] = []
        from ..files.validity_log import validity_log

        for spec in self.spec_dirs:
            b = book(spec)
            ended = {i for i, ev in validity_log(spec).events.items()
                     if ev.get("state") in ("retired", "superseded")}  # no longer said: not stale
            ids: dict[str, None] = {}
            for p in paths:
                ids.update(dict.fromkeys(b.by_path.get(p, ())))
            for iid in ids:
                rec = b.records.get(iid)
                if rec is not None and iid not in ended and (rec.get("head") in known or not rec.get("head")):
                    cands.append((spec, iid, rec))
        if not cands:
            return []
        before, after = self.tree(base), self.tree(head)
        prepare([r for _, _, r in cands], before)
        prepare([r for _, _, r in cands], after)
        # every state on BASE's tree first, then on HEAD's: git's history (commit counts) moves
        # forward once per tree instead of back and forth per memory
        were = [item_state(rec, before)["state"] for _, _, rec in cands]
        out = []
        for (spec, iid, rec), was in zip(cands, were):
            now = item_state(rec, after)
            if now["state"] in STALE_STATES and now["state"] != was:
                out.append({"id": iid, "state": STALE_STATES[now["state"]], "was": was,
                            "spec": str(spec), "changed": now.get("changed") or [],
                            "moved": now.get("moved") or {}, "gone": now.get("gone") or []})
        return out


def to_markdown(report: dict) -> str:
    """The report as a pull-request comment."""
    lines = [f"### Memory changes in `{report['range']}`", ""]
    heads = (("added", "Added"), ("stale", "Made stale (their code changed)"),
             ("moved", "Moved (their code moved)"), ("gone", "Gone (their code is gone)"),
             ("superseded", "Superseded"), ("retired", "Retired"))
    for key, title in heads:
        rows = report.get(key) or []
        if not rows:
            continue
        lines.append(f"**{title}: {len(rows)}**")
        lines.append("")
        for r in rows[:50]:
            text = (r.get("text") or r["id"]).replace("\n", " ")[:160]
            extra = ""
            if r.get("moved"):
                extra = " (" + ", ".join(f"{a} → {b}" for a, b in r["moved"].items()) + ")"
            elif r.get("gone"):
                extra = " (" + ", ".join(r["gone"]) + " gone)"
            elif r.get("changed"):
                extra = " (" + ", ".join(r["changed"]) + " changed)"
            elif r.get("reason"):
                extra = f" — {r['reason']}"
            elif r.get("review"):
                extra = f" ({r['review']} review)"
            lines.append(f"- {text}{extra}")
        if len(rows) > 50:
            lines.append(f"- … and {len(rows) - 50} more")
        lines.append("")
    if len(lines) == 2:
        lines.append("_No memory was added, made stale, moved, gone, superseded or retired._")
    return "\n".join(lines).rstrip() + "\n"
