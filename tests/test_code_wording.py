"""What `context`, `about` and `graphmem search` say about code that moved, as a user reads it:
a function moved out of a file that was then deleted is said to have moved ("`refund` moved from
src/pay.py (deleted) to src/refunds.py"), and "a.py is now b.py" is kept for a file that was
renamed (git mv, with or without an edit). Real git repositories built here; the CLI as a
subprocess and the MCP server through its client."""

from __future__ import annotations

import json

import anyio
from mcp import Client

from conftest import run_cli
from graphmem import Memory
from graphmem.serve.mcp_server import build_server
from test_code_freshness import commit, git, project

PAY = ("def refund(order):\n    return order.total\n\n\n"
       "def charge(n):\n    return n\n\n\n"
       "def capture(n):\n    return n * 2\n\n\n"
       "def void(n):\n    return 0\n")
UTIL = "".join(f"def helper_{i}(x):\n    return x + {i}\n\n\n" for i in range(6))
MOVED = "refund() in src/pay.py must run after the ledger write"
SYMBOL_ONLY = "`helper_3` caches its answer per process"


def split_and_rename(tmp_path):
    """refund moves to src/refunds.py and src/pay.py is deleted (the rest goes to
    src/charges.py); src/util.py is renamed to src/tools.py and edited in the same commit."""
    root, spec = project(tmp_path, {"src/pay.py": PAY, "src/util.py": UTIL})
    with Memory(spec, root) as mem:
        mem.append_gotcha(MOVED)
        mem.append_gotcha(SYMBOL_ONLY)
    (root / "src" / "refunds.py").write_text("def refund(order):\n    return order.total\n")
    (root / "src" / "charges.py").write_text(PAY.split("\n\n\n", 1)[1].replace("n * 2", "n * 3"))
    (root / "src" / "pay.py").unlink()
    git(root, "mv", "src/util.py", "src/tools.py")
    (root / "src" / "tools.py").write_text(UTIL + "def helper_extra(x):\n    return x\n")
    commit(root, "split pay.py, rename util.py")
    return root, spec


SAID_MOVED = "`refund` moved from src/pay.py (deleted) to src/refunds.py"


def test_a_function_moved_out_of_a_deleted_file_is_said_to_have_moved(tmp_path):
    root, spec = split_and_rename(tmp_path)
    with Memory(spec, root) as mem:
        ctx = mem.context("refund after the ledger write; helper caching", max_tokens=1500)
        about = mem.about("refund")
    line = next(x for x in ctx.splitlines() if "must run after the ledger write" in x)
    assert SAID_MOVED in line, line
    assert "src/pay.py is now" not in ctx
    assert about["current"][0]["freshness"]["moves"][0].get("renamed") is None
    human = run_cli("about", "refund", "--project-dir", str(root))
    assert human.returncode == 0, human.stderr
    assert f"[moved: {SAID_MOVED}]" in human.stdout and "src/pay.py is now" not in human.stdout
    shown = run_cli("search", "refund ledger write", "--project-dir", str(root))
    assert "moved: `refund` src/pay.py (deleted) -> src/refunds.py" in shown.stdout, shown.stdout

    async def main():
        async with Client(build_server(spec, root)) as c:
            res = await c.call_tool("get_context", {"task": "refund after the ledger write"})
            return res.content[0].text
    assert SAID_MOVED in anyio.run(main)


def test_a_renamed_file_is_still_said_to_be_renamed_for_a_memory_naming_only_a_function(tmp_path):
    root, spec = split_and_rename(tmp_path)
    with Memory(spec, root) as mem:
        ctx = mem.context("helper_3 caching per process", max_tokens=1500)
    line = next(x for x in ctx.splitlines() if "caches its answer" in x)
    assert "src/util.py is now src/tools.py" in line and "(deleted)" not in line, line
    got = run_cli("about", "helper_3", "--project-dir", str(root), "--json")
    assert got.returncode == 0, got.stderr
    moves = json.loads(got.stdout)["current"][0]["freshness"]["moves"]
    assert moves == [{"from": "src/util.py", "to": "src/tools.py", "what": "symbol",
                      "symbol": "helper_3", "left": True, "renamed": True}]
