"""Renames reach the graph from ``anchors refresh`` (what the git hooks run): every rename git
sees of an anchored file since the last refresh becomes a RENAMED_TO edge, also when the memory
names only a symbol of the file or the file was edited as it moved. Embedded FalkorDB."""

from __future__ import annotations

import json

from graphmem import Memory
from test_code_about import cypher
from test_code_freshness import PAY, commit, git, project

RENAMES = ("MATCH (a:File)-[e:RELATES_TO]->(b:File) WHERE e.name = 'RENAMED_TO' "
           "RETURN a.gm_path, b.gm_path, e.valid_at ORDER BY e.valid_at, a.gm_path")


def test_refresh_sends_the_renames_git_saw_since_the_last_one(tmp_path, graph_on):
    root, spec = project(tmp_path, {"src/pay.py": PAY, "docs/notes.md": "notes\n"})
    with Memory(spec, root) as mem:
        mem.append_gotcha("`refund` must round half up")  # names a symbol of src/pay.py only
        rid = mem.search("refund round", limit=1)[0].id
        first = mem.refresh_anchors()
    head = git(root, "rev-parse", "HEAD")
    assert first["renamed"] == 0
    assert json.loads((spec / "memory" / "anchor_states.json").read_text())["renames_head"] == head
    (root / "src/billing").mkdir()
    git(root, "mv", "src/pay.py", "src/billing/pay.py")
    commit(root, "move pay.py")
    git(root, "mv", "src/billing/pay.py", "src/billing/payments.py")
    (root / "src/billing/payments.py").write_text(PAY + "\n\ndef audit():\n    return None\n")
    git(root, "mv", "docs/notes.md", "docs/readme.md")  # no memory names it: not sent
    commit(root, "rename and edit")
    times = git(root, "log", "--format=%cI", "-2").splitlines()[::-1]
    with Memory(None, root) as mem:
        second = mem.refresh_anchors()
        again = mem.refresh_anchors()  # nothing new since: nothing sent twice
        about = mem.about("src/billing/payments.py")
    assert second["renamed"] == 2 and again["renamed"] == 0
    assert sorted(map(tuple, cypher(root, RENAMES))) == sorted([
        ("src/pay.py", "src/billing/pay.py", times[0]),
        ("src/billing/pay.py", "src/billing/payments.py", times[1])])
    # the edited file's new name leads to the memory through git's renames
    assert about["source"] == "graph" and [e["id"] for e in about["current"]] == [rid]
