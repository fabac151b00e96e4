"""Where is it now (``code/whereabouts.py``): a search naming a function that moved between files
ranks the map entry of the file defining it now first, and marks a map entry that still lists it
for its old file ``moved``.

Real git histories built here, the real index and the bundled embedder; the CLI as a subprocess.
"""

from __future__ import annotations

from graphmem import Memory
from graphmem.code import whereabouts
from graphmem.code.code_tuning import current
from test_code_freshness import commit, project

PAY = "def stripe_refund(charge):\n    return charge\n\n\ndef stripe_charge(amount):\n    return amount\n"
LEDGER = "def post_entry(entry):\n    return entry\n"
ASK = "Where is `stripe_refund` implemented?"


def moved_history(tmp_path):
    """``stripe_refund`` written in src/pay.py, then moved to src/ledger.py; the map entry of
    src/pay.py, written again after the move, still lists it there."""
    root, spec = project(tmp_path, {"src/pay.py": PAY, "src/ledger.py": LEDGER})
    mem = Memory(spec, root)
    mem.append_gotcha("Where stripe refunds are implemented matters: src/pay.py retries them twice")
    mem.update_codebase_map({"src/pay.py": "payments: stripe_refund and stripe_charge",
                             "src/ledger.py": "the ledger: post_entry"})
    mem.save_session_insights(1, {"what_worked": [
        "stripe_refund retries twice on a timeout before giving up",
        "stripe_refund must be called with the original charge id, not the refund id"],
        "discoveries": {"files_understood": {"src/pay.py": "payments: stripe_refund and stripe_charge"}}})
    (root / "src/pay.py").write_text("def stripe_charge(amount):\n    return amount\n")
    (root / "src/ledger.py").write_text(LEDGER + "\n\ndef stripe_refund(charge):\n    return charge\n")
    commit(root, "move stripe_refund to the ledger")
    mem.save_session_insights(2, {"what_worked": ["refunds are ledger entries now"],
                                  "discoveries": {"files_understood": {
                                      "src/ledger.py": "the ledger: post_entry, refunds"}}})
    mem.update_codebase_map({"src/pay.py": "payments: stripe_refund and stripe_charge"})  # stale
    return root, spec, mem


def test_a_moved_function_ranks_its_new_file_high_and_marks_the_old_entry_moved(tmp_path):
    root, spec, mem = moved_history(tmp_path)
    with mem:
        hits = mem.search(ASK, scope="project", limit=10)
        plain = mem.search("how do refunds work", scope="project", limit=10)
    # the first hit naming the current home (the ledger's map entry, or a lesson whose files
    # are the ledger's, when it ranks first: then nothing is moved) is among the first three
    at = next(n for n, h in enumerate(hits) if "src/ledger.py" in h.text or "src/ledger.py" in
              (h.metadata.get("freshness") or {}).get("paths", ()))
    assert at <= current().promote_at, [(h.kind, h.text) for h in hits]
    # above every hit that still points to the old file unmarked (the gotcha)
    pointing = [n for n, h in enumerate(hits) if "src/pay.py" in h.text
                and h.metadata.get("freshness", {}).get("state") not in ("moved", "gone")]
    assert pointing and all(at < n for n in pointing), [(h.kind, h.text) for h in hits]
    old = next(h for h in hits if h.kind == "file" and h.metadata.get("path") == "src/pay.py")
    fresh = old.metadata["freshness"]
    assert fresh["state"] == "moved"
    assert fresh["asked_moved"] == {"stripe_refund": ["src/ledger.py"]}
    # a query naming no code: no entry marked for it
    assert not any("asked_moved" in (h.metadata.get("freshness") or {}) for h in plain)


def test_context_and_the_cli_say_where_the_function_is_now(tmp_path):
    from conftest import run_cli

    root, spec, mem = moved_history(tmp_path)
    with mem:
        ctx = mem.context(ASK, max_tokens=2000)
    line = next(x for x in ctx.splitlines() if x.startswith("- src/pay.py:"))
    assert "`stripe_refund` is now in src/ledger.py" in line, ctx
    shown = run_cli("search", ASK, "--spec-dir", str(spec), cwd=root)
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    at = next(i for i, x in enumerate(lines) if x.strip().startswith("src/pay.py:"))
    assert "`stripe_refund` is now in src/ledger.py" in "\n".join(lines[at:at + 3]), shown.stdout


def test_a_name_defined_in_more_than_three_files_or_no_name_changes_nothing(tmp_path, monkeypatch):
    files = {f"src/m{n}.py": "def helper(x):\n    return x\n" for n in range(4)}
    root, spec = project(tmp_path, {**files, "src/pay.py": PAY})
    asks = ("Where is `helper` implemented?", "where do we keep the helper code")
    with Memory(spec, root) as mem:
        mem.update_codebase_map({p: "helper" for p in files})
        mem.save_session_insights(1, {"what_worked": ["helper returns its argument unchanged",
                                                      "where the helper lives was a long debate"],
                                      "discoveries": {"files_understood": {"src/pay.py": "payments"}}})
        got = [[(h.id, h.metadata.get("freshness")) for h in mem.search(q, scope="project")]
               for q in asks]
        monkeypatch.setattr(whereabouts, "asked_homes", lambda query, snap: [])
        off = [[(h.id, h.metadata.get("freshness")) for h in mem.search(q, scope="project")]
               for q in asks]
    assert got == off


def test_the_asked_names_come_from_the_symbol_table_with_their_files(tmp_path):
    from graphmem.code.tree import snapshot

    root, _ = project(tmp_path, {"src/pay.py": PAY, "src/ledger.py": LEDGER + "\n\nclass Book:\n"
                                 "    def close(self):\n        return 1\n"})
    snap = snapshot(root, max_age=0)
    asked = whereabouts.asked_homes("Where is `Book.close` and `stripe_refund`?", snap)
    assert [(a.name, a.homes) for a in asked] == [("Book.close", ("src/ledger.py",)),
                                                 ("stripe_refund", ("src/pay.py",))]
    # three defined names: a task, not a question about where one thing is
    assert whereabouts.asked_homes("`Book.close`, `stripe_refund` and `post_entry`", snap) == []


def test_the_new_home_rises_above_the_first_unmarked_hit_naming_an_old_one():
    """Placed at ``PROMOTE_AT`` at the lowest, higher when a hit above points to a file the name
    has left; an entry already higher keeps its place."""
    from graphmem.models import Hit

    def hit(i, text, kind="insight", path=None, state="current", paths=()):
        meta = {"freshness": {"state": state, "paths": list(paths)}}
        if path:
            meta["path"] = path
        return Hit(id=i, kind=kind, text=text, score=1 - int(i[1:]) / 10, project="p", spec="s",
                   metadata=meta)

    asked = [whereabouts.Asked("refund", frozenset({"refund"}), ("src/b.py",))]
    home = hit("h9", "src/b.py: payments", kind="file", path="src/b.py")
    plain = [hit("h0", "retries"), hit("h1", "timeouts"), hit("h2", "ids"), hit("h3", "logs"), home]
    got = whereabouts.promote(plain, asked, [("p", "s")], former={"src/a.py"})
    rest = ["h0", "h1", "h2", "h3"]
    assert [h.id for h in got] == [*rest[:current().promote_at], "h9",
                                   *rest[current().promote_at:]]
    assert got[current().promote_at].score > got[current().promote_at + 1].score
    misleading = [hit("h0", "retries in src/a.py"), *plain[1:]]
    assert whereabouts.promote(misleading, asked, [("p", "s")], former={"src/a.py"})[0].id == "h9"
    by_files = [hit("h0", "retries", paths=["src/a.py"]), *plain[1:]]
    assert whereabouts.promote(by_files, asked, [("p", "s")], former={"src/a.py"})[0].id == "h9"
    marked = [hit("h0", "retries in src/a.py", state="moved"), *plain[1:]]
    assert [h.id for h in whereabouts.promote(marked, asked, [("p", "s")], former={"src/a.py"})
            ].index("h9") == current().promote_at
    twice = [*plain[:4], hit("h8", "src/b.py: older words", kind="file", path="src/b.py"), home]
    assert [h.id for h in whereabouts.promote(twice, asked, [("p", "s")])].count("h8") == 1
    assert [h.id for h in whereabouts.promote(twice, asked, [("p", "s")])].index("h9") == 5
    named = [hit("h0", "retries", paths=["src/b.py"]), *plain[1:]]  # met first already
    assert whereabouts.promote(named, asked, [("p", "s")], former={"src/a.py"}) == named
    both = [hit("h0", "renames src/a.py to src/b.py"), *plain[1:]]  # not before the old one
    assert whereabouts.promote(both, asked, [("p", "s")], former={"src/a.py"})[0].id == "h9"
    high = [home, *plain[:4]]
    assert whereabouts.promote(high, asked, [("p", "s")], former={"src/a.py"}) == high
