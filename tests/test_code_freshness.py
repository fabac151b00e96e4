"""Anchors and freshness on real git histories built here: edit, rename, delete, move a function.

Every state comes from a real repository (``git`` as a subprocess) and the public API; nothing
about the project's code is faked.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import anyio
import pytest
from mcp import Client

from conftest import run_cli
from graphmem import Memory
from graphmem.errors import ValidationError
from graphmem.serve.mcp_server import build_server

PAY = "def refund(order):\n    return order.total\n\n\nclass Client:\n    def charge(self, n):\n        return n\n"
API = ("package api\n\ntype Server struct{}\n\nfunc (s *Server) Handle() {}\n\n"
       "func NewServer() *Server { return nil }\n")
UI = "export function renderCart(items) { return items }\nclass Cart { total() { return 1 } }\n"


def git(root: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True,
                          text=True).stdout.strip()


def project(tmp_path: Path, files: dict[str, str], use_git: bool = True) -> tuple[Path, Path]:
    root = tmp_path / "proj"
    for path, text in files.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(text)
    if use_git:
        git(root, "init", "-q")
        git(root, "config", "user.email", "t@example.invalid")
        git(root, "config", "user.name", "t")
        (root / ".git" / "info" / "exclude").write_text("specs/\n")
        commit(root, "start")
    spec = root / "specs" / "001"
    spec.mkdir(parents=True)
    return root, spec


def commit(root: Path, msg: str) -> None:
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", msg)


def anchors(spec: Path) -> list[dict]:
    """The anchor records of the file, as readers see them (sets resolved), in order."""
    from graphmem.code.anchor_file import AnchorBook

    b = AnchorBook(spec / "memory" / "anchors.jsonl").refresh()
    return list({id(r): r for r in b.records.values()}.values())


def states(mem: Memory, query: str) -> dict[str, dict]:
    return {h.text: h.metadata.get("freshness") for h in mem.search(query, scope="project", limit=20)}


def test_anchors_name_symbols_of_python_go_and_javascript_with_their_blob_and_head(tmp_path):
    root, spec = project(tmp_path, {"src/pay.py": PAY, "src/api.go": API, "web/ui.js": UI})
    with Memory(spec, root) as mem:
        mem.append_gotcha("Refunds go through `refund`; never call Client.charge twice")
        mem.append_gotcha("NewServer must be called once, Server.Handle is not reentrant")
        mem.append_gotcha("renderCart and Cart.total recompute the cart on every call")
        mem.append_gotcha("The build needs no network")  # names no code: no anchor line
    recs = anchors(spec)
    assert len(recs) == 3
    head = git(root, "rev-parse", "HEAD")
    got = {(a["path"], a["symbol"]): a for r in recs for a in r["anchors"]}
    assert set(got) == {("src/pay.py", "refund"), ("src/pay.py", "Client.charge"),
                        ("src/api.go", "NewServer"), ("src/api.go", "Server.Handle"),
                        ("web/ui.js", "renderCart"), ("web/ui.js", "Cart.total")}
    assert got[("src/pay.py", "refund")]["lines"] == [1, 2]
    assert got[("src/api.go", "Server.Handle")]["lines"] == [5, 5]
    for (path, _), a in got.items():
        assert a["blob"] == git(root, "rev-parse", f"HEAD:{path}")
    assert all(r["head"] == head for r in recs)


def test_paths_in_text_map_keys_discoveries_and_step_payloads_are_anchored(tmp_path):
    root, spec = project(tmp_path, {"src/pay.py": PAY, "src/api.go": API, "docs/a.md": "x\n"})
    with Memory(spec, root) as mem:
        mem.update_codebase_map({"src/api.go": "the HTTP server", "src/nope.py": "not in the tree"})
        mem.save_session_insights(1, {"what_worked": ["retry the payment once"],
                                      "discoveries": {"files_understood": {"src/pay.py": "payments"}}})
        sid = mem.start_session()
        mem.record_step(sid, "Read", "ok", {"path": "docs/a.md"})
        mem.end_session(sid)
        mem.search("wait", scope="project", limit=1)
    by_path: dict[str, list[dict]] = {}
    for r in anchors(spec):
        for a in r["anchors"]:
            by_path.setdefault(a["path"], []).append(a)
    assert set(by_path) == {"src/api.go", "src/pay.py", "docs/a.md"}  # src/nope.py is not code here
    # the insight line names no file: it is anchored to its session's discoveries
    lesson = [r for r in anchors(spec) if any(a.get("via") == "session" for a in r["anchors"])]
    assert lesson and lesson[0]["anchors"][0]["path"] == "src/pay.py"


def test_each_freshness_state_from_a_real_history(tmp_path):
    root, spec = project(tmp_path, {"src/pay.py": PAY, "src/api.go": API, "web/ui.js": UI,
                                    "src/util.py": "def helper():\n    return 1\n",
                                    "src/other.py": "X = 1\n"})
    with Memory(spec, root) as mem:
        mem.append_gotcha("refund rounding: `refund` must round half up")
        mem.append_gotcha("NewServer wiring: call NewServer once per process")
        mem.append_gotcha("cart rendering: renderCart re-renders everything")
        mem.append_gotcha("helper caching: helper() is called on every request")
        mem.append_gotcha("config loading lives in src/util.py and src/other.py")
        assert {s["state"] for s in states(mem, "refund NewServer renderCart helper config").values()
                if s} == {"current"}
        (root / "src/pay.py").write_text(PAY.replace("return order.total", "return round(order.total)"))
        git(root, "mv", "src/api.go", "src/server.go")  # renamed, identical content
        (root / "web/ui.js").unlink()  # deleted
        (root / "src/util.py").write_text("")  # helper moves to another file
        (root / "src/other.py").write_text("X = 1\n\n\ndef helper():\n    return 1\n")
        commit(root, "edit, rename, delete, move")
        got = states(mem, "refund NewServer renderCart helper config")
    refund = got["refund rounding: `refund` must round half up"]
    assert refund["state"] == "changed" and refund["changed"] == ["src/pay.py"]
    assert refund["symbols_changed"] == ["refund"]
    server = got["NewServer wiring: call NewServer once per process"]
    assert server["state"] == "moved" and server["moved"] == {"src/api.go": "src/server.go"}
    cart = got["cart rendering: renderCart re-renders everything"]
    assert cart["state"] == "gone"
    helper = got["helper caching: helper() is called on every request"]
    assert helper["state"] == "moved" and helper["moved"] == {"src/util.py": "src/other.py"}
    config = got["config loading lives in src/util.py and src/other.py"]
    # util.py lost every line the memory saw; other.py only gained some: it is current
    assert config["state"] == "changed" and config["changed"] == ["src/util.py"]
    assert config["commits"] == {"src/other.py": 1, "src/util.py": 1}


def test_changed_is_symbol_level_and_counts_the_commits_since(tmp_path):
    root, spec = project(tmp_path, {"src/pay.py": PAY, "src/other.py": "X = 1\n"})
    with Memory(spec, root) as mem:
        mem.append_gotcha("refund rounding: `refund` must round half up")
        mem.append_gotcha("payments layout: src/pay.py keeps charges and refunds together")

        def now() -> tuple[dict, dict]:
            got = states(mem, "refund rounding payments layout")
            return (got["refund rounding: `refund` must round half up"],
                    got["payments layout: src/pay.py keeps charges and refunds together"])

        (root / "src/pay.py").write_text(PAY + "\n\ndef audit():\n    pass\n")
        commit(root, "add audit below refund")
        (root / "src/pay.py").write_text(
            PAY.replace("return n", "return n * 2") + "\n\ndef audit():\n    pass\n")
        commit(root, "edit Client.charge")
        (root / "src/other.py").write_text("X = 2\n")
        commit(root, "another file")
        refund, layout = now()
        # the file changed twice, but not refund's own lines, and most of the file is kept
        assert refund["state"] == "current" and refund["commits"] == {"src/pay.py": 2}
        assert layout["state"] == "current" and layout["commits"] == {"src/pay.py": 2}
        (root / "src/pay.py").write_text(PAY.replace("return order.total", "return 0").replace(
            "return n", "return n * 2") + "\n\ndef audit():\n    pass\n")
        commit(root, "edit refund")
        refund, _ = now()
        assert refund["state"] == "changed" and refund["symbols_changed"] == ["refund"]
        assert refund["commits"] == {"src/pay.py": 3}
        ctx = mem.context("refund rounding must round half up", max_tokens=1000)
        assert "src/pay.py changed since this was learned (3 commits)" in ctx
        (root / "src/pay.py").write_text("def pay_everything():\n    return None\n")
        commit(root, "rewrite the module")
        _, layout = now()
    assert layout["state"] == "changed" and layout["changed"] == ["src/pay.py"]
    assert layout["commits"] == {"src/pay.py": 4}


def test_search_demotes_gone_and_context_rewrites_moved_marks_changed_hides_gone(tmp_path, monkeypatch):
    monkeypatch.setattr("graphmem.rules.context.RELEVANCE_FLOOR", 0.0)  # the floor has its own test
    root, spec = project(tmp_path, {"src/pay.py": PAY, "src/api.go": API, "web/ui.js": UI})
    with Memory(spec, root) as mem:
        mem.append_gotcha("checkout: renderCart in web/ui.js flickers during checkout")
        mem.append_gotcha("checkout: Handle in src/api.go serves the checkout page")
        mem.append_gotcha("checkout: `refund` in src/pay.py runs after a failed checkout")
        before = [h.text for h in mem.search("checkout renderCart flickers", scope="project")]
        assert before[0].startswith("checkout: renderCart")
        (root / "web/ui.js").unlink()
        (root / "src/http").mkdir()
        git(root, "mv", "src/api.go", "src/http/api.go")
        (root / "src/pay.py").write_text(PAY.replace("return order.total", "return 0"))
        commit(root, "change")
        after = [h.text for h in mem.search("checkout renderCart flickers", scope="project")]
        ctx = mem.context("checkout: Handle serves the checkout page, renderCart flickers during "
                          "checkout, refund runs after a failed checkout", max_tokens=2000)
    assert after[-1].startswith("checkout: renderCart")  # gone: below the others
    assert "src/http/api.go" in ctx and "src/api.go is now src/http/api.go" in ctx
    assert "Handle in src/http/api.go serves" in ctx  # the text itself names the current path
    assert "src/pay.py changed since this was learned (1 commit)" in ctx
    body = ctx.split("\n", 1)[1]
    assert "flickers" not in body and "1 matching memory left out: the code it describes is gone" in body, ctx


def test_context_files_pulls_memories_anchored_there(tmp_path):
    root, spec = project(tmp_path, {"src/pay.py": PAY, "src/api.go": API})
    with Memory(spec, root) as mem:
        mem.update_codebase_map({"src/pay.py": "payments: refunds and charges"})
        for n in range(30):
            mem.append_gotcha(f"deploys of region {n} need the release checklist step {n}")
        mem.append_gotcha("Client.charge retries once on a timeout")
        plain = mem.context("prepare the release checklist", max_tokens=300)
        pulled = mem.context("prepare the release checklist", max_tokens=300, files=["src/pay.py"])
        with pytest.raises(ValidationError) as bad:
            mem.context("x", files="src/pay.py")
        assert bad.value.field == "files"
        with pytest.raises(ValidationError) as bad:
            mem.context("x", files=["../../etc/passwd"])
        assert bad.value.field == "files[0]"
    assert "Client.charge retries" not in plain
    assert "Client.charge retries" in pulled and "payments: refunds" in pulled


def test_context_files_through_cli_and_mcp(tmp_path):
    root, spec = project(tmp_path, {"src/pay.py": PAY})
    for n in range(30):
        Memory(spec, root).append_gotcha(f"deploys of region {n} need the checklist step {n}")
    with Memory(spec, root) as mem:
        mem.append_gotcha("Client.charge retries once on a timeout")
    out = run_cli("context", "the release checklist", "--max-tokens", "300", "--file", "src/pay.py",
                  "--spec-dir", str(spec), "--project-dir", str(root))
    assert out.returncode == 0, out.stderr
    assert "Client.charge retries" in out.stdout

    async def main():
        async with Client(build_server(spec)) as c:
            res = await c.call_tool("get_context", {"task": "the release checklist", "max_tokens": 300,
                                                    "files": ["src/pay.py"]})
            return "".join(getattr(x, "text", "") for x in res.content)
    assert "Client.charge retries" in anyio.run(main)


def test_turns_are_quoted_with_their_session_and_weak_matches_stay_out(tmp_path):
    root, spec = project(tmp_path, {"src/pay.py": PAY})
    with Memory(spec, root) as mem:
        sid = mem.start_session()
        mem.record_turn(sid, "user", "please make refunds idempotent in src/pay.py")
        mem.end_session(sid)
        ctx = mem.context("make refunds idempotent", max_tokens=1000)
    assert "### From past conversations" in ctx
    assert f'- "please make refunds idempotent in src/pay.py" (user in session {sid}' in ctx


@pytest.mark.parametrize("floor", ["on", "off"])
def test_an_off_topic_turn_of_a_relevant_session_stays_out_of_a_small_context(tmp_path, monkeypatch,
                                                                              tune_code, floor):
    if floor == "off":  # the previous rule (relative floor only): the off-topic turn got in
        monkeypatch.setattr("graphmem.rules.context.RAW_TERMS", 0)
        # and scores as the index gave them: code recall lifts the anchored lessons, which
        # raises the relative floor above the turn by itself
        tune_code(file_gain=0.0, recency_gain=0.0)
    root, spec = project(tmp_path, {"src/pay.py": PAY})
    with Memory(spec, root) as mem:
        mem.update_codebase_map({"src/pay.py": "Stripe client wrapper: create PaymentIntent, refund"})
        mem.save_session_insights(1, {"what_worked": [
            "Refunds go through `refund` and the order moves to refunded from the webhook"]})
        sid = mem.start_session()
        mem.record_turns(sid, [
            {"role": "user", "content": "Implement the checkout endpoint with a Stripe PaymentIntent."},
            {"role": "assistant", "content": "I added POST /checkout; it creates the Stripe intent."},
            {"role": "user", "content": "The test suite hangs on the first checkout test."},
            {"role": "assistant", "content": "The fixture held a row lock; it reuses the session now."}])
        mem.end_session(sid)
        ctx = mem.context("Add partial refunds to checkout, triggered from the Stripe dashboard",
                          max_tokens=1000)
    assert "Implement the checkout endpoint" in ctx and "I added POST /checkout" in ctx
    assert ("The test suite hangs" in ctx) == (floor == "off"), ctx


def test_context_says_where_the_code_the_task_names_is_now(tmp_path):
    root, spec = project(tmp_path, {"src/util.py": "def helper():\n    return 1\n",
                                    "src/other.py": "X = 1\n"})
    with Memory(spec, root) as mem:
        mem.append_gotcha("helper() in src/util.py is called on every request")
        (root / "src/util.py").write_text("")
        (root / "src/other.py").write_text("X = 1\n\n\ndef helper():\n    return 1\n")
        commit(root, "move helper")
        ctx = mem.context("Where is `helper` implemented?", max_tokens=500)
    where = ctx.index("`helper` is defined in src/other.py (lines 4-5)")
    assert where < ctx.index("helper() in src/other.py is called")  # the memory, rewritten
    assert "src/util.py is now src/other.py" not in ctx[:where]


def test_a_project_that_is_not_a_git_repository(tmp_path):
    root, spec = project(tmp_path, {"src/pay.py": PAY, "web/ui.js": UI}, use_git=False)
    with Memory(spec, root) as mem:
        mem.append_gotcha("refund rounding: `refund` must round half up")
        mem.append_gotcha("cart rendering: renderCart re-renders everything")
        assert all(r["head"] is None for r in anchors(spec))
        assert {s["state"] for s in states(mem, "refund rendering").values()} == {"current"}
        (root / "src/pay.py").write_text(PAY.replace("order.total", "order.total * 2"))
        (root / "web/ui.js").unlink()
        got = states(mem, "refund rendering")
    assert got["refund rounding: `refund` must round half up"]["state"] == "changed"
    assert got["cart rendering: renderCart re-renders everything"]["state"] == "gone"


def test_reindex_writes_the_anchors_again(tmp_path):
    root, spec = project(tmp_path, {"src/pay.py": PAY})
    with Memory(spec, root) as mem:
        mem.append_gotcha("Refunds go through `refund`")
        first = anchors(spec)
        (spec / "memory" / "anchors.jsonl").unlink()
        counts = mem.reindex()
        assert counts["anchors"] == 1
        again = anchors(spec)
        assert again[0]["items"] == first[0]["items"] and again[0]["anchors"] == first[0]["anchors"]
        assert mem.reindex()["anchors"] == 0  # nothing missing: nothing appended


def test_a_turn_naming_no_file_takes_the_files_its_session_worked_on(tmp_path):
    root, spec = project(tmp_path, {"src/pay.py": PAY, "web/ui.js": UI})
    with Memory(spec, root) as mem:
        sid = mem.start_session()
        mem.record_turn(sid, "user", "make the shopping basket faster please")
        mem.record_step(sid, "Edit", "ok", {"file_path": "web/ui.js"})
        mem.end_session(sid)
        assert states(mem, "shopping basket faster")["make the shopping basket faster please"][
            "state"] == "current"
        (root / "web/ui.js").unlink()
        commit(root, "drop the old cart")
        turn = states(mem, "shopping basket faster")["make the shopping basket faster please"]
    assert turn["state"] == "gone" and turn["gone"] == ["web/ui.js"]


def test_context_leaves_weak_matches_out(tmp_path, monkeypatch):
    root, spec = project(tmp_path, {"src/pay.py": PAY})
    with Memory(spec, root) as mem:
        mem.append_gotcha("Refunds must be idempotent: refund() checks the ledger before paying out")
        mem.append_gotcha("Refund amounts are in cents, never floats")
        mem.append_gotcha("The test suite hangs on the first checkout test")
        mem.update_codebase_map({"src/pay.py": "payments: refunds and charges"})
        ctx = mem.context("make refunds idempotent", max_tokens=2000)
        monkeypatch.setattr("graphmem.rules.context.RELEVANCE_FLOOR", 0.0)
        unfloored = mem.context("make refunds idempotent", max_tokens=2000)
    assert "refund() checks the ledger" in ctx
    assert "hangs on the first checkout test" not in ctx
    assert "hangs on the first checkout test" in unfloored  # what the context showed before


def test_retire_and_supersede_are_logged_hidden_by_default_and_shown_with_history(tmp_path):
    root, spec = project(tmp_path, {"src/pay.py": PAY})
    with Memory(spec, root) as mem:
        mem.append_gotcha("Pin pytest to 7.4 in the CI image")
        mem.append_gotcha("Refund webhooks arrive twice")
        old = {h.text: h.id for h in mem.search("pytest pin refund webhooks", limit=10)}
        ev = mem.supersede(old["Pin pytest to 7.4 in the CI image"], "Pin pytest to 8.2 in the CI image")
        mem.retire(old["Refund webhooks arrive twice"], "the provider deduplicates them now")
        now = [h.text for h in mem.search("pytest pin refund webhooks", limit=10)]
        every = {h.text: h.metadata.get("validity") for h in
                 mem.search("pytest pin refund webhooks", limit=10, include_history=True)}
        ctx = mem.context("pin pytest and handle refund webhooks", max_tokens=1000)
        for bad, field in ((("nope", "x"), "id"), ((old["Refund webhooks arrive twice"], " "), "reason")):
            with pytest.raises(ValidationError) as err:
                mem.retire(*bad)
            assert err.value.field == field
        with pytest.raises(ValidationError) as err:
            mem.supersede(ev["new_id"], "")
        assert err.value.field == "new_text"
    assert now == ["Pin pytest to 8.2 in the CI image"]
    assert every["Pin pytest to 7.4 in the CI image"]["state"] == "superseded"
    assert every["Pin pytest to 7.4 in the CI image"]["by"] == ev["new_id"]
    assert every["Refund webhooks arrive twice"]["state"] == "retired"
    assert every["Refund webhooks arrive twice"]["valid_at"] and every[
        "Refund webhooks arrive twice"]["invalid_at"]
    # the old line is left out; the current one says the value it replaced (issue 34)
    assert "Pin pytest to 7.4" not in ctx and "2 matching memories left out: retired or superseded" in ctx
    assert "Pin pytest to 8.2 in the CI image" in ctx and "[was 7.4 until 20" in ctx
    log = [json.loads(x) for x in (spec / "memory" / "validity.jsonl").read_text().splitlines()]
    assert [e["state"] for e in log] == ["superseded", "retired"]
    assert "Pin pytest to 7.4" in (spec / "memory" / "gotchas.md").read_text()  # the files keep it


def test_retire_through_cli_and_mcp(tmp_path):
    root, spec = project(tmp_path, {"src/pay.py": PAY})
    with Memory(spec, root) as mem:
        mem.append_gotcha("Refund webhooks arrive twice")
        mem.append_pattern("Services take a Session argument")
        ids = {h.kind: h.id for h in mem.search("refund webhooks services session", limit=5)}
    out = run_cli("retire", ids["gotcha"], "--reason", "deduplicated upstream", "--spec-dir", str(spec))
    assert out.returncode == 0, out.stderr

    async def main():
        async with Client(build_server(spec)) as c:
            res = await c.call_tool("supersede_memory", {"id": ids["pattern"],
                                                         "new_text": "Services take a UnitOfWork"})
            assert not res.is_error
            hits = await c.call_tool("search_memory", {"query": "refund webhooks services",
                                                       "scope": "spec"})
            return "".join(getattr(x, "text", "") for x in hits.content)
    found = anyio.run(main)
    assert "UnitOfWork" in found and "Refund webhooks" not in found and "Session argument" not in found


def test_a_newer_value_marks_the_older_possibly_superseded_without_an_llm(tmp_path):
    root, spec = project(tmp_path, {"src/pay.py": PAY})
    with Memory(spec, root) as mem:
        mem.append_gotcha("Pin pytest to 7.4 in the CI image")
        mem.append_gotcha("Refund webhooks arrive twice")
        mem.append_gotcha("Pin pytest to 8.2 in the CI image")
        mem.append_gotcha("Refund webhooks arrive twice within 5 seconds")  # no older number
        hits = mem.search("which pytest version is pinned in the CI image", limit=5)
    texts = [h.text for h in hits]
    assert texts.index("Pin pytest to 8.2 in the CI image") < texts.index(
        "Pin pytest to 7.4 in the CI image")
    old = hits[texts.index("Pin pytest to 7.4 in the CI image")]
    assert old.metadata["validity"]["state"] == "possibly superseded"
    assert old.metadata["validity"]["by"] == hits[texts.index("Pin pytest to 8.2 in the CI image")].id
    assert [json.loads(x)["state"] for x in
            (spec / "memory" / "validity.jsonl").read_text().splitlines()] == ["possibly superseded"]


def test_a_lesson_naming_no_code_is_gone_when_all_its_session_wrote_is_gone(tmp_path):
    feat = "def keep():\n    return 1\n"
    root, spec = project(tmp_path, {"src/feat.py": feat, "src/other.py": "def other():\n    return 2\n"})
    with Memory(spec, root) as mem:
        mem.save_session_insights(1, {"what_worked": ["first look around"],
                                      "discoveries": {"files_understood": {"src/feat.py": "feature"}}})
        (root / "src/feat.py").write_text(feat + "\n\ndef alpha():\n    return 2\n\n\ndef beta():\n    return 3\n")
        commit(root, "session 2 adds alpha and beta")
        mem.save_session_insights(2, {"what_worked": ["the new export works end to end"],
                                      "discoveries": {"files_understood": {"src/feat.py": "feature"}}})
        mem.save_session_insights(3, {"what_worked": ["the other export works end to end"],
                                      "discoveries": {"files_understood": {"src/other.py": "other"}}})
        (root / "src/feat.py").write_text(feat + "\n\ndef beta():\n    return 3\n")
        commit(root, "alpha goes")
        half = states(mem, "export works end to end")
        (root / "src/feat.py").write_text(feat)
        commit(root, "beta goes too")
        gone = states(mem, "export works end to end")
        first = states(mem, "first look around")["first look around"]
    lesson = "the new export works end to end"
    assert half[lesson]["state"] == "current"  # beta, which it wrote, is still there
    assert gone[lesson]["state"] == "gone"
    assert gone[lesson]["gone"] == ["src/feat.py:alpha", "src/feat.py:beta"]  # what the user sees
    # the session before it wrote neither, and another session's lesson touched nothing of them
    assert first["state"] == "current" and gone["the other export works end to end"]["state"] == "current"


def test_old_versions_are_read_by_blob_or_by_commit_and_path(tmp_path):
    from graphmem.code.history import cat_file

    root, _ = project(tmp_path, {"src/pay.py": PAY})
    head, blob = git(root, "rev-parse", "HEAD"), git(root, "rev-parse", "HEAD:src/pay.py")
    names = [blob, f"{head}:src/pay.py", f"{head}:src/new.py", "0" * 40, "no such thing"]
    got = cat_file(root, names)
    assert got == {blob: PAY, f"{head}:src/pay.py": PAY, f"{head}:src/new.py": None}


def test_a_memory_with_most_of_its_files_gone_is_changed_and_half_is_only_said(tmp_path, monkeypatch):
    """More than half of the code a memory names gone: marked changed, naming it; half or less
    (as in "replace a.py with b.py"): no mark, the rest of what it says holds, the gone file
    still said (issue 34 item 3)."""
    monkeypatch.setattr("graphmem.rules.context.RELEVANCE_FLOOR", 0.0)
    files = {f"src/{n}.py": f"def {n}_step():\n    return '{n}'\n" for n in "abcdef"}
    root, spec = project(tmp_path, files)
    three = "ledger: src/a.py, src/b.py and src/c.py post the ledger together"
    two = "ledger export: src/d.py hands the ledger to src/e.py"
    most = "ledger audit: src/c.py and src/e.py check what src/f.py posts"
    with Memory(spec, root) as mem:
        mem.append_gotcha(three)
        mem.append_gotcha(two)
        mem.append_gotcha(most)
        (root / "src/c.py").unlink()
        (root / "src/e.py").unlink()
        commit(root, "drop c and e")
        got = states(mem, "ledger export post audit")
        ctx = mem.context("ledger: post the ledger together, export hands the ledger, audit",
                          max_tokens=2000)
        for name in ("a", "b"):
            (root / f"src/{name}.py").unlink()
        commit(root, "drop a and b")
        after = states(mem, "ledger export post")[three]
    # two of three gone: changed, with the reason; one of three or one of two: current, said
    assert got[most]["state"] == "changed" and got[most]["reason"] == \
        "src/c.py is gone; src/e.py is gone"
    assert got[three]["state"] == "current" and got[three]["reason"] == "src/c.py is gone"
    assert got[two]["state"] == "current" and got[two]["reason"] == "src/e.py is gone"
    assert got[three]["gone"] == ["src/c.py"]
    assert "src/c.py is gone" in ctx and "src/e.py is gone" in ctx
    cli = run_cli("search", "ledger export post", "--spec-dir", str(spec), "--project-dir",
                  str(root))
    assert "src/e.py is gone" in cli.stdout, cli.stdout + cli.stderr
    assert after["state"] == "gone" and after["gone"] == ["src/a.py", "src/b.py", "src/c.py"]


def test_a_file_renamed_and_edited_in_one_commit_is_moved_and_listed_in_moves(tmp_path,
                                                                             monkeypatch):
    monkeypatch.setattr("graphmem.rules.context.RELEVANCE_FLOOR", 0.0)
    body = "".join(f"def step_{i}(ledger):\n    return ledger + {i}\n\n\n" for i in range(8))
    root, spec = project(tmp_path, {"src/ledger.py": body, "src/util.py": PAY,
                                    "src/other.py": "X = 1\n"})
    note = "ledger posting: src/ledger.py posts every step in order"
    helper = "refunds: `refund` must round half up"
    with Memory(spec, root) as mem:
        mem.append_gotcha(note)
        mem.append_gotcha(helper)
        git(root, "mv", "src/ledger.py", "src/books.py")
        (root / "src/books.py").write_text(body + "def step_extra(ledger):\n    return 0\n")
        (root / "src/util.py").write_text("")
        (root / "src/other.py").write_text("X = 1\n\n\n" + PAY)
        commit(root, "rename the ledger and edit it; move refund")
        got = states(mem, "ledger posting refunds round")
        ctx = mem.context("ledger posting: posts every step in order", max_tokens=2000)
    fresh = got[note]
    assert fresh["state"] == "moved" and fresh["moved"] == {"src/ledger.py": "src/books.py"}
    assert fresh["moves"] == [{"from": "src/ledger.py", "to": "src/books.py", "what": "file"}]
    assert fresh["changed"] == [] and fresh["commits"] == {"src/books.py": 1}  # most lines kept
    assert "src/books.py posts every step" in ctx and "src/ledger.py is now src/books.py" in ctx
    moves = got[helper]["moves"]
    assert {"from": "src/util.py", "to": "src/other.py", "what": "symbol",
            "symbol": "refund", "left": False} in moves  # src/util.py stays (emptied)


def test_a_new_untracked_file_is_anchored_by_its_content_and_gets_freshness(tmp_path, tune_code):
    tune_code(untracked_ttl=0.0)  # list each read
    root, spec = project(tmp_path, {"src/pay.py": PAY, ".gitignore": "*.log\n"})
    flags = "def parse_flags(argv):\n    return argv[1:]\n"
    with Memory(spec, root) as mem:
        mem.append_gotcha("payments: src/pay.py is the only caller of the bank")  # warm snapshot
        (root / "src/cli_flags.py").write_text(flags)  # new, not committed, not ignored
        (root / "src/debug.log").write_text("noise\n")  # ignored: never anchored
        mem.append_gotcha("flag parsing: src/cli_flags.py drops the program name")
        mem.append_gotcha("debug output: src/debug.log fills up during refunds")
        recs = {a["path"]: a for r in anchors(spec) for a in r["anchors"]}
        assert "src/debug.log" not in recs
        assert recs["src/cli_flags.py"]["blob"] == git(root, "hash-object", "src/cli_flags.py")
        before = states(mem, "flag parsing program name")["flag parsing: src/cli_flags.py "
                                                          "drops the program name"]
        (root / "src/cli_flags.py").write_text("def parse_flags(argv):\n    return argv\n")
        after = states(mem, "flag parsing program name")["flag parsing: src/cli_flags.py "
                                                         "drops the program name"]
    assert before["state"] == "current"
    assert after["state"] == "changed" and after["changed"] == ["src/cli_flags.py"]


def test_context_files_and_about_find_memories_of_a_file_renamed_and_edited(tmp_path):
    body = "".join(f"def step_{i}(ledger):\n    return ledger + {i}\n\n\n" for i in range(8))
    root, spec = project(tmp_path, {"src/ledger.py": body, "src/pay.py": PAY})
    with Memory(spec, root) as mem:
        for n in range(30):
            mem.append_gotcha(f"deploys of region {n} need the release checklist step {n}")
        mem.append_gotcha("src/ledger.py must post every step in order")
        mem.append_gotcha("src/pay.py: Client.charge retries once on a timeout")
        git(root, "mv", "src/ledger.py", "src/books.py")
        (root / "src/books.py").write_text(body + "def step_extra(ledger):\n    return 0\n")
        commit(root, "rename the ledger and edit it")
        pulled = mem.context("prepare the release checklist", max_tokens=300,
                             files=["src/books.py"])
        about = [e["text"] for e in mem.about("src/books.py")["current"]]
    assert "src/books.py must post every step in order" in pulled  # its new name, rewritten
    assert "Client.charge retries" not in pulled
    assert about == ["src/ledger.py must post every step in order"]
