"""Value-update questions for the codemem bench, built from a dataset's own history (issue 34).

The dev datasets hold no ``value_update`` tasks, but pytest's history pins the plugins its
integration tests run with (``testing/plugins_integration/requirements.txt``), and a session that
changes a pin usually announces it ("Bump django from 3.1.4 to 3.1.5 in
/testing/plugins_integration (#8235)"). The questions are built once (``--build``) from the real
file at the blobs the data names (read from a mirror of the repository the dataset's NOTICE
names; nothing past the data's cutoff) and kept in ``codemem_values.jsonl`` beside this file:

- a pin change is *announced* when the session that made it names the new version in one of its
  memories (its insights); only announced pins are asked about;
- for each package, the ``PER_PACKAGE`` latest announced pins that follow an earlier announced one
  are asked right before the package's next pin change (or at the end of the data): "Which
  version of P does the project pin?";
- the current answer is the pin in the file at that point (the announced version, checked), the
  relevant session is the announcing one, and the package's earlier pins are the stale answers
  (the earlier announcing sessions labelled OVERWRITTEN), as the dataset README's
  ``value_update`` type says.

``old_first`` scores a context as the issue's "an old value before the current one": the first
line naming the package states an old version as its value (the one after "to" in "from A to B",
else its last version; a note in brackets at the end of a line, such as graphmem's "[was 2.31.0
until session 3]", is not the line's value), or no line states the current one.

    .venv/bin/python bench/_codemem_values.py --build --mirror /path/to/pytest.git
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from pathlib import Path

BUMP = re.compile(r"^(?:build\(deps\):\s*)?bump\s+(?P<pkg>[A-Za-z0-9_.-]+)(?:\[[^\]]*\])?\s+"
                  r"from\s+(?P<old>\d[\w.]*)\s+to\s+(?P<new>\d[\w.]*)", re.I)
VERSION = re.compile(r"(?<![\w.])v?\d+(?:\.\d+)+(?:[a-z]+\d*)?(?![\w])")
FROM_TO = re.compile(r"\bfrom\s+v?\d[\w.]*\s+to\s+(v?\d+(?:\.\d+)*(?:[a-z]+\d*)?)", re.I)
NOTE = re.compile(r"\s\[[^\[\]]*\]\s*$")
PER_PACKAGE = 3


FILE = "testing/plugins_integration/requirements.txt"
PIN = re.compile(r"^([A-Za-z0-9_.-]+)(?:\[[^\]]*\])?==(\S+)", re.M)
TASKS = Path(__file__).with_name("codemem_values.jsonl")


def pins_by_session(data: dict, mirror: str) -> list[dict[str, str]]:
    """The file's pins (package -> version) after each session, read from ``mirror`` (a bare
    git repository of the dataset's source) at the blobs the data names."""
    blob = data["tree0"].get(FILE)
    cache: dict[str | None, dict[str, str]] = {None: {}}
    out = []
    for s in data["sessions"]:
        changes = s.get("tree_changes") or {}
        if FILE in changes:
            blob = changes[FILE]
        if blob not in cache:
            text = subprocess.run(["git", f"--git-dir={mirror}", "cat-file", "-p", blob],
                                  capture_output=True, text=True, check=True).stdout
            cache[blob] = {m.group(1).lower(): m.group(2) for m in PIN.finditer(text)}
        out.append(cache[blob])
    return out


def _said(s: dict) -> str:
    """Every text a session's insights hold, one string."""
    return json.dumps(s.get("insights") or {}, ensure_ascii=False)


def build(data: dict, mirror: str) -> list[dict]:
    """The value-update questions of a dataset (see the module docstring), in time order."""
    sessions = data["sessions"]
    pins = pins_by_session(data, mirror)
    changes: dict[str, list[tuple[int, str]]] = {}  # package -> (session, new pin)
    before: dict[str, str] = {}
    for i, now in enumerate(pins):
        for pkg, v in now.items():
            if before.get(pkg) != v:
                changes.setdefault(pkg, []).append((i, v))
        before = now
    tasks = []
    for pkg, seq in changes.items():
        announced = [(k, i, v) for k, (i, v) in enumerate(seq)
                     if re.search(rf"(?<![\w.]){re.escape(v)}(?![\w])", _said(sessions[i]))
                     and pkg in _said(sessions[i]).lower()]
        for n in range(max(1, len(announced) - PER_PACKAGE), len(announced)):
            k, i, v = announced[n]
            after = seq[k + 1][0] - 1 if k + 1 < len(seq) else len(sessions) - 1
            if after < i or pins[after].get(pkg) != v:
                continue
            olds = list(dict.fromkeys(w for _, w in seq[:k] if w != v))
            tasks.append({
                "id": f"value-{pkg}-{k}", "type": "value_update", "after": after,
                "text": f"Which version of {pkg} does the project pin?", "package": pkg,
                "relevant": {sessions[i]["id"]: 1.0}, "files": [], "current_answer": v,
                "stale_answers": olds,
                "labels": {sessions[j]["id"]: "OVERWRITTEN" for _, j, _ in announced[:n]}})
    return sorted(tasks, key=lambda t: (t["after"], t["id"]))


def value_tasks(name: str) -> list[dict]:
    """The built questions of dataset ``name`` (none when not built)."""
    if not TASKS.exists():
        return []
    return [t for t in map(json.loads, TASKS.read_text().splitlines()) if t.get("dataset") == name]


def stated(line: str) -> str | None:
    """The version a context line states as its value (see the module docstring)."""
    line = NOTE.sub("", line)
    m = FROM_TO.search(line)
    if m:
        return m.group(1)
    found = VERSION.findall(line)
    return found[-1] if found else None


def old_first(task: dict, ctx: str) -> float:
    """1 when the context's first line naming the package states an old version (or no line
    states the current one), else 0."""
    pkg, cur = task["package"], task["current_answer"]
    named = re.compile(rf"(?<![\w-]){re.escape(pkg)}(?![\w-])")  # django, not pytest-django
    values = [stated(line) for line in ctx.splitlines() if named.search(line.lower())]
    values = [v for v in values if v]
    if cur not in values:
        return 1.0
    return float(values[0] != cur)


def main() -> int:
    ap = argparse.ArgumentParser(description="build codemem_values.jsonl from a mirror")
    ap.add_argument("--build", action="store_true")
    ap.add_argument("--mirror", required=True, help="a bare git repository of pytest-dev/pytest")
    ap.add_argument("--data", default="/work/shared/data/codemem")
    args = ap.parse_args()
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from _codemem_replay import load_dataset

    tasks = [{"dataset": "pytest", **t} for t in build(load_dataset(Path(args.data) / "pytest"),
                                                       args.mirror)]
    TASKS.write_text("".join(json.dumps(t) + "\n" for t in tasks))
    print(f"{len(tasks)} questions on {len({t['package'] for t in tasks})} packages -> {TASKS}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
