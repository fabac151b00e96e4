"""Marks a user can trust on stale memories: a reverted session's memories are flagged "possibly
superseded" with the reverting session named. Real git repositories, the public API, the
validity log in the files."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from graphmem import Memory
from graphmem.errors import ValidationError
from test_code_freshness import PAY, project


def events(spec: Path) -> list[dict]:
    path = spec / "memory" / "validity.jsonl"
    return [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []


def marks(mem: Memory, query: str) -> dict[str, dict | None]:
    return {h.text: h.metadata.get("validity") for h in mem.search(query, scope="project", limit=20)}


def test_a_revert_chain_marks_the_reverted_work_possibly_superseded_naming_the_session(tmp_path):
    root, spec = project(tmp_path, {"src/pay.py": PAY})
    with Memory(spec, root) as mem:
        mem.save_session_insights(1, {  # a one-change session: its title is reverted later
            "subtasks_completed": ["Retry refunds three times (#12)"],
            "what_worked": ["refund retries back off exponentially"],
            "discoveries": {"files_understood": {"src/pay.py": "refunds"},
                            "gotchas_encountered": ["refund retries need an idempotency key"]}})
        mem.save_session_insights(2, {  # a pull request of several commits: one is reverted
            "subtasks_completed": ["Refund cleanup (#20)", "Drop the refund audit table",
                                   "Rename refund helpers"],
            "what_worked": ["refund helpers read better"]})
        mem.save_session_insights(3, {"subtasks_completed": ['Revert "Drop the refund audit table"']})
        partial = marks(mem, "refund audit table helpers cleanup")
        mem.save_session_insights(4, {"subtasks_completed": ['Revert "Retry refunds three times (#12)" (#31)']})
        whole = marks(mem, "refund retries three times back off")
        shown = mem.context("refund retries three times back off", max_tokens=2000)
        mem.save_session_insights(5, {  # the revert is reverted: the retries are back
            "subtasks_completed": ['Revert "Revert "Retry refunds three times (#12)" (#31)"']})
        again = marks(mem, "revert retry refunds three times")
        mem.save_session_insights(4, {"subtasks_completed": ['Revert "Retry refunds three times (#12)" (#31)']})
        log = events(spec)
    # only the reverted commit of session 2, naming who reverted it
    assert partial["Drop the refund audit table"]["state"] == "possibly superseded"
    assert partial["Drop the refund audit table"]["reason"] == \
        'reverted by session 3: Revert "Drop the refund audit table"'
    assert partial["Rename refund helpers"] is None and partial["refund helpers read better"] is None
    assert partial["Refund cleanup (#20)"] is None
    # session 1's title was reverted: all it learned is flagged, its file's purpose is not
    for text in ("Retry refunds three times (#12)", "refund retries back off exponentially",
                 "refund retries need an idempotency key"):
        assert whole[text]["state"] == "possibly superseded"
        assert whole[text]["reason"].startswith("reverted by session 4: ")
    assert all(v is None for t, v in whole.items() if t.startswith("src/pay.py"))
    assert 'refund retries back off exponentially' in shown
    assert "possibly superseded: reverted by session 4: Revert \"Retry refunds three times" in shown
    assert again['Revert "Retry refunds three times (#12)" (#31)']["reason"].startswith(
        "reverted by session 5: ")
    # each memory is flagged once, even when the reverting session is saved again
    assert len(log) == len({e["item"] for e in log}) == 5
    assert {e["state"] for e in log} == {"possibly superseded"}


def test_a_revert_naming_no_earlier_session_and_garbage_lines_change_nothing(tmp_path):
    root, spec = project(tmp_path, {"src/pay.py": PAY})
    with Memory(spec, root) as mem:
        mem.save_session_insights(2, {"subtasks_completed": ["Add refunds"]})
        mem.save_session_insights(3, {"subtasks_completed": [
            'Revert "Something nobody did"', 'Revert ""', 'Revert "', "Revert Add refunds",
            'revert "Add refunds" because', 'Revert "' + "x" * 5000 + '"', "\u202e\u0000"[:1]]})
        mem.save_session_insights(1, {"subtasks_completed": ['Revert "Add refunds"']})  # older
        with pytest.raises(ValidationError) as err:
            mem.save_session_insights(4, {"subtasks_completed": [{"Revert": "Add refunds"}]})
        assert err.value.field.startswith("insights")
        assert marks(mem, "add refunds")["Add refunds"] is None
    assert events(spec) == []


def test_a_session_that_wrote_a_removed_symbol_is_gone_for_a_query_asking_about_it(tmp_path):
    from test_code_freshness import commit, states

    feat = "def keep():\n    return 1\n"
    root, spec = project(tmp_path, {"src/feat.py": feat})
    with Memory(spec, root) as mem:
        mem.save_session_insights(1, {"what_worked": ["first look at the feature module"],
                                      "discoveries": {"files_understood": {"src/feat.py": "feature"}}})
        (root / "src/feat.py").write_text(feat + "\n\ndef export_rows():\n    return 2\n\n\n"
                                                 "def export_header():\n    return 3\n")
        commit(root, "session 2 adds two exporters")
        mem.save_session_insights(2, {"what_worked": ["the csv export streams rows"],
                                      "discoveries": {"files_understood": {"src/feat.py": "feature"}}})
        (root / "src/feat.py").write_text(feat + "\n\ndef export_header():\n    return 3\n")
        commit(root, "session 3 removes export_rows")
        mem.save_session_insights(3, {"what_worked": ["the csv export is now one call"],
                                      "discoveries": {"files_understood": {"src/feat.py": "feature"}}})
        asked = states(mem, "How does `export_rows` work, the csv export, and where is it used?")
        other = states(mem, "How does `export_header` work, the csv export, and where is it used?")
        plain = states(mem, "how does the csv export work")
    lesson = "the csv export streams rows"
    assert asked[lesson]["state"] == "gone"
    assert asked[lesson]["asked_gone"] == ["src/feat.py:export_rows"]
    # the same memory for a query about code that is still there, or naming none: unmarked
    assert other[lesson]["state"] == "current" and "asked_gone" not in other[lesson]
    assert plain[lesson]["state"] == "current"
    # the session that removed it wrote neither exporter: it stays current for the query
    assert asked["the csv export is now one call"]["state"] == "current"
