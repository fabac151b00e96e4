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
        'reverted in session 3: Revert "Drop the refund audit table"'
    assert partial["Rename refund helpers"] is None and partial["refund helpers read better"] is None
    assert partial["Refund cleanup (#20)"] is None
    # session 1's title was reverted: all it learned is flagged, its file's purpose is not
    for text in ("Retry refunds three times (#12)", "refund retries back off exponentially",
                 "refund retries need an idempotency key"):
        assert whole[text]["state"] == "possibly superseded"
        assert whole[text]["reason"].startswith("reverted in session 4: ")
    assert all(v is None for t, v in whole.items() if t.startswith("src/pay.py"))
    assert 'refund retries back off exponentially' in shown
    assert "possibly superseded: reverted in session 4: Revert \"Retry refunds three times" in shown
    assert again['Revert "Retry refunds three times (#12)" (#31)']["reason"].startswith(
        "reverted in session 5: ")
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
    from conftest import run_cli

    shown = run_cli("search", "How does `export_rows` work, the csv export?", "--spec-dir",
                    str(spec), cwd=root)
    lesson = "the csv export streams rows"
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    at = next(i for i, line in enumerate(lines) if line.strip() == lesson)
    assert "gone: src/feat.py:export_rows; export_rows was removed in session 3" in \
        "\n".join(lines[at:at + 3])
    assert asked[lesson]["state"] == "gone"
    assert asked[lesson]["asked_gone"] == ["src/feat.py:export_rows"]
    assert asked[lesson]["removed_in"] == {"export_rows": ["3"]}  # the session that removed it
    # the same memory for a query about code that is still there, or naming none: unmarked
    assert other[lesson]["state"] == "current" and "asked_gone" not in other[lesson]
    assert plain[lesson]["state"] == "current"
    # the session that removed it wrote neither exporter: it stays current for the query
    assert asked["the csv export is now one call"]["state"] == "current"


def test_the_cli_search_shows_why_a_hit_is_stale(tmp_path):
    from conftest import run_cli
    from test_code_freshness import commit, git

    other = "".join(f"def step{i}():\n    return {i}\n\n\n" for i in range(8))
    root, spec = project(tmp_path, {"src/pay.py": PAY, "src/other.py": other})
    with Memory(spec, root) as mem:
        mem.save_session_insights(1, {"subtasks_completed": ["Retry refunds three times"]})
        mem.save_session_insights(2, {"subtasks_completed": ['Revert "Retry refunds three times"']})
        mem.append_gotcha("refunds three times: src/pay.py holds the retry loop")
        mem.append_gotcha("refunds three times: src/other.py holds the retry steps")
    git(root, "mv", "src/pay.py", "src/billing.py")
    (root / "src/other.py").write_text("def rewritten():\n    return 0\n")
    commit(root, "rename pay, rewrite other")

    def shown(text: str) -> str:
        r = run_cli("search", "retry refunds three times", "--spec-dir", str(spec), cwd=root)
        assert r.returncode == 0, r.stderr
        lines = r.stdout.splitlines()
        at = next(i for i, line in enumerate(lines) if line.strip() == text)
        return "\n".join(lines[at:at + 3])

    assert 'possibly superseded: reverted in session 2: Revert "Retry refunds three times"' in \
        shown("Retry refunds three times")
    assert "moved: src/pay.py -> src/billing.py" in shown(
        "refunds three times: src/pay.py holds the retry loop")
    assert "changed since: src/other.py" in shown(
        "refunds three times: src/other.py holds the retry steps")


def test_the_work_records_tell_which_session_wrote_a_removed_symbol(tmp_path):
    from test_code_freshness import commit, states

    feat = "def keep():\n    return 1\n"
    root, spec = project(tmp_path, {"src/feat.py": feat})
    with Memory(spec, root) as mem:
        mem.save_session_insights(1, {"what_worked": ["first look at src/feat.py"]})
        (root / "src/feat.py").write_text(feat + "\n\ndef export_rows():\n    return 2\n")
        commit(root, "session 2 adds an exporter")
        # no discoveries: the session's files and touched symbols are unknown to its anchors
        mem.save_session_insights(2, {"what_worked": ["the csv export in src/feat.py streams rows"]})
        (root / "src/feat.py").write_text(feat)
        commit(root, "session 3 removes it")
        mem.save_session_insights(3, {"what_worked": ["the csv export in src/feat.py is one call"]})
        asked = states(mem, "How does `export_rows` work in the csv export of src/feat.py?")
    lesson = asked["the csv export in src/feat.py streams rows"]
    assert lesson["state"] == "gone" and lesson["asked_gone"] == ["src/feat.py:export_rows"]
    assert lesson["removed_in"] == {"export_rows": ["3"]}
    assert asked["the csv export in src/feat.py is one call"]["state"] == "current"
    assert asked["first look at src/feat.py"]["state"] == "current"


def test_a_memory_whose_work_wrote_files_that_are_gone_now_is_marked_gone_naming_them(tmp_path):
    """Session 2's work edits src/nose.py and src/python.py and adds testing/test_nose.py; session
    4 deletes the nose files. Session 2's lesson names src/python.py, which is still there, and
    its gotcha is written with no session: both are gone, naming the two files. Session 3's
    work (its files all still there), session 4's (the files it deleted itself do not count) and
    session 5's (its two files renamed since, their functions defined in the new ones) stay
    current."""
    from conftest import run_cli
    from test_code_freshness import commit, states

    nose = "def setup_nose():\n    return 1\n"
    py = "def collect():\n    return 2\n"
    keep = "def tidy():\n    return 3\n"
    root, spec = project(tmp_path, {"src/nose.py": nose, "src/python.py": py, "src/keep.py": keep})
    lesson, gotcha = "nose fixtures in src/python.py run once per module", \
        "nose setup must run once: src/python.py calls it"
    with Memory(spec, root) as mem:
        mem.save_session_insights(1, {"what_worked": ["first look at the nose plugin"]})
        (root / "src/nose.py").write_text(nose.replace("1", "10"))  # body edits: no symbol changes
        (root / "src/python.py").write_text(py.replace("2", "20"))
        (root / "testing").mkdir()
        (root / "testing/test_nose.py").write_text("def test_once():\n    pass\n")
        commit(root, "nose fixtures run once")
        mem.save_session_insights(2, {"what_worked": [lesson]})
        mem.append_gotcha(gotcha)
        (root / "src/python.py").write_text(py.replace("2", "30"))
        (root / "src/keep.py").write_text(keep.replace("3", "30"))
        commit(root, "tidy python")
        mem.save_session_insights(3, {"what_worked": ["nose collection in src/python.py is tidy"]})
        (root / "src/nose.py").unlink()
        (root / "testing/test_nose.py").unlink()
        commit(root, "drop nose")
        mem.save_session_insights(4, {"what_worked": ["nose support is removed from src/python.py"]})
        (root / "src/paths.py").write_text("def add_path():\n    return 4\n")
        (root / "testing/test_paths.py").write_text("def test_add_path():\n    pass\n")
        commit(root, "a pythonpath setting")
        mem.save_session_insights(5, {"what_worked": ["nose-free pythonpath setting in src/python.py"]})
        for old, new in (("src/paths.py", "src/python_path.py"),
                         ("testing/test_paths.py", "testing/test_python_path.py")):
            (root / new).write_text((root / old).read_text() + "\n\ndef extra():\n    return 5\n")
            (root / old).unlink()  # renamed with an edit: its code lives on
        commit(root, "rename the pythonpath plugin")
        mem.save_session_insights(6, {"what_worked": ["the plugin is python_path now"]})
        got = states(mem, "nose support src/python.py pythonpath setting")
    for text in (lesson, gotcha):
        assert got[text]["state"] == "gone", (text, got[text])
        assert got[text]["work_gone"]["files"] == ["src/nose.py", "testing/test_nose.py"]
        assert got[text]["work_gone"]["of"] == 3
    assert got[lesson]["work_gone"]["sessions"] == ["2"]
    assert got["nose collection in src/python.py is tidy"]["state"] == "current"
    assert got["nose support is removed from src/python.py"]["state"] == "current"
    assert got["nose-free pythonpath setting in src/python.py"]["state"] == "current"
    shown = run_cli("search", "nose fixtures run once per module", "--spec-dir", str(spec), cwd=root)
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    at = next(i for i, line in enumerate(lines) if line.strip() == lesson)
    assert "2 of the 3 files its work changed are no longer in the tree" in "\n".join(lines[at:at + 3])
    # about says what search says: the lesson names src/python.py, and its work is gone
    with Memory(spec, root) as mem:
        ans = mem.about("src/python.py")
        told = {e["text"]: e["freshness"] for e in ans["current"] + ans["gone"]}
    assert lesson in {e["text"] for e in ans["gone"]}  # under its own heading, not "Current"
    assert told[lesson]["state"] == "gone", told[lesson]
    assert told[lesson]["work_gone"]["files"] == ["src/nose.py", "testing/test_nose.py"]
    assert told["nose collection in src/python.py is tidy"]["state"] == "current"
    shown = run_cli("about", "src/python.py", "--spec-dir", str(spec), cwd=root)
    assert shown.returncode == 0, shown.stderr
    assert f"[gone (2 of the 3 files its work changed are no longer in the tree)] insight: {lesson}" \
        in shown.stdout, shown.stdout


def test_a_memory_whose_work_wrote_symbols_all_gone_and_a_file_gone_is_marked_gone(tmp_path):
    """Session 2's work adds two test functions and edits four files; later both functions are
    removed and one of the files is deleted: its lesson is gone, naming the symbols. Session 3's
    work added two functions removed since too, but none of its files is gone and its file is
    not back as it was before it: still current (either sign alone also fits memories that are
    still right)."""
    from conftest import run_cli
    from test_code_freshness import commit, states

    files = {f"src/m{i}.py": f"def f{i}():\n    return {i}\n" for i in range(4)}
    root, spec = project(tmp_path, {**files, "tests/test_a.py": "def test_base():\n    pass\n",
                                    "tests/test_b.py": "def test_other():\n    pass\n"})
    lesson, other = "nose deprecation warns in src/m1.py", "nose collection warns in src/m2.py"
    with Memory(spec, root) as mem:
        mem.save_session_insights(1, {"what_worked": ["a first look"]})
        for path, text in files.items():  # module-level edits: no symbol changed
            (root / path).write_text(text + "\n\nDEPRECATED = True\n")
        (root / "tests/test_a.py").write_text("def test_base():\n    pass\n\n\ndef test_warns_a():\n"
                                              "    pass\n\n\ndef test_warns_b():\n    pass\n")
        commit(root, "deprecate nose")
        mem.save_session_insights(2, {"what_worked": [lesson]})
        (root / "tests/test_b.py").write_text("def test_other():\n    pass\n\n\ndef test_c():\n"
                                              "    pass\n\n\ndef test_d():\n    pass\n")
        commit(root, "nose collection")
        mem.save_session_insights(3, {"what_worked": [other]})
        (root / "tests/test_a.py").write_text("def test_base():\n    pass\n")
        (root / "tests/test_b.py").write_text("def test_other():\n    pass\n\n\nOTHER = 1\n")
        (root / "src/m0.py").unlink()
        commit(root, "remove nose")
        mem.save_session_insights(4, {"what_worked": ["nose is gone"]})
        got = states(mem, "nose deprecation collection warns")
    assert got[lesson]["state"] == "gone", got[lesson]
    assert got[lesson]["work_gone"]["symbols"] == ["tests/test_a.py:test_warns_a",
                                                   "tests/test_a.py:test_warns_b"]
    assert got[lesson]["work_gone"]["files"] == ["src/m0.py"] and got[lesson]["work_gone"]["of"] == 5
    assert got[other]["state"] == "current" and "work_gone" not in got[other]
    shown = run_cli("search", "nose deprecation warns", "--spec-dir", str(spec), cwd=root)
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    at = next(i for i, line in enumerate(lines) if line.strip() == lesson)
    assert "the 2 symbols its work wrote are defined nowhere now; 1 of the 5 files its work " \
           "changed are no longer in the tree" in "\n".join(lines[at:at + 3])


def test_a_work_whose_files_were_renamed_and_edited_since_is_not_gone(tmp_path):
    """Session 2's work adds two source files that define no function (so no symbol can say
    they live on); session 3 renames both and edits them in one commit. Git's rename detection
    says where they went: session 2's lesson stays current."""
    from test_code_freshness import commit, states

    root, spec = project(tmp_path, {"src/pay.py": PAY})
    lesson = "payment limits src/pay.py reads are settings, read once at start"
    settings = "".join(f"LIMIT_{i} = {i * 100}\n" for i in range(12))
    with Memory(spec, root) as mem:
        mem.save_session_insights(1, {"what_worked": ["first look at payments"]})
        (root / "src/limits.py").write_text(settings)
        (root / "src/caps.py").write_text(settings.replace("LIMIT", "CAP"))
        commit(root, "payment limits")
        mem.save_session_insights(2, {"what_worked": [lesson]})
        (root / "src/config").mkdir()
        for old, new in (("src/limits.py", "src/config/limits.py"),
                         ("src/caps.py", "src/config/caps.py")):
            (root / new).write_text((root / old).read_text() + "EXTRA = 1\n")
            (root / old).unlink()
        commit(root, "move the settings into a package")
        mem.save_session_insights(3, {"what_worked": ["settings live in src/config now"]})
        got = states(mem, "payment limits settings read once")
    assert got[lesson]["state"] == "current", got[lesson]


def test_a_session_whose_commit_a_later_commit_reverts_is_marked_reverted_in_that_session(tmp_path):
    """``This reverts commit <sha>`` (git's body of a revert) names the session whose recorded
    work holds that commit; a sha no work holds, or none at all, marks nothing."""
    import subprocess

    from test_code_freshness import commit

    root, spec = project(tmp_path, {"src/pay.py": PAY})
    with Memory(spec, root) as mem:
        mem.save_session_insights(1, {"subtasks_completed": ["Set up the payments module"]})
        (root / "src/pay.py").write_text(PAY + "\n\ndef audit(order):\n    return order\n")
        commit(root, "Add a refund audit hook")
        sha = subprocess.run(["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True,
                             text=True, check=True).stdout.strip()
        mem.save_session_insights(2, {"subtasks_completed": ["Add a refund audit hook"],
                                      "what_worked": ["the audit hook logs every refund"]})
        subprocess.run(["git", "-C", str(root), "revert", "--no-edit", "HEAD"], check=True,
                       capture_output=True)
        mem.save_session_insights(3, {"subtasks_completed": ['Undo the audit hook'],
                                      "what_worked": [f"This reverts commit {sha}.",
                                                      "This reverts commit 0123456789abc."]})
        found = marks(mem, "refund audit hook payments module")
        shown = mem.context("refund audit hook logs every refund", max_tokens=1000)
    for text in ("Add a refund audit hook", "the audit hook logs every refund"):
        assert found[text]["state"] == "possibly superseded"
        assert found[text]["reason"] == f"reverted in session 3: This reverts commit {sha[:12]}"
    assert found["Set up the payments module"] is None
    assert f"reverted in session 3: This reverts commit {sha[:12]}" in shown


def test_a_failed_approach_is_marked_below_the_session_that_did_the_subtask(tmp_path):
    """A session of subtask S recorded as failed: once a later session of S succeeds, what the
    failed one did and tried is marked and ranks below the success; what it learned failing
    (what_failed) stays a lesson. A failed session with no later success is not marked."""
    root, spec = project(tmp_path, {"src/pay.py": PAY})
    with Memory(spec, root) as mem:
        mem.save_session_insights(1, {
            "subtask_id": "refund-cache", "success": False,
            "approach_outcome": {"approach_used": "cache refunds in a module-level dict",
                                 "status": "failed", "why_it_failed": "stale across workers"},
            "what_worked": ["caching refunds in a module dict made the tests pass"],
            "what_failed": ["a module-level refund cache goes stale across workers"]})
        mem.save_session_insights(2, {"subtask_id": "other", "success": False,
                                      "what_worked": ["caching invoices in a module dict"]})
        before = marks(mem, "cache refunds module dict workers")
        mem.save_session_insights(3, {
            "subtask_id": "refund-cache", "success": True,
            "approach_outcome": {"approach_used": "cache refunds in redis keyed by worker",
                                 "status": "completed"},
            "what_worked": ["caching refunds in redis keyed by worker"]})
        after = marks(mem, "cache refunds module dict workers")
        order = [h.text for h in mem.search("caching refunds module dict redis", scope="project")]
    assert all(v is None for v in before.values())
    tried = "caching refunds in a module dict made the tests pass"
    assert after[tried]["state"] == "possibly superseded"
    assert after[tried]["reason"] == "failed in session 1; subtask refund-cache done in session 3"
    assert after["a module-level refund cache goes stale across workers"] is None  # a lesson
    assert after["caching invoices in a module dict"] is None  # another subtask
    assert order.index(tried) > min(order.index(t) for t in order if "redis" in t)
