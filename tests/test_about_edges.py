"""``about`` as a user meets it: a folder is refused with what to use instead (it answered
"nothing known" about a folder whose files have memories), through the API, the CLI and MCP."""

from __future__ import annotations

import pytest

from conftest import run_cli
from graphmem import Memory
from graphmem.errors import ValidationError
from graphmem.serve.mcp_server import build_server
from test_code_freshness import PAY, project
from test_mcp import _session, _text


def test_about_a_folder_says_it_is_one_and_what_to_use(tmp_path):
    root, spec = project(tmp_path, {"src/pay.py": PAY})
    with Memory(spec, root) as mem:
        mem.append_gotcha("`refund` must run after the ledger write")
        for folder in ("src/", "./src", str(root / "src"), "."):
            with pytest.raises(ValidationError) as err:
                mem.about(folder)
            assert err.value.field == "path_or_symbol" and "is a folder" in str(err.value)
        assert [e["kind"] for e in mem.about("src/pay.py")["current"]] == ["gotcha"]
    cli = run_cli("about", "src/", "--project-dir", str(root))
    assert cli.returncode == 2 and cli.stdout == ""
    assert "path_or_symbol: src is a folder" in cli.stderr and "--file src" in cli.stderr

    async def steps(c):
        result = await c.call_tool("about", {"path_or_symbol": "src/"})
        assert result.is_error and 'files=["src"]' in _text(result)
        tools = {t.name: t for t in (await c.list_tools()).tools}
        assert "folder" in tools["about"].description  # said before the call, too
    _session(build_server(spec), steps)


def test_about_says_superseded_by_once(tmp_path):
    # "[superseded by X at T: replaced by X]": the default reason repeated the "by"
    root, spec = project(tmp_path, {"src/pay.py": PAY})
    with Memory(spec, root) as mem:
        mem.append_gotcha("`refund` retries 3 times")
        old = mem.search("refund retries", limit=1)[0].id
        new = mem.supersede(old, "`refund` retries 5 times")["new_id"]
    cli = run_cli("about", "refund", "--project-dir", str(root))
    assert cli.returncode == 0, cli.stderr
    line = next(x for x in cli.stdout.splitlines() if old in x)
    assert f"[superseded by {new} at " in line and "replaced by" not in line, line


def test_about_lists_memories_whose_code_is_gone_apart_from_the_current_ones(tmp_path):
    """"Current" reads as "true of the code now": a memory whose code is gone (not retired)
    comes under its own key and heading, the same in the API, the CLI's text and --json, MCP."""
    import json

    from test_code_freshness import commit

    root, spec = project(tmp_path, {"src/pay.py": PAY, "src/audit.py": "def audit(x):\n    return x\n"})
    with Memory(spec, root) as mem:
        mem.append_gotcha("`refund` must run after the ledger write")
        mem.append_gotcha("`audit` of src/pay.py refunds is nightly")
        mem.append_gotcha("`audit` is slow on big ledgers")
    (root / "src" / "audit.py").unlink()
    commit(root, "drop the audit")
    with Memory(spec, root) as mem:
        ans = mem.about("src/pay.py")
        gone_only = mem.about("audit")
    # half its code is still there: current, saying what is gone (no stale mark: issue 34)
    assert [(e["text"], e["freshness"]["state"]) for e in ans["current"]] == [
        ("`audit` of src/pay.py refunds is nightly", "current"),
        ("`refund` must run after the ledger write", "current")] and ans["gone"] == []
    assert [e["text"] for e in gone_only["gone"]] == ["`audit` is slow on big ledgers"]
    assert [e["text"] for e in gone_only["current"]] == ["`audit` of src/pay.py refunds is nightly"]
    human = run_cli("about", "audit", "--project-dir", str(root))
    assert human.returncode == 0, human.stderr
    lines = human.stdout.splitlines()
    assert lines[1] == "Current (1):" and "src/audit.py is gone" in lines[2], lines
    assert lines[3] == "Code gone (1): not retired, but the code they describe is no longer " \
        "in the tree", lines
    assert lines[4].startswith("  [gone] gotcha: `audit` is slow on big ledgers"), lines
    js = json.loads(run_cli("about", "audit", "--project-dir", str(root), "--json").stdout)
    assert [e["id"] for e in js["gone"]] == [e["id"] for e in gone_only["gone"]]
    assert [e["id"] for e in js["current"]] == [e["id"] for e in gone_only["current"]]

    async def steps(c):
        got = json.loads(_text(await c.call_tool("about", {"path_or_symbol": "audit"})))
        assert [e["id"] for e in got["gone"]] == [e["id"] for e in gone_only["gone"]]
        assert len(got["current"]) == 1
    _session(build_server(spec), steps)


def test_about_a_symbol_removed_outside_any_session_says_so_without_a_none(tmp_path):
    """A function removed by a commit no session recorded, and a gotcha written after it with no
    session: the removal reads as a sentence, and no "(session None)" is shown."""
    from test_code_freshness import commit

    root, spec = project(tmp_path, {"src/pay.py": PAY})
    with Memory(spec, root) as mem:
        mem.append_gotcha("`refund` must run after the ledger write")
    (root / "src" / "pay.py").write_text("class Client:\n    def charge(self, n):\n        return n\n")
    commit(root, "drop refund")
    with Memory(spec, root) as mem:
        mem.append_gotcha("refunds are handled by the payment provider now")  # the commit's work
        ans = mem.about("refund")
    assert ans["removed"] and ans["removed"][0]["sessions"] == [], ans["removed"]
    human = run_cli("about", "refund", "--project-dir", str(root))
    assert human.returncode == 0, human.stderr
    assert "Removed: refund (src/pay.py) by a session graphmem did not record at commit" \
        in human.stdout, human.stdout
    assert "None" not in human.stdout and "by session an" not in human.stdout, human.stdout
    assert "  gotcha: refunds are handled by the payment provider now" in human.stdout


def test_about_a_name_the_project_does_not_have_says_so_a_typo_shows(tmp_path):
    import json

    root, spec = project(tmp_path, {"src/pay.py": PAY})
    with Memory(spec, root) as mem:
        mem.append_gotcha("`refund` must run after the ledger write")
        typo = mem.about("refnd")
        path = mem.about("src/pya.py")
        known = mem.about("Client.charge")  # defined, no memory yet: nothing to add
        found = mem.about("refund")
    assert typo["notes"] == ["nothing is known about refnd: no file of the project defines it "
                             "and no memory names it"]
    assert path["notes"] == ["nothing is known about src/pya.py: it is not in the project and "
                             "no memory names it"]
    assert known["notes"] == [] and known["current"] == [] and found["notes"] == []
    human = run_cli("about", "refnd", "--project-dir", str(root))
    assert human.returncode == 0, human.stderr
    assert human.stdout.splitlines()[-1] == f"Note: {typo['notes'][0]}.", human.stdout
    js = json.loads(run_cli("about", "src/pya.py", "--project-dir", str(root), "--json").stdout)
    assert js["notes"] == path["notes"]

    async def steps(c):
        got = json.loads(_text(await c.call_tool("about", {"path_or_symbol": "refnd"})))
        assert got["notes"] == typo["notes"]
    _session(build_server(spec), steps)
