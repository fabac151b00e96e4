"""One malformed line in a spec's ``anchors.jsonl`` or ``validity.jsonl`` costs only itself:
search, context, about and reindex of every spec of the project go on, and ``graphmem doctor``
lists the line (issue 35 finding 5). These files get merged, hand-edited and committed."""

from __future__ import annotations

import json

import pytest

from graphmem import Memory
from graphmem.code.anchors import anchors_file
from graphmem.files.validity_log import validity_file
from test_code_freshness import PAY, project

from conftest import run_cli

DEEP = '{"items": ["abc"], "anchors": ' + "[" * 200_000 + "]" * 200_000 + "}"

# Valid JSON with the wrong types, and a line too deeply nested to parse (RecursionError).
# ``{id}`` is a real item's id: a line must bite the items a user searches for.
ANCHOR_LINES = [
    '{"items": ["abc"], "anchors": {"a": 1}}',
    '{"items": ["{id}"], "anchors": {"a": 1}}',
    '{"items": ["{id}"], "anchors": [{"path": "src/pay.py", "symbol": ["refund"]}]}',
    '{"items": ["{id}"], "anchors": [{"path": "src/pay.py", "blob": ["x"], "lines": "1-3"}]}',
    '{"items": ["{id}"], "anchors": [{"path": "src/pay.py", "digest": {"d": 1}}], "at": 7}',
    '{"items": ["{id}"], "anchors": [{"path": "src/pay.py", "symbol": "refund", "lines": [1, "x"]}]}',
    '{"set": "aaaaaaaaaaaa", "anchors": [{"path": "src/pay.py", "symbol": {"n": 1}}]}\n'
    '{"items": ["{id}"], "anchors": "aaaaaaaaaaaa", "head": ["h"], "session": 5}',
    '{"items": ["{id}"], "anchors": [], "session_files": ["a"]}',
    '{"items": ["{id}"], "anchors": [{"path": "src/pay.py", "via": ["session"], "touched": "yes"}]}',
    DEEP,
]
VALIDITY_LINES = [
    '{"item": "{id}", "state": "possibly superseded", "by": ["abc"]}',
    '{"item": "{id}", "state": "retired", "by": {"a": 1}, "reason": ["r"], "invalid_at": 5}',
    '{"item": "{id}", "state": "superseded", "by": "{id}", "recorded_at": {"t": 1}}',
    '{"item": "{id}", "state": "retired", "reason": {"x": 1}}',
    '{"item": "{id}", "state": "possibly superseded", "by": 5, "reason": 3}',
    DEEP.replace('"items"', '"item"'),
]


def _two_specs(tmp_path):
    root, spec = project(tmp_path, {"src/pay.py": PAY})
    other = root / "specs" / "002"
    other.mkdir()
    for s, n in ((spec, 1), (other, 2)):
        with Memory(s, root) as m:
            m.append_gotcha(f"`refund` in src/pay.py rounds cents down, spec {n}")
            m.save_session_insights(1, {"what_worked": [f"`refund` keeps cents, spec {n}"]})
    with Memory(spec, root) as m:
        ids = [h.id for h in m.search("refund cents", limit=5)]
    return root, spec, other, ids[0]


def _works(root, spec, other) -> None:
    for s in (spec, other):
        with Memory(s, root) as m:
            assert m.search("refund cents", scope="project", limit=10), s
            assert m.search("refund cents", include_history=True, limit=10), s
            assert "refund" in m.context("fix the refund rounding", files=["src/pay.py"])
            about = m.about("src/pay.py")
            assert about["current"], about
            assert m.about("refund") is not None
            assert m.reindex()


def _doctor_names(spec, name: str) -> list[dict]:
    res = run_cli("doctor", "--spec-dir", str(spec), "--json")
    assert res.returncode in (0, 1), res.stderr[-2000:]
    rows = [r for rows in json.loads(res.stdout)["sections"].values() for r in rows]
    return [r for r in rows if name in json.dumps(r)]


@pytest.mark.parametrize("line", ANCHOR_LINES, ids=range(len(ANCHOR_LINES)))
def test_a_bad_anchor_line_costs_only_itself(tmp_path, line):
    root, spec, other, item = _two_specs(tmp_path)
    with anchors_file(spec).open("a") as f:
        f.write(line.replace("{id}", item) + "\n")
    _works(root, spec, other)


@pytest.mark.parametrize("line", VALIDITY_LINES, ids=range(len(VALIDITY_LINES)))
def test_a_bad_validity_line_costs_only_itself(tmp_path, line):
    root, spec, other, item = _two_specs(tmp_path)
    with validity_file(spec).open("a") as f:
        f.write(line.replace("{id}", item) + "\n")
    _works(root, spec, other)


def test_doctor_lists_the_bad_lines(tmp_path):
    root, spec, other, item = _two_specs(tmp_path)
    with anchors_file(spec).open("a") as f:
        f.write(ANCHOR_LINES[2].replace("{id}", item) + "\n" + DEEP + "\n")
    with validity_file(spec).open("a") as f:
        f.write(VALIDITY_LINES[0].replace("{id}", item) + "\n")
    rows = _doctor_names(spec, "anchors.jsonl")
    assert rows and rows[0]["status"] != "ok", rows
    assert "2" in rows[0]["detail"] and "line" in rows[0]["detail"], rows
    rows = _doctor_names(spec, "validity.jsonl")
    assert rows and rows[0]["status"] != "ok", rows
    assert not _doctor_names(other, "anchors.jsonl") or \
        all(r["status"] == "ok" for r in _doctor_names(other, "anchors.jsonl"))
