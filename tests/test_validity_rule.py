"""The no-LLM supersession rule ("reads the same except for its numbers") reads numbers that
are values (a version, a limit), not the digits that end a name: a note about `step1` in
src/part1.py is not replaced by one about `step2` in src/part2.py."""

from __future__ import annotations

import json

import pytest
from conftest import run_cli
from graphmem import Memory
from test_code_freshness import project


@pytest.mark.parametrize("a, b", [(1, 2), (12, 13)])  # 12 / 13: the name's last digits alone
def test_notes_on_numbered_names_are_not_flagged_but_a_new_value_is(tmp_path, a, b):
    root, spec = project(tmp_path, {f"src/part{n}.py": f"def step{n}(x):\n    return x\n"
                                    for n in (a, b)})
    with Memory(spec, root) as mem:
        mem.append_gotcha(f"`step{a}` in src/part{a}.py must stay pure")
        mem.append_gotcha(f"`step{b}` in src/part{b}.py must stay pure")
        mem.append_gotcha("Pin pytest to v7.4 in the CI image")
        mem.append_gotcha("Pin pytest to v8.2 in the CI image")
        marks = {h.text: (h.metadata.get("validity") or {}).get("state")
                 for h in mem.search("must stay pure; pin pytest", limit=10)}
    assert marks[f"`step{a}` in src/part{a}.py must stay pure"] is None
    assert marks[f"`step{b}` in src/part{b}.py must stay pure"] is None
    assert marks["Pin pytest to v7.4 in the CI image"] == "possibly superseded"
    assert marks["Pin pytest to v8.2 in the CI image"] is None
    cli = run_cli("search", "must stay pure", "--project-dir", str(root), "--json")
    assert cli.returncode == 0, cli.stderr
    assert all(not h["metadata"].get("validity") for h in json.loads(cli.stdout)
               if "stay pure" in h["text"])
