"""What a session did to the code (``code/changes.py``): the symbols it removed, added or moved and
the files it deleted, recorded when it writes after a commit; a query naming a removed symbol
finds the session that removed it first, and ``about`` says who removed it.

Real git repositories built here (``git`` as a subprocess), the public API, the CLI as a
subprocess; nothing about the project's code is faked.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

import anyio
from mcp import Client

from conftest import run_cli
from graphmem import Memory
from graphmem.serve.mcp_server import build_server
from test_anchor_format import replace
from test_code_freshness import commit, project

PAY = ("def refund(order):\n    return order.total\n\n\ndef charge(order):\n    return order\n\n\n"
       "class Client:\n    def void(self, n):\n        return n\n")
API = "package api\n\ntype Server struct{}\n\nfunc NewServer() *Server { return nil }\n\nfunc LegacyRoute() {}\n"
OLD = "def sync_ledger(rows):\n    return rows\n"
# older memories that use the words of the question: on the old code they rank first
TALK = ["Refunds: `refund` works by returning the order total and is used by the checkout",
        "How `refund` works: it is used by the admin panel, and it works in cents",
        "`LegacyRoute` works as the old entry point; it is used by the mobile client",
        "`sync_ledger` works nightly and is used by the accounting export"]
QUIET = "Payments are final now; the accounting export reads the bank feed directly"


def work_lines(spec: Path) -> list[dict]:
    return [json.loads(x) for x in (spec / "memory" / "anchors.jsonl").read_text().splitlines()
            if x.strip() and "work" in json.loads(x)]


def two_sessions(tmp_path: Path) -> tuple[Path, Path, str]:
    """Session 1 talks about the code; session 2 removes ``refund`` (Python), ``LegacyRoute``
    (Go) and deletes src/ledger.py, and writes memories that name none of them."""
    root, spec = project(tmp_path, {"src/pay.py": PAY, "src/api.go": API, "src/ledger.py": OLD})
    with Memory(spec, root) as mem:
        mem.save_session_insights(1, {"what_worked": TALK, "discoveries": {"files_understood": {
            "src/pay.py": "payments", "src/api.go": "the api", "src/ledger.py": "the ledger"}}})
        (root / "src/pay.py").write_text(PAY.replace("def refund(order):\n    return order.total\n\n\n", ""))
        (root / "src/api.go").write_text(API.replace("\n\nfunc LegacyRoute() {}", ""))
        (root / "src/ledger.py").unlink()
        commit(root, "payments are final")
        mem.save_session_insights(2, {"what_worked": [QUIET]})
        sid = mem.start_session(model="m", mode="agent")
        mem.record_turns(sid, [{"role": "user", "content": "make payments final"}])
        mem.record_step(sid, "Edit", "ok", {"file_path": "src/pay.py"})
        mem.end_session(sid)
    return root, spec, sid


def test_a_question_about_a_removed_symbol_finds_the_session_that_removed_it_first(tmp_path):
    """Python and Go symbols, and a deleted file's: the removing session's lesson comes first
    (on the old code it shared no word with the question and ranked below session 1's), then
    its step, each saying what was removed where and at which commit."""
    root, spec, sid = two_sessions(tmp_path)
    from test_code_freshness import git

    head = git(root, "rev-parse", "HEAD")
    with Memory(spec, root) as mem:
        for name, path in (("refund", "src/pay.py"), ("LegacyRoute", "src/api.go"),
                           ("sync_ledger", "src/ledger.py")):
            hits = mem.search(f"How does `{name}` work, and where is it used?", scope="project",
                              limit=5)
            assert [(h.kind, h.session) for h in hits[:2]] == [("insight", "2"), ("step", sid)], \
                [(h.kind, h.session, h.text) for h in hits]
            assert hits[0].text == QUIET
            assert hits[0].metadata["removed"] == {"symbol": name, "paths": [path],
                                                   "commit": head, "at": hits[0].metadata["removed"]["at"]}
        still = mem.search("How does `charge` work?", scope="project", limit=5)
    assert all("removed" not in h.metadata for h in still)  # charge is still defined


def test_the_work_line_is_readable_and_names_what_the_session_did(tmp_path):
    root, spec, sid = two_sessions(tmp_path)
    works = work_lines(spec)
    assert len(works) == 2, works  # session 2's insights, then its episodic session joining
    first, joined = works
    assert first["removed"] == {"src/api.go": ["LegacyRoute"], "src/ledger.py": ["sync_ledger"],
                                "src/pay.py": ["refund"]}
    assert first["deleted"] == ["src/ledger.py"] and first["sessions"] == ["2"]
    assert joined["sessions"] == [sid] and joined["work"] == first["work"]


def test_a_symbol_added_then_removed_is_credited_to_the_session_that_removed_it(tmp_path):
    """Session 1 adds ``retry_later``, session 2 removes it, session 3 adds it back."""
    root, spec = project(tmp_path, {"src/pay.py": PAY})
    q = "How does `retry_later` work?"
    with Memory(spec, root) as mem:
        # the HEAD graphmem saw last: before its first write it knows none, so no work
        mem.save_session_insights(9, {"what_worked": ["Payments take cards"]})
        (root / "src/pay.py").write_text(PAY + "\n\ndef retry_later(job):\n    return job\n")
        commit(root, "add retry_later")
        mem.save_session_insights(1, {"what_worked": ["`retry_later` works by queueing the job again"]})
        (root / "src/pay.py").write_text(PAY)
        commit(root, "drop retry_later")
        mem.save_session_insights(2, {"what_worked": ["Jobs are not queued again"]})
        hits = mem.search(q, scope="project", limit=3)
        assert hits[0].session == "2" and hits[0].metadata["removed"]["symbol"] == "retry_later"
        (root / "src/pay.py").write_text(PAY + "\n\ndef retry_later(job):\n    return job\n")
        commit(root, "bring retry_later back")
        mem.save_session_insights(3, {"what_worked": ["Queued jobs came back for the batch runner"]})
        again = mem.search(q, scope="project", limit=3)
    bare, added, removed, back = work_lines(spec)
    assert set(bare) == {"work", "at"}  # session 9 anchored nothing: the HEAD it saw
    assert added["added"] == {"src/pay.py": ["retry_later"]} and "removed" not in added
    assert removed["removed"] == {"src/pay.py": ["retry_later"]}
    assert back["added"] == {"src/pay.py": ["retry_later"]}
    assert all("removed" not in h.metadata for h in again)  # defined again: nothing removed


def test_about_a_removed_symbol_says_which_session_removed_it_through_cli_and_mcp(tmp_path):
    root, spec, sid = two_sessions(tmp_path)
    out = run_cli("about", "refund", "--project-dir", str(root), "--json")
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout)["removed"]
    assert [(r["symbol"], r["paths"], r["sessions"]) for r in got] == \
        [("refund", ["src/pay.py"], ["2", sid])]
    assert QUIET in [m["text"] for m in got[0]["memories"]]
    human = run_cli("about", "src/api.go:LegacyRoute", "--project-dir", str(root))
    assert human.returncode == 0, human.stderr
    assert f"Removed: LegacyRoute (src/api.go) by session 2, {sid}" in human.stdout, human.stdout
    assert QUIET in human.stdout
    kept = run_cli("about", "charge", "--project-dir", str(root), "--json")
    assert json.loads(kept.stdout)["removed"] == []

    async def main():
        async with Client(build_server(spec, root)) as c:
            res = await c.call_tool("about", {"path_or_symbol": "sync_ledger"})
            assert not res.is_error
            return res.structured_content
    ans = anyio.run(main)
    assert [(r["symbol"], r["paths"]) for r in ans["removed"]] == [("sync_ledger", ["src/ledger.py"])]


def test_garbage_work_lines_are_skipped_with_a_warning(tmp_path, caplog):
    root, spec, sid = two_sessions(tmp_path)
    path = spec / "memory" / "anchors.jsonl"
    good = path.read_text()
    bad = [{"work": 7, "removed": {"src/pay.py": ["refund"]}},
           {"work": "abc123", "removed": {"src/pay.py": "refund"}},
           {"work": "abc123", "items": [1, 2]},
           {"work": "abc123", "moved": {"src/pay.py": ["x"]}},
           {"work": "abc123", "files": "src/pay.py"}, {"work": "abc123", "files": [None]}]
    replace(path, "".join(json.dumps(b) + "\n" for b in bad) + "{not json\n" + good)
    with caplog.at_level(logging.WARNING, logger="graphmem.code"):
        with Memory(spec, root) as mem:
            hits = mem.search("How does `refund` work?", scope="project", limit=3)
    assert hits[0].text == QUIET
    warned = [r.getMessage() for r in caplog.records if "malformed work line" in r.getMessage()]
    assert len(warned) == len(bad), caplog.text


def test_reindex_derives_the_work_of_a_file_written_before_work_lines(tmp_path):
    """An anchors file from before this format (no work lines) gets them from its records'
    HEADs on ``reindex``; compaction keeps them."""
    root, spec, sid = two_sessions(tmp_path)
    path = spec / "memory" / "anchors.jsonl"
    replace(path, "".join(x + "\n" for x in path.read_text().splitlines() if '"work"' not in x))
    from graphmem.code.anchor_file import compact
    with Memory(spec, root) as mem:
        assert all("removed" not in h.metadata
                   for h in mem.search("How does `refund` work?", scope="project", limit=3))
        mem.reindex()
        compact(spec)
        hits = mem.search("How does `refund` work?", scope="project", limit=3)
    assert hits[0].metadata["removed"]["symbol"] == "refund"
    assert hits[0].session in ("2", sid), [(h.session, h.text) for h in hits]
    (derived,) = work_lines(spec)
    assert derived["removed"]["src/pay.py"] == ["refund"] and derived["deleted"] == ["src/ledger.py"]


def test_the_sessions_that_wrote_a_symbol_the_query_names_join_its_answer(tmp_path):
    """``settle_batch`` is defined now; the session that added it wrote a lesson sharing no word
    with the question and naming no code: it joins the top 3 (on the old code: nowhere)."""
    root, spec = project(tmp_path, {"src/pay.py": PAY})
    with Memory(spec, root) as mem:
        mem.save_session_insights(1, {"what_worked": ["Payments take cards"]})
        (root / "src/pay.py").write_text(PAY + "\n\ndef settle_batch(rows):\n    return rows\n")
        commit(root, "nightly settlement")
        mem.save_session_insights(2, {"what_worked": ["Nightly job wired into the payment runner"]})
        for n, text in enumerate(["Where the checkout is implemented: src/pay.py, see `charge`",
                                  "The implemented refund rules live in src/pay.py",
                                  "Implemented `Client.void` for the admin panel",
                                  "Where it is implemented matters less than the tests"], start=3):
            mem.save_session_insights(n, {"what_worked": [text]})
        hits = mem.search("Where is `settle_batch` implemented?", scope="project", limit=3)
    assert "2" in [h.session for h in hits], [(h.session, h.text) for h in hits]


def test_context_about_a_removed_symbol_shows_the_removing_session(tmp_path):
    """The removing session's lesson is in the context; session 1's lessons on the removed code
    are left out as gone."""
    root, spec, sid = two_sessions(tmp_path)
    with Memory(spec, root) as mem:
        ctx = mem.context("How does `refund` work, and where is it used?", max_tokens=2000)
    assert QUIET in ctx, ctx
    assert "left out: the code they describe is gone" in ctx  # session 1's lessons on refund
    assert TALK[0] not in ctx


def test_a_removed_method_is_found_by_its_own_name_when_no_class_still_has_it(tmp_path):
    root, spec = project(tmp_path, {"src/pay.py": PAY})
    with Memory(spec, root) as mem:
        mem.save_session_insights(1, {"what_worked": ["Payments take cards"]})
        (root / "src/pay.py").write_text(PAY.replace("    def void(self, n):\n        return n\n",
                                                     "    def settle(self, n):\n        return n\n"))
        commit(root, "void is gone")
        mem.save_session_insights(2, {"what_worked": ["Cancelled payments settle at zero"]})
        own = mem.search("What does `void` do?", scope="project", limit=3)
        full = mem.search("What does `Client.void` do?", scope="project", limit=3)
    assert own[0].metadata["removed"]["symbol"] == "Client.void" and own[0].session == "2"
    assert full[0].metadata["removed"]["symbol"] == "Client.void"
    about = run_cli("about", "void", "--project-dir", str(root), "--json")
    assert [r["symbol"] for r in json.loads(about.stdout)["removed"]] == ["Client.void"]
