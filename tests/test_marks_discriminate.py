"""Marks that mean something (issue 34, items 2 and 3): a memory is marked stale when what it
says no longer holds (its own lines rewritten, half or more of the code it names gone, its
work undone in the tree), not because a file it or its session touched changed elsewhere since;
"changed since" stays as information. Real git repositories and the public API."""

from __future__ import annotations

from conftest import run_cli
from graphmem import Memory
from test_code_freshness import PAY, commit, git, project, states

MORE = "\n\ndef audit(order):\n    return order\n\n\ndef ledger():\n    return []\n"


def test_a_file_changed_elsewhere_is_said_not_marked_and_its_own_lines_rewritten_are(tmp_path):
    """Session 1 studied src/pay.py; later commits rewrite most of the file but for `refund`'s
    own lines, then rewrite `refund`. Its lesson naming no code stays current (the file is in
    ``changed_since``); a gotcha about `refund` is marked only once refund's lines change."""
    root, spec = project(tmp_path, {"src/pay.py": PAY + MORE})
    lesson, gotcha = "payments: keep refunds idempotent", "refund rounding: `refund` rounds half up"
    with Memory(spec, root) as mem:
        mem.save_session_insights(1, {"what_worked": [lesson],
                                      "discoveries": {"files_understood": {"src/pay.py": "refunds"}}})
        mem.append_gotcha(gotcha)
        # most of the file is new (its other functions replaced), refund's own lines are kept
        (root / "src/pay.py").write_text("def refund(order):\n    return order.total\n\n\n"
                                         "def settle(a):\n    return a\n\n\nLIMIT = 3\n")
        commit(root, "replace the ledger helpers")
        first = states(mem, "payments refunds idempotent refund rounding")
        (root / "src/pay.py").write_text("def refund(order):\n    return round(order.total)\n\n\n"
                                         "def settle(a):\n    return a\n\n\nLIMIT = 3\n")
        commit(root, "round refunds")
        second = states(mem, "payments refunds idempotent refund rounding")
        ctx = mem.context("payments: keep refunds idempotent", max_tokens=1000)
    assert first[lesson]["state"] == "current", first[lesson]
    assert first[lesson]["changed_since"] == ["src/pay.py"]
    assert first[gotcha]["state"] == "current" and first[gotcha]["changed_since"] == ["src/pay.py"]
    assert second[lesson]["state"] == "current", second[lesson]
    assert second[gotcha]["state"] == "changed" and second[gotcha]["symbols_changed"] == ["refund"]
    assert "src/pay.py changed since this was learned" in ctx  # the information is still given


def test_a_renamed_file_of_its_session_does_not_mark_a_lesson_naming_no_code(tmp_path):
    """The session's file is renamed: the lesson (naming no file) stays current and shows the
    new path; a gotcha naming the old path is marked moved, its text read with the new one."""
    root, spec = project(tmp_path, {"src/pay.py": PAY})
    lesson, gotcha = "refunds must stay idempotent", "src/pay.py keeps charges beside refunds"
    with Memory(spec, root) as mem:
        mem.save_session_insights(1, {"what_worked": [lesson],
                                      "discoveries": {"files_understood": {"src/pay.py": "refunds"}}})
        mem.append_gotcha(gotcha)
        (root / "src/billing").mkdir()
        git(root, "mv", "src/pay.py", "src/billing/pay.py")
        commit(root, "move payments into a package")
        got = states(mem, "refunds idempotent charges beside refunds")
    assert got[lesson]["state"] == "current", got[lesson]
    assert got[lesson]["paths"] == ["src/billing/pay.py"]
    assert got[gotcha]["state"] == "moved" and got[gotcha]["moved"] == {
        "src/pay.py": "src/billing/pay.py"}


def test_a_session_whose_change_was_undone_in_the_tree_is_marked_reverted_below_the_fix(tmp_path):
    """Session 2 adds `audit` to src/pay.py and a new module; session 3 restores src/pay.py to
    its content before and deletes the module, with no "This reverts commit" anywhere. Session
    2's memories are marked "reverted in session 3" and ranked below session 3's; session 1's
    and a session whose edit was later built on stay unmarked."""
    root, spec = project(tmp_path, {"src/pay.py": PAY, "src/keep.py": "def tidy():\n    return 1\n"})
    done = "refund audit hook in src/pay.py logs every refund"
    fix = "refund audit hook removed: logs every refund twice"
    with Memory(spec, root) as mem:
        mem.save_session_insights(1, {"what_worked": ["refund flow studied"]})
        (root / "src/pay.py").write_text(PAY + "\n\ndef audit(order):\n    return order\n")
        (root / "src/audit_log.py").write_text("def write_line(x):\n    return x\n")
        (root / "src/keep.py").write_text("def tidy():\n    return 2\n")
        commit(root, "audit refunds")
        mem.save_session_insights(2, {"what_worked": [done]})
        (root / "src/keep.py").write_text("def tidy():\n    return 3\n")
        commit(root, "tidy again")  # session 2's edit of keep.py is built on, not restored
        mem.save_session_insights(3, {"what_worked": ["tidy returns three"]})
        before = states(mem, "refund audit hook logs every refund")
        (root / "src/pay.py").write_text(PAY)  # back as it was before session 2: no revert message
        (root / "src/audit_log.py").unlink()
        (root / "src/keep.py").write_text("def tidy():\n    return 1\n")
        commit(root, "simplify refunds")
        mem.save_session_insights(4, {"what_worked": [fix]})
        hits = mem.search("refund audit hook logs every refund", scope="project", limit=20)
        cli = run_cli("search", "refund audit hook logs every refund", "--spec-dir", str(spec),
                      cwd=root)
        told = run_cli("about", "src/pay.py", "--spec-dir", str(spec), cwd=root)
    assert before[done]["state"] == "current", before[done]  # not undone while keep.py differs
    got = {h.text: h.metadata.get("freshness") for h in hits}
    assert got[done]["state"] == "gone", got[done]
    assert got[done]["undone"]["sessions"] == ["4"]
    assert got[done]["undone"]["files"] == ["src/audit_log.py", "src/keep.py", "src/pay.py"]
    assert all("undone" not in (got[t] or {}) for t in ("refund flow studied", fix))
    order = [h.text for h in hits]
    assert order.index(fix) < order.index(done)
    assert cli.returncode == 0, cli.stderr
    lines = cli.stdout.splitlines()
    at = next(i for i, line in enumerate(lines) if line.strip() == done)
    assert "reverted in session 4 (its change is undone in the tree)" in "\n".join(lines[at:at + 3])
    assert told.returncode == 0, told.stderr
    assert f"[gone (reverted in session 4 (its change is undone in the tree))] insight: {done}" \
        in told.stdout, told.stdout


def test_a_work_only_partly_restored_or_redone_is_not_undone(tmp_path):
    """A later commit restoring one of the two files a work changed, or restoring a file and a
    later one doing the change again, leaves the work's memories unmarked."""
    root, spec = project(tmp_path, {"src/pay.py": PAY, "src/keep.py": "def tidy():\n    return 1\n"})
    done = "refund audit hook in src/pay.py logs every refund"
    with Memory(spec, root) as mem:
        mem.save_session_insights(1, {"what_worked": ["refund flow studied"]})
        (root / "src/pay.py").write_text(PAY + "\n\ndef audit(order):\n    return order\n")
        (root / "src/keep.py").write_text("def tidy():\n    return 2\n")
        commit(root, "audit refunds")
        mem.save_session_insights(2, {"what_worked": [done]})
        (root / "src/pay.py").write_text(PAY)
        commit(root, "drop audit")
        mem.save_session_insights(3, {"what_worked": ["audit dropped"]})
        partly = states(mem, "refund audit hook logs every refund")[done]
        (root / "src/keep.py").write_text("def tidy():\n    return 1\n")
        commit(root, "tidy back")
        mem.save_session_insights(4, {"what_worked": ["tidy back to one"]})
        undone = states(mem, "refund audit hook logs every refund")[done]
        (root / "src/pay.py").write_text(PAY + "\n\ndef audit(order):\n    return order\n")
        commit(root, "audit again")
        mem.save_session_insights(5, {"what_worked": ["audit is back"]})
        redone = states(mem, "refund audit hook logs every refund")[done]
    assert "undone" not in partly and partly["state"] == "current", partly
    assert undone["state"] == "gone" and undone["undone"]["sessions"] == ["4"], undone
    assert "undone" not in redone, redone


def test_a_work_line_with_a_malformed_was_is_skipped_and_costs_nothing_else(tmp_path):
    """``was`` must map paths to blob ids or null: a work line with another shape is skipped
    (its memories get no undone mark), the others still read."""
    from graphmem.code.changes import Works, valid

    good = {"work": "a" * 40, "files": ["src/pay.py"], "was": {"src/pay.py": "b" * 40}}
    assert valid(good) and valid({**good, "was": {"src/new.py": None}})
    for bad in ({"src/pay.py": 3}, ["src/pay.py"], {"src/pay.py": ["x"]}, "src/pay.py"):
        assert not valid({**good, "was": bad}), bad
    works = Works()
    assert not works.take({**good, "was": {"src/pay.py": 3}}) and works.take(good)
    assert works.by_head["a" * 40]["was"] == {"src/pay.py": "b" * 40}


def test_a_class_whose_method_changed_is_not_marked_the_method_is(tmp_path):
    """A class's lines hold its methods: `Client.charge` rewritten leaves a memory about
    `Client` current (``members_changed``), marks one about `Client.charge` changed."""
    root, spec = project(tmp_path, {"src/pay.py": PAY})
    about_class, about_method = "`Client` wraps the payment gateway", "`Client.charge` takes cents"
    with Memory(spec, root) as mem:
        mem.append_gotcha(about_class)
        mem.append_gotcha(about_method)
        (root / "src/pay.py").write_text(PAY.replace("return n", "return n * 100"))
        commit(root, "charge in cents")
        got = states(mem, "Client payment gateway charge cents")
    assert got[about_class]["state"] == "current" and got[about_class]["changed_since"] == [
        "src/pay.py"], got[about_class]
    assert got[about_method]["state"] == "changed"
    assert got[about_method]["symbols_changed"] == ["Client.charge"]
