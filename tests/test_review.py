"""Review (issue 36): with ``GRAPHMEM_REVIEW=hold`` what the agent hooks digest and what an LLM
judges wait for a person. Real hooks run as Claude Code runs them, the CLI as a subprocess, real
files and index; the LLM behind a loopback server in OpenAI's documented shape. After every step
a ``reindex`` must give the same answers (the log is the truth, the index derived)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from conftest import run_cli
from graphmem import Memory
from graphmem.errors import ValidationError
from test_agent_hooks import context, digested, fire, install, proj, session, warm  # noqa: F401
from test_code_freshness import PAY, commit, git, project
from test_consolidate import FakeOpenAI

KEY = "sk-test-review-0000000000000000"


def cli(*args: str, env: dict | None = None) -> dict | list:
    out = run_cli(*args, "--json", env=env)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def found(root: Path, query: str, *extra: str) -> list[str]:
    """The ids ``graphmem search`` returns."""
    return [h["id"] for h in cli("search", query, "--project-dir", str(root), "--limit", "20",
                                 *extra)]


def same_after_reindex(root: Path, queries: list[str]) -> dict[str, list[str]]:
    """The search answers, checked to be the same after ``graphmem reindex``."""
    before = {q: found(root, q) for q in queries}
    out = run_cli("reindex", "--project-dir", str(root))
    assert out.returncode == 0, out.stderr
    assert {q: found(root, q) for q in queries} == before
    return before


def log_lines(spec: Path) -> list[dict]:
    return [json.loads(x) for x in (spec / "memory" / "validity.jsonl").read_text().splitlines()]


def repo(tmp_path: Path) -> Path:
    root = tmp_path / "shop"
    (root / "src").mkdir(parents=True)
    (root / "src" / "pay.py").write_text(PAY)
    git(root, "init", "-q")
    git(root, "config", "user.email", "ana@example.invalid")
    git(root, "config", "user.name", "ana")
    commit(root, "start")
    return root


NOTES = {"a": "The zebra importer drops rows whose quantity is blank",
         "b": "The zebra importer must run after the currency table loads",
         "c": "The zebra importer reads CSV files in latin-1"}


def held(root: Path) -> dict[str, str]:
    """Three insights written held, as the hooks write them -> key -> id."""
    with Memory(None, root) as mem:
        mem.save_session_insights(1, {"discoveries": {"gotchas_encountered": list(NOTES.values())}},
                                  hold=True)
        ids = {x["text"]: x["id"] for x in mem.review_pending()["pending"]}
    return {k: ids[t] for k, t in NOTES.items()}


# ---- the hooks' memories held -------------------------------------------------------------------
def test_a_held_hook_session_stays_out_of_search_and_briefing_until_accepted(proj, warm):
    install(proj)
    pay = str(proj / "src" / "pay.py")
    hold = {"GRAPHMEM_REVIEW": "hold"}
    session(proj, "s-held", "Make refund() round half-even in the payments module", [
        ("Edit", {"file_path": pay, "old_string": "a", "new_string": "b"}, None),
        ("Bash", {"command": "pytest tests/test_pay.py"}, "Exit code 1"),
        ("Bash", {"command": "pytest tests/test_pay.py -p no:randomly"}, None)], env=hold)
    digested(proj, "s-held")
    waiting = cli("review", "--project-dir", str(proj))
    kinds = {x["kind"] for x in waiting["pending"]}
    assert {"gotcha", "file", "insight"} <= kinds, waiting
    assert all(x["who"] == "agent-hooks" for x in waiting["pending"])
    pending = {x["id"] for x in waiting["pending"]}
    gotcha = next(x for x in waiting["pending"] if x["kind"] == "gotcha")
    assert "`pytest tests/test_pay.py` failed" in gotcha["text"]
    queries = ["pytest tests/test_pay.py failed", "round half-even refund payments"]
    # hidden from search, context and the briefing; shown, marked, with --include-history
    for q in queries:
        assert not pending & set(found(proj, q))
    told = run_cli("search", queries[0], "--project-dir", str(proj))
    assert "left out: retired or superseded, or not accepted in review" in told.stderr
    marked = cli("search", queries[0], "--project-dir", str(proj), "--include-history")
    assert any(h["id"] == gotcha["id"] and h["metadata"]["validity"]["state"] == "pending"
               for h in marked)
    text = run_cli("context", queries[0], "--project-dir", str(proj)).stdout
    assert "pytest tests/test_pay.py` failed" not in text
    assert "left out: retired or superseded, or not accepted in review" in text
    brief = context(fire(proj, "SessionStart", {"session_id": "s-next", "source": "startup"},
                         "startup"))
    assert "pytest tests/test_pay.py" not in brief
    assert not pending & about(proj)
    assert "pytest tests/test_pay.py" not in run_cli("agents-md", "--project-dir", str(proj)).stdout
    same_after_reindex(proj, queries)

    step = cli("review", "accept", "--all", "--project-dir", str(proj))
    assert {line["item"] for line in step["lines"]} == pending
    assert step["who"] == "t@example.invalid"  # git's user.email in the project
    assert gotcha["id"] in same_after_reindex(proj, queries)[queries[0]]
    brief = context(fire(proj, "SessionStart", {"session_id": "s-after", "source": "startup"},
                         "startup"))
    assert "pytest tests/test_pay.py" in brief
    assert pending & about(proj)
    assert "pytest tests/test_pay.py" in run_cli("agents-md", "--project-dir", str(proj)).stdout
    assert cli("review", "--project-dir", str(proj))["pending"] == []


def about(root: Path) -> set[str]:
    """The ids ``graphmem about src/pay.py`` lists, in any of its parts."""
    got = cli("about", "src/pay.py", "--project-dir", str(root))
    return {e["id"] for part in ("current", "gone", "history") for e in got[part]}


def test_apply_is_the_default_and_nothing_is_held(tmp_path, isolated_env):
    root = repo(tmp_path)
    with Memory(None, root) as mem:
        assert mem.settings.review.mode == "apply"
        mem.save_session_insights(1, {"discoveries": {"gotchas_encountered": [NOTES["a"]]}})
        assert mem.review_pending()["pending"] == []
    assert len(found(root, NOTES["a"])) == 1
    out = run_cli("review", "--project-dir", str(root))
    assert out.returncode == 0 and "Nothing waits for review" in out.stdout
    assert "GRAPHMEM_REVIEW=hold" in out.stdout


# ---- accept, reject, undo -------------------------------------------------------------------------
def test_reject_hides_for_good_keeps_the_line_and_undo_walks_back(tmp_path, isolated_env):
    root = repo(tmp_path)
    spec = root / ".graphmem"
    ids = held(root)
    q = "zebra importer"
    assert not set(ids.values()) & set(same_after_reindex(root, [q])[q])
    where = ("--project-dir", str(root))
    doctor = run_cli("doctor", "--spec-dir", str(spec), *where, "--json")
    [told] = [r for r in json.loads(doctor.stdout)["sections"]["files"] if r["name"] == "review"]
    assert told["detail"] == "review.mode apply; 3 pending, 0 proposed; `graphmem review` lists them"

    cli("review", "accept", ids["a"], *where)
    cli("review", "reject", ids["b"], "--reason", "wrong: blanks are zero", *where)
    now = same_after_reindex(root, [q])[q]
    assert ids["a"] in now and ids["b"] not in now and ids["c"] not in now
    listed = cli("review", *where)
    assert [x["id"] for x in listed["pending"]] == [ids["c"]]
    history = cli("search", q, *where, "--include-history")
    assert {h["id"]: h["metadata"]["validity"]["state"] for h in history
            if h["id"] == ids["b"]} == {ids["b"]: "rejected"}
    rejected = [x for x in log_lines(spec) if x["item"] == ids["b"] and x["state"] == "rejected"]
    assert len(rejected) == 1 and rejected[0]["reason"] == "wrong: blanks are zero"
    assert rejected[0]["who"] == "ana@example.invalid" and rejected[0]["was"]["state"] == "pending"
    with Memory(None, root) as mem:  # still in the files: rejected is not deleted
        assert NOTES["b"] in {i.text for i in mem.items()}

    lines = len(log_lines(spec))
    undone = cli("review", "undo", *where)  # the reject
    assert [(x["item"], x["state"]) for x in undone["lines"]] == [(ids["b"], "pending")]
    assert len(log_lines(spec)) == lines + 1  # appended, never rewritten
    assert {x["id"] for x in cli("review", *where)["pending"]} == {ids["b"], ids["c"]}
    assert ids["a"] in same_after_reindex(root, [q])[q]
    cli("review", "undo", *where)  # the accept
    assert {x["id"] for x in cli("review", *where)["pending"]} == set(ids.values())
    assert not set(ids.values()) & set(same_after_reindex(root, [q])[q])
    nothing = run_cli("review", "undo", *where)
    assert nothing.returncode == 4 and "nothing to undo" in nothing.stderr
    lines = log_lines(spec)
    assert [x["action"] for x in lines] == ["hold"] * 3 + ["accept", "reject", "undo", "undo"]
    assert lines[5]["undoes"] == lines[4]["act"] and lines[6]["undoes"] == lines[3]["act"]


def test_an_undo_refuses_when_the_memory_changed_since(tmp_path, isolated_env):
    root = repo(tmp_path)
    ids = held(root)
    with Memory(None, root) as mem:
        mem.accept([ids["a"]])
        mem.retire(ids["a"], "the importer was rewritten")
        try:
            mem.undo_review()
        except ValidationError as exc:
            assert exc.field == "undo" and ids["a"] in str(exc) and "retired" in str(exc)
        else:
            raise AssertionError("an undo over a later retire was accepted")
        assert mem.review_pending()["pending"] and \
            ids["a"] not in {x["id"] for x in mem.review_pending()["pending"]}


def retry_reversal_judge(body: dict) -> str:
    """A loopback LLM's answer: the new note (its text says "never") supersedes every listed
    candidate; any other note supersedes nothing."""
    content = body["messages"][-1]["content"]
    listed = [int(x[1:].split("]")[0]) for x in content.splitlines() if x.startswith("[")]
    return json.dumps({"updates": listed if "never" in content.split("\n", 1)[0] else [],
                       "reason": "the retry policy was reversed"})


# ---- an LLM's supersession proposed ---------------------------------------------------------------
def test_an_llm_supersession_is_proposed_and_applied_only_on_accept(tmp_path, isolated_env,
                                                                     monkeypatch):
    root, spec = project(tmp_path, {"src/pay.py": PAY})
    old_text = "`refund` calls are retried three times by src/pay.py"
    new_text = "`refund` is never retried any more: the gateway deduplicates"

    server = FakeOpenAI(retry_reversal_judge)
    env = {"GRAPHMEM_LLM_PROVIDER": "openai", "OPENAI_API_KEY": KEY,
           "OPENAI_BASE_URL": server.url, "GRAPHMEM_REVIEW": "hold"}
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    try:
        with Memory(spec, root) as mem:
            mem.append_gotcha(old_text)
            mem.append_gotcha(new_text)
    finally:
        server.close()
    assert len(server.requests) >= 1  # the LLM judged
    where = ("--spec-dir", str(spec), "--project-dir", str(root))
    q = "is refund retried"
    waiting = cli("review", *where)
    assert waiting["pending"] == []  # written by a person: not held
    [prop] = waiting["proposed"]
    assert prop["text"] == old_text and prop["proposes"] == "superseded"
    assert prop["by_text"] == new_text and "judged by" in prop["reason"]
    hits = cli("search", q, *where)
    old = next(h for h in hits if h["text"] == old_text)  # not hidden: only proposed
    assert old["metadata"]["validity"]["state"] == "proposed"
    told = run_cli("context", q, *where).stdout
    assert "proposed as superseded, waiting for review: judged by" in told
    assert [h["text"] for h in hits].index(new_text) < [h["text"] for h in hits].index(old_text)
    same_after_reindex(root, [q])

    cli("review", "accept", prop["id"], *where)
    assert old_text not in [h["text"] for h in cli("search", q, *where)]
    assert prop["id"] not in same_after_reindex(root, [q])[q]
    assert [x for x in log_lines(spec) if x["item"] == prop["id"]][-1]["state"] == "superseded"
    cli("review", "undo", *where)
    assert cli("review", *where)["proposed"][0]["id"] == prop["id"]
    cli("review", "reject", prop["id"], *where)
    hits = cli("search", q, *where)
    assert "validity" not in next(h for h in hits if h["text"] == old_text)["metadata"]
    assert cli("review", *where)["proposed"] == []
    same_after_reindex(root, [q])


# ---- garbage -----------------------------------------------------------------------------------------
def test_garbage_is_refused_naming_the_field_and_writes_nothing(tmp_path, isolated_env):
    root = repo(tmp_path)
    ids = held(root)
    log = root / ".graphmem" / "memory" / "validity.jsonl"
    before = log.read_bytes()
    where = ("--project-dir", str(root))
    bad = run_cli("review", *where, env={"GRAPHMEM_REVIEW": "later"})
    assert bad.returncode == 3 and "GRAPHMEM_REVIEW (review.mode)" in bad.stderr
    assert "'apply' or 'hold'" in bad.stderr
    for args, field, words in [
            (("accept", "zzz"), "ids", "not a memory id"),
            (("accept", "0" * 24), "ids", "not in this memory's files"),
            (("reject", ids["a"], "0" * 24), "ids", "0" * 24),  # all or nothing
            (("accept",), "ids", "name the memories"),
            (("accept", ids["a"], "--all"), "ids", "not both"),
            (("list", ids["a"]), "ids", "takes no ids")]:
        out = run_cli("review", *args, *where)
        assert out.returncode == 2, (args, out.stderr)
        assert f"error: {field}: " in out.stderr and words in out.stderr, out.stderr
    cli("review", "accept", ids["a"], *where)
    again = run_cli("review", "accept", ids["a"], *where)
    assert again.returncode == 2 and "is not waiting for review (it is current)" in again.stderr
    after = log.read_bytes()
    assert after.startswith(before) and after.count(b"\n") == before.count(b"\n") + 1
    with Memory(None, root) as mem:
        for call, field in [(lambda: mem.save_session_insights(2, {}, hold="yes"), "hold"),
                            (lambda: mem.accept(ids["b"]), "ids"),
                            (lambda: mem.reject([ids["b"]], reason=7), "reason"),
                            (lambda: mem.accept(all="yes"), "all")]:
            try:
                call()
            except ValidationError as exc:
                assert exc.field == field, (field, exc)
            else:
                raise AssertionError(f"{field} garbage accepted")
    assert log.read_bytes() == after


# ---- merged branches ----------------------------------------------------------------------------------
def test_review_steps_of_two_branches_merge_with_the_union_driver(tmp_path, isolated_env):
    from graphmem.files.merge import register_driver

    root = repo(tmp_path)
    register_driver(root, sys.executable)
    start = git(root, "rev-parse", "HEAD")
    ids = held(root)
    git(root, "add", "-A")
    commit(root, "held memory")
    base = git(root, "symbolic-ref", "--short", "HEAD")
    diff = cli("diff", f"{start}..HEAD", "--project-dir", str(root))
    assert {r["id"]: r.get("review") for r in diff["added"]} == dict.fromkeys(ids.values(),
                                                                              "pending")
    markdown = run_cli("diff", f"{start}..HEAD", "--markdown", "--project-dir", str(root)).stdout
    assert f"- {NOTES['a']} (pending review)" in markdown
    git(root, "checkout", "-q", "-b", "a")
    with Memory(None, root) as mem:
        mem.accept([ids["a"]])
    commit(root, "accept a")
    git(root, "checkout", "-q", "-b", "b", base)
    with Memory(None, root) as mem:
        mem.reject([ids["b"]])
    commit(root, "reject b")
    git(root, "checkout", "-q", "a")
    out = subprocess.run(["git", "-C", str(root), "merge", "--no-edit", "b"], capture_output=True,
                         text=True)
    assert out.returncode == 0, out.stdout + out.stderr
    assert git(root, "status", "--porcelain") == ""
    q = "zebra importer"
    now = same_after_reindex(root, [q])[q]
    assert ids["a"] in now and ids["b"] not in now and ids["c"] not in now
    listed = cli("review", "--project-dir", str(root))
    assert [x["id"] for x in listed["pending"]] == [ids["c"]]
    assert [x["action"] for x in log_lines(root / ".graphmem")].count("hold") == 3  # not doubled
    cli("review", "undo", "--project-dir", str(root))  # the last step in the merged log
    assert len(cli("review", "--project-dir", str(root))["pending"]) == 2


def test_what_a_held_memory_would_replace_is_proposed_and_the_held_one_stays_out(tmp_path,
                                                                               isolated_env):
    """A held session's new value of a fact: the older note is only proposed as replaced, and
    the held note is never pulled into results in its place (``current_first``)."""
    root = repo(tmp_path)
    old_text, new_text = "Bump requests to 2.31.0 in the lock file", \
        "Bump requests to 2.32.3 in the lock file"
    with Memory(None, root) as mem:
        mem.save_session_insights(1, {"what_worked": [old_text]})
        mem.save_session_insights(2, {"what_worked": [new_text]}, hold=True)
        waiting = mem.review_pending()
    [pending] = waiting["pending"]
    [prop] = waiting["proposed"]
    assert pending["text"] == new_text and prop["text"] == old_text
    assert prop["proposes"] == "possibly superseded" and prop["by"] == pending["id"]
    assert prop["by_pending"] is True
    q = "which version of requests do we pin"
    hits = cli("search", q, "--project-dir", str(root))
    assert pending["id"] not in [h["id"] for h in hits]
    assert prop["id"] in [h["id"] for h in hits]
    same_after_reindex(root, [q])
    # accepting the proposal accepts the memory that makes it, in one step
    step = cli("review", "accept", prop["id"], "--project-dir", str(root))
    assert {(x["item"], x["state"]) for x in step["lines"]} == {
        (prop["id"], "possibly superseded"), (pending["id"], "current")}
    ranked = [h["id"] for h in cli("search", q, "--project-dir", str(root))]
    assert ranked.index(pending["id"]) < ranked.index(prop["id"])
    cli("review", "undo", "--project-dir", str(root))
    # rejecting the held memory takes back what it proposed, in one step
    step = cli("review", "reject", pending["id"], "--project-dir", str(root))
    assert {(x["item"], x["state"]) for x in step["lines"]} == {
        (pending["id"], "rejected"), (prop["id"], "current")}
    hits = cli("search", q, "--project-dir", str(root))
    assert [h["id"] for h in hits if h["id"] in (prop["id"], pending["id"])] == [prop["id"]]
    assert "validity" not in next(h for h in hits if h["id"] == prop["id"])["metadata"]
    assert cli("review", "--project-dir", str(root))["proposed"] == []
    same_after_reindex(root, [q])
