"""History stays history (issue 34): a retired or superseded memory stays out of default results
after ``consolidate``, ``reindex``, ``doctor --fix``, a graph rebuild and a team pull (the CLI as
a subprocess, the embedded FalkorDB, the compose server line for the team)."""

from __future__ import annotations

from pathlib import Path

from conftest import run_cli
from test_team import _mem, team  # noqa: F401  (team: the fixture)
from graphmem import Memory
from test_code_freshness import project

OLD = "The upload limit of the API gateway is 10 MB for every tenant"
NEW = "The upload limit of the API gateway is 25 MB for every tenant"
GONE = "Invoices are rendered by the legacy PDF service on port 8081"
QUERY = "upload limit API gateway tenant invoices legacy PDF service"


def write_history(mem: Memory) -> None:
    """A session whose gotchas are retired (GONE) and superseded (OLD by NEW), and a current one."""
    mem.save_session_insights(1, {"discoveries": {"gotchas_encountered": [OLD, GONE]},
                                  "what_worked": ["Stream uploads to the gateway in chunks"]})
    hits = {h.text: h for h in mem.search(QUERY, limit=10)}
    mem.retire(hits[GONE].id, "the PDF service was replaced")
    mem.append_gotcha(OLD)
    old = next(h for h in mem.search(OLD, limit=10, kinds=["gotcha"]) if h.text == OLD
               and h.source.endswith("gotchas.md"))
    mem.supersede(old.id, NEW, reason="raised in the new plan")


def shown(mem: Memory) -> tuple[list[str], str]:
    hits = [h.text for h in mem.search(QUERY, limit=20, scope="project")]
    return hits, mem.context(QUERY, max_tokens=2000)


def assert_history_hidden(hits: list[str], block: str) -> None:
    assert NEW in hits and GONE not in hits
    assert GONE not in block and NEW in block


def test_after_consolidate(tmp_path):
    root, spec = project(tmp_path, {"app.py": "X = 1\n"})
    with Memory(spec, root) as mem:
        write_history(mem)
        mem.save_session_insights(2, {"discoveries": {"gotchas_encountered": [NEW]}})
        report = mem.consolidate()
        hits, block = shown(mem)
    summary = Path(report["path"]).read_text()
    assert NEW in summary and GONE not in summary  # the summary says what holds now
    assert_history_hidden(hits, block)


def test_after_reindex_and_doctor_fix(tmp_path):
    root, spec = project(tmp_path, {"app.py": "X = 1\n"})
    with Memory(spec, root) as mem:
        write_history(mem)
    for args in (["reindex", "--project-dir", str(root)],
                 ["doctor", "--fix", "--spec-dir", str(spec), "--project-dir", str(root)]):
        cli = run_cli(*args)
        assert cli.returncode in (0, 1), cli.stderr  # doctor exits 1 on a warning row
        with Memory(spec, root) as mem:
            assert_history_hidden(*shown(mem))
        found = run_cli("search", QUERY, "--project-dir", str(root), "--scope", "project")
        assert found.returncode == 0 and GONE not in found.stdout and NEW in found.stdout


def test_after_a_graph_rebuild(tmp_path, graph_on):
    root, spec = project(tmp_path, {"app.py": "X = 1\n"})
    with Memory(spec, root) as mem:
        write_history(mem)
        counts = mem.reindex()  # the graph is dropped and written again from the files
        assert counts["graph"] == "written"
        assert_history_hidden(*shown(mem))
    # the local index lost: rebuilt from the files and the graph, history must not come back
    for f in graph_on.glob("index.sqlite3*"):
        f.unlink()
    with Memory(spec, root) as mem:
        assert_history_hidden(*shown(mem))


def test_after_a_team_pull(team):
    srv, repos, envs = team
    with _mem(repos, "a", envs, "001-a") as a:
        write_history(a)
        mine = [h.text for h in a.search(QUERY, limit=20, scope="project")]
    with _mem(repos, "b", envs, "001-a") as b:  # B's clone has no copy of A's files
        theirs = [h.text for h in b.search(QUERY, limit=20, scope="project")]
        block = b.context(QUERY, max_tokens=2000)
    assert NEW in mine and GONE not in mine
    assert_history_hidden(theirs, block)
