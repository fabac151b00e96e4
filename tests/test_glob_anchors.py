"""A ``.cursor/rules/*.mdc`` rule's globs become anchors (issue 36): importing a rule with
``globs: src/api/**/*.ts`` makes ``about("src/api/x.ts")`` and ``context(files=[...])`` find it,
for the files the pattern matches today and for those added later; the rule is ``gone`` once the
pattern matches nothing. A real git tree, the real import, the real anchors file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from conftest import run_cli
from graphmem import Memory
from graphmem.code import glob_anchor as ga
from test_code_freshness import commit, git

RULE = """---
description: API route conventions
globs: src/api/**/*.ts
alwaysApply: false
---

- Validate every request body with zod before touching the database.
- Never return a raw database error to the client.
"""
WEB = """---
description: Components
globs: "**/*.{tsx,jsx}"
---

- Prefer server components for pages.
"""


def tree(tmp_path: Path) -> Path:
    root = tmp_path / "app"
    files = {"src/api/users/get.ts": "export const get = 1;\n", "src/api/x.ts": "export const x = 2;\n",
             "src/web/page.tsx": "export default function Page() {}\n",
             "src/lib/db.ts": "export const db = 3;\n",
             ".cursor/rules/api.mdc": RULE, ".cursor/rules/web.mdc": WEB}
    for path, text in files.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text)
    git(root, "init", "-q")
    git(root, "config", "user.email", "t@example.invalid")
    git(root, "config", "user.name", "t")
    commit(root, "start")
    return root


def texts(rows: list[dict]) -> list[str]:
    return [r["text"] for r in rows]


def test_an_mdc_rules_globs_anchor_its_memories_to_the_files_they_match(tmp_path):
    root = tree(tmp_path)
    with Memory(None, root) as m:
        report = m.import_paths([root / ".cursor" / "rules"])
        assert report["took"] == {"gotcha": 1, "pattern": 2}, report
        about = m.about("src/api/x.ts")
        got = texts(about["current"])
        assert len(got) == 2 and all("zod" in t or "raw database error" in t for t in got), got
        assert len(texts(m.about("src/api/users/get.ts")["current"])) == 2
        assert texts(m.about("src/lib/db.ts")["current"]) == []  # outside the pattern
        web = texts(m.about("src/web/page.tsx")["current"])
        assert web == ["In `**/*.{tsx,jsx}` (Components): Prefer server components for pages."]
        state = {h.text: h.metadata["freshness"]["state"] for h in m.search("zod request", limit=5)}
        assert all(s == "current" for s in state.values()) and state

    # a file the pattern matches that was added after the import: found too
    (root / "src" / "api" / "orders").mkdir()
    (root / "src" / "api" / "orders" / "late.ts").write_text("export const late = 4;\n")
    commit(root, "a later route")
    p = run_cli("about", "src/api/orders/late.ts", "--json", "--project-dir", str(root))
    assert p.returncode == 0, p.stderr
    assert len(json.loads(p.stdout)["current"]) == 2
    with Memory(None, root) as m:
        ctx = m.context("how do we handle errors", files=["src/api/orders/late.ts"])
        assert "raw database error" in ctx

    # the pattern matches nothing any more: the rule's code is gone
    git(root, "rm", "-q", "-r", "src/api")
    commit(root, "api removed")
    with Memory(None, root) as m:
        hits = m.search("validate request body zod", limit=5, include_history=True)
        zod = next(h for h in hits if "zod" in h.text)
        assert zod.metadata["freshness"]["state"] == "gone"


def test_the_anchor_is_the_pattern_and_a_malformed_one_costs_only_itself(tmp_path):
    root = tree(tmp_path)
    with Memory(None, root) as m:
        m.import_paths([root / ".cursor" / "rules" / "api.mdc"])
        m.append_gotcha("Never import src/lib/db.ts from a component")  # an ordinary path anchor
    anchors = root / ".graphmem" / "memory" / "anchors.jsonl"
    lines = [json.loads(x) for x in anchors.read_text().splitlines()]
    flat = [a for x in lines if "set" in x for a in x["anchors"]]  # the stored anchor sets
    assert {"path": "src/api/**/*.ts", "glob": True} in flat
    assert not any(a.get("glob") and a["path"] == "src/api/x.ts" for a in flat)
    # a hand edit breaks the glob anchor: its records are left out, the others still answer
    anchors.write_text("".join(json.dumps(
        {**x, "anchors": [{**a, "glob": "yes"} if a.get("glob") else a for a in x["anchors"]]}
        if "set" in x else x) + "\n" for x in lines))
    for target, want in (("src/api/x.ts", 0), ("src/lib/db.ts", 1)):  # a fresh reader
        p = run_cli("about", target, "--json", "--project-dir", str(root))
        assert p.returncode == 0 and "Traceback" not in p.stderr, p.stderr
        assert len(json.loads(p.stdout)["current"]) == want, target


@pytest.mark.parametrize("pattern, path, hit", [
    ("src/api/**/*.ts", "src/api/x.ts", True),
    ("src/api/**/*.ts", "src/api/a/b/c.ts", True),
    ("src/api/**/*.ts", "src/apix/x.ts", False),
    ("src/api/**/*.ts", "lib/src/api/x.ts", False),
    ("*.tsx", "src/web/page.tsx", True),
    ("**/*.{ts,tsx}", "a/b.tsx", True),
    ("**/*.{ts,tsx}", "a/b.js", False),
    ("src/*.py", "src/a/b.py", False),
    ("src/api/", "src/api/deep/x.go", True),
    ("test_?.py", "tests/test_1.py", True),
    ("[ab].md", "a.md", True),
    ("[!ab].md", "a.md", False),
])
def test_cursor_globs_match_as_cursor_reads_them(pattern, path, hit):
    assert ga.matches(pattern, path) is hit


def test_a_glob_of_everything_or_of_nothing_anchors_nothing():
    from types import SimpleNamespace

    snap = SimpleNamespace(files={"src/a.ts": "b1", "src/b.py": "b2"})
    assert ga.find_globs("In `**/*` always; `*.rs` too; `src/*.ts` here", snap) == ["src/*.ts"]
    assert ga.find_globs("no backticks *.ts", snap) == []
    assert ga.find_globs("`[unclosed` and `{a,b`", snap) == []
