"""``about(path_or_symbol)`` through the API, the CLI and MCP; the same answer from the files and
from the graph (File/Symbol nodes, ABOUT edges with Graphiti's validity fields, RENAMED_TO).

Real git histories built here, the embedded FalkorDB for the graph side.
"""

from __future__ import annotations

import json
from pathlib import Path

import anyio
import pytest
from mcp import Client

from conftest import run_cli
from graphmem import Memory, Settings
from graphmem.errors import ValidationError
from graphmem.files.outbox import Outbox
from graphmem.graph import server
from graphmem.graph.schema import group_id
from graphmem.serve.mcp_server import build_server
from test_code_freshness import PAY, commit, git, project

REFUND = "Refunds go through `refund` in src/pay.py"
PIN7, PIN8 = "Pin stripe to 7 in src/pay.py", "Pin stripe to 8 in src/pay.py"
CHARGE = "Client.charge retries twice"
OTHER = "The api module logs every request in src/api.py"


def history(root: Path, spec: Path) -> dict[str, str]:
    """Memories on src/pay.py: one superseded, one retired; then the file is renamed."""
    with Memory(spec, root) as mem:
        for text in (REFUND, PIN7, CHARGE, OTHER):
            mem.append_gotcha(text)
        ids = {h.text: h.id for h in mem.search("refund stripe charge api", limit=10)}
        ids[PIN8] = mem.supersede(ids[PIN7], PIN8)["new_id"]
        mem.retire(ids[CHARGE], "charges are idempotent now")
    git(root, "mv", "src/pay.py", "src/payments.py")
    commit(root, "rename pay.py")
    return ids


def shape(ans: dict) -> tuple[list, list, list]:
    """What must agree between sources: ids, freshness and validity, in order."""
    def row(e):
        return (e["id"], e["freshness"]["state"], json.dumps(e["freshness"], sort_keys=True),
                (e["validity"] or {}).get("state"), (e["validity"] or {}).get("invalid_at"))
    return ([row(e) for e in ans["current"]], [row(e) for e in ans["gone"]],
            [row(e) for e in ans["history"]])


def test_about_a_file_or_symbol_current_first_then_history_with_freshness(tmp_path):
    root, spec = project(tmp_path, {"src/pay.py": PAY, "src/api.py": "def handle():\n    pass\n"})
    ids = history(root, spec)
    with Memory(None, root) as mem:
        by_new = mem.about("src/payments.py")       # the file's current name
        by_old = mem.about("src/pay.py")            # the name the memories used
        sym = mem.about("charge")
        qualified = mem.about("src/pay.py:refund")
        absolute = mem.about(str(root / "src" / "payments.py"))
        for bad in ("", "x" * 1001, "a\x00b", 7, "/elsewhere/x.py"):
            with pytest.raises(ValidationError) as err:
                mem.about(bad)
            assert err.value.field == "path_or_symbol"
    assert by_new["source"] == "files"
    assert [e["id"] for e in by_new["current"]] == [ids[PIN8], ids[REFUND]]  # newest first
    assert [e["id"] for e in by_new["history"]] == [ids[PIN7], ids[CHARGE]]  # oldest first
    assert all(e["freshness"]["state"] == "moved" and
               e["freshness"]["moved"] == {"src/pay.py": "src/payments.py"}
               for e in by_new["current"] + by_new["history"])
    assert by_new["history"][0]["validity"]["state"] == "superseded"
    assert by_new["history"][0]["validity"]["by"] == ids[PIN8]
    assert by_new["history"][1]["validity"]["state"] == "retired"
    assert ids[OTHER] not in {e["id"] for e in by_new["current"]}
    assert shape(by_old) == shape(by_new) == shape(absolute)
    assert [e["id"] for e in sym["history"]] == [ids[CHARGE]] and sym["current"] == []
    assert [e["id"] for e in qualified["current"]] == [ids[REFUND]]


def test_about_through_cli_and_mcp(tmp_path):
    root, spec = project(tmp_path, {"src/pay.py": PAY, "src/api.py": "def handle():\n    pass\n"})
    ids = history(root, spec)
    out = run_cli("about", "src/payments.py", "--project-dir", str(root), "--json")
    assert out.returncode == 0, out.stderr
    got = json.loads(out.stdout)
    assert [e["id"] for e in got["current"]] == [ids[PIN8], ids[REFUND]]
    human = run_cli("about", "Client.charge", "--project-dir", str(root))
    assert human.returncode == 0, human.stderr
    assert "History, oldest first (1)" in human.stdout and CHARGE in human.stdout
    assert "retired" in human.stdout and "src/pay.py is now src/payments.py" in human.stdout
    bad = run_cli("about", "", "--project-dir", str(root))
    assert bad.returncode != 0 and "path_or_symbol" in bad.stderr

    async def main():
        async with Client(build_server(spec, root)) as c:
            res = await c.call_tool("about", {"path_or_symbol": "src/payments.py"})
            assert not res.is_error
            return res.structured_content
    ans = anyio.run(main)
    assert [e["id"] for e in ans["history"]] == [ids[PIN7], ids[CHARGE]]


def cypher(root: Path, query: str) -> list:
    ep = server.EmbeddedServer(Settings.load()).endpoint()
    client = server.sync_client(ep)
    try:
        return client.execute_command("GRAPH.RO_QUERY", group_id(str(root)), query)[1]
    finally:
        client.close()


def test_the_graph_holds_the_code_and_answers_about_like_the_files(tmp_path, graph_on, monkeypatch):
    root, spec = project(tmp_path, {"src/pay.py": PAY, "src/api.py": "def handle():\n    pass\n"})
    ids = history(root, spec)
    with Memory(None, root) as mem:
        from_graph = {t: mem.about(t) for t in ("src/payments.py", "src/pay.py", "charge", "refund")}
        refreshed = mem.refresh_anchors()
    edges = cypher(root, "MATCH (m:Entity)-[e:RELATES_TO]->(c:Entity) WHERE e.name = 'ABOUT' "
                         "RETURN m.uuid, labels(c), c.name, e.valid_at, e.invalid_at, e.expired_at")
    about = {(r[0], r[2]): r for r in edges}
    assert ("Symbol" in about[(ids[CHARGE], "Client.charge")][1])
    assert about[(ids[CHARGE], "Client.charge")][4] and about[(ids[CHARGE], "Client.charge")][5]
    assert about[(ids[PIN7], "src/pay.py")][4] and "File" in about[(ids[PIN7], "src/pay.py")][1]
    assert about[(ids[PIN8], "src/pay.py")][3] and about[(ids[PIN8], "src/pay.py")][4] is None
    assert about[(ids[REFUND], "refund")][4] is None
    # a Graphiti-schema query for facts valid now sees the same validity as the files
    valid_now = {r[0] for r in cypher(root, "MATCH (m:Entity)-[e:RELATES_TO]->(c:Entity) WHERE "
                                            "e.name = 'ABOUT' AND e.invalid_at IS NULL RETURN m.uuid")}
    assert valid_now == {ids[REFUND], ids[PIN8], ids[OTHER]}
    assert refreshed["moved"] >= 3
    assert cypher(root, "MATCH (a:File)-[e:RELATES_TO]->(b:File) WHERE e.name = 'RENAMED_TO' "
                        "RETURN a.gm_path, b.gm_path") == [["src/pay.py", "src/payments.py"]]
    # code nodes are not memories: a search never returns them
    with Memory(None, root) as mem:
        assert all(h.kind == "gotcha" for h in mem.search("src/pay.py refund Client", scope="project", limit=20))
    monkeypatch.setenv("GRAPHMEM_GRAPH", "off")
    with Memory(None, root) as mem:
        from_files = {t: mem.about(t) for t in from_graph}
    for t, ans in from_graph.items():
        assert (t, ans["source"], from_files[t]["source"]) == (t, "graph", "files")
        assert shape(ans) == shape(from_files[t]), t
    assert [e["id"] for e in from_graph["src/payments.py"]["history"]] == [ids[PIN7], ids[CHARGE]]


def test_validity_reaches_the_graph_through_the_outbox_and_survives_reindex(tmp_path, graph_on):
    import os

    root, spec = project(tmp_path, {"src/pay.py": PAY})
    with Memory(spec, root, settings=Settings.load(graph__retry_after=0.0)) as mem:
        mem.append_gotcha(REFUND)
        rid = mem.search("refund", limit=1)[0].id
        assert server.EmbeddedServer(mem.settings).stop()
        os.chmod(server.EmbeddedServer(mem.settings).root, 0o500)  # cannot restart for now
        try:
            mem.retire(rid, "moved to the billing service")  # the graph is down: queued
        finally:
            os.chmod(server.EmbeddedServer(mem.settings).root, 0o700)
        assert [i.id for i in Outbox(spec / "memory").pending_items()] == [rid]
        mem.append_gotcha("Webhooks are verified with the signing secret")  # replays the outbox
        assert Outbox(spec / "memory").size() == 0
    query = ("MATCH (m:Entity)-[e:RELATES_TO]->(c:Symbol) WHERE e.name = 'ABOUT' "
             "RETURN m.uuid, e.invalid_at IS NOT NULL, e.expired_at IS NOT NULL, e.gm_reason")
    assert cypher(root, query) == [[rid, "true", "true", "moved to the billing service"]]
    with Memory(None, root) as mem:
        assert mem.reindex()["graph"] == "written"  # the graph is dropped and rebuilt
        ans = mem.about("refund")
    assert cypher(root, query) == [[rid, "true", "true", "moved to the billing service"]]
    assert ans["source"] == "graph" and [e["id"] for e in ans["history"]] == [rid]


def test_about_in_a_project_that_is_not_a_git_repository(tmp_path):
    root, spec = project(tmp_path, {"src/pay.py": PAY}, use_git=False)
    with Memory(spec, root) as mem:
        mem.append_gotcha(REFUND)
        rid = mem.search("refund", limit=1)[0].id
        assert mem.about("refund")["current"][0]["freshness"]["state"] == "current"
    (root / "src" / "pay.py").write_text(PAY.replace("order.total", "order.total - order.fee"))
    with Memory(None, root) as mem:
        ans = mem.about("src/pay.py")
    assert [e["id"] for e in ans["current"]] == [rid]
    assert ans["current"][0]["freshness"]["state"] == "changed"
    assert ans["current"][0]["freshness"]["symbols_changed"] == ["refund"]


def test_about_and_the_cli_search_carry_the_reason_and_the_moves_a_search_hit_has(tmp_path):
    # one memory names `refund` (moves to its own file, src/pay.py stays) and `cee` in src/c.py
    # (deleted): search says "moved" (half of its code is gone: said, not marked changed, issue
    # 34) with the reason; about said only the state
    root, spec = project(tmp_path, {"src/pay.py": PAY, "src/c.py": "def cee():\n    return 1\n"})
    text = "Checkout: `refund` in src/pay.py calls `cee` in src/c.py"
    with Memory(spec, root) as mem:
        mem.append_gotcha(text)
        mem.update_codebase_map({"src/pay.py": "`refund` and the `Client` class"})
    (root / "src" / "c.py").unlink()
    (root / "src" / "pay.py").write_text("class Client:\n    def charge(self, n):\n        return n\n")
    (root / "src" / "refunds.py").write_text("def refund(order):\n    return order.total\n")
    commit(root, "move refund, drop c.py")
    with Memory(spec, root) as mem:
        hit = next(h for h in mem.search("checkout refund cee", limit=5) if h.text == text)
    want = {k: hit.metadata["freshness"][k] for k in ("state", "reason", "moves")}
    assert want["reason"] == "cee in src/c.py is gone"
    assert want["moves"] == [{"from": "src/pay.py", "to": "src/refunds.py", "what": "symbol",
                              "symbol": "refund", "left": False}]
    js = run_cli("about", "src/c.py", "--spec-dir", str(spec), "--json")
    assert js.returncode == 0, js.stderr
    entry = json.loads(js.stdout)["current"][0]
    assert {k: entry["freshness"].get(k) for k in want} == want

    async def main():
        async with Client(build_server(spec, root)) as c:
            res = await c.call_tool("about", {"path_or_symbol": "src/c.py"})
            assert not res.is_error, res.content
            return res.structured_content
    got = anyio.run(main)["current"][0]["freshness"]
    assert {k: got.get(k) for k in want} == want
    human = run_cli("about", "src/c.py", "--spec-dir", str(spec)).stdout
    assert "[moved: `refund` moved from src/pay.py to src/refunds.py; cee in src/c.py is gone]" \
        in human, human
    human = run_cli("about", "refund", "--spec-dir", str(spec)).stdout
    entry = next(x for x in human.splitlines() if "the `Client` class" in x)
    assert "[moved: `refund` moved from src/pay.py to src/refunds.py]" in entry, human  # not "src/pay.py is now ..."
    shown = run_cli("search", "checkout refund cee", "--spec-dir", str(spec)).stdout
    at = shown.index(text)  # search shows both marks, as context does
    assert "moved: `refund` src/pay.py -> src/refunds.py; cee in src/c.py is gone" in shown[at:at + 300]
    shown = run_cli("search", "where is `refund` now?", "--spec-dir", str(spec)).stdout.splitlines()
    at = next(i for i, x in enumerate(shown) if x.strip() == "src/pay.py: `refund` and the `Client` class")
    assert shown[at + 2].strip() == "moved: `refund` src/pay.py -> src/refunds.py", shown  # once


def test_a_file_renamed_and_mostly_rewritten_reads_moved_and_changed_in_about_and_search(tmp_path):
    # git -M still sees the rename (the long lines stay), but most lines changed: context said
    # "src/books.py changed since", the CLI's search and about only "moved"
    body = "".join(f"def step_{i}(ledger, journal_entries_of_the_day, currency_of_the_book, "
                   f"rounding_mode):\n    return {i}\n\n\n" for i in range(8))
    root, spec = project(tmp_path, {"src/ledger.py": body})
    note = "ledger posting: src/ledger.py posts every step in order"
    with Memory(spec, root) as mem:
        mem.append_gotcha(note)
    git(root, "mv", "src/ledger.py", "src/books.py")
    (root / "src/books.py").write_text(body.replace("return ", "return 1 + ")
                                       .replace("def step_0(", "def step_zero("))
    commit(root, "rename the ledger and rewrite it")
    about = run_cli("about", "src/books.py", "--spec-dir", str(spec))
    assert "[moved: src/ledger.py is now src/books.py; src/books.py changed since]" in about.stdout
    shown = run_cli("search", "ledger posting", "--spec-dir", str(spec)).stdout
    at = shown.index(note)
    assert "moved: src/ledger.py -> src/books.py; changed since: src/books.py" in shown[at:at + 300]
