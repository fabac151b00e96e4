"""The marked agents-md section refreshed by the hooks (issue 36): ``git commit`` runs the git
hooks, which re-render the section in the files that already carry graphmem's markers; the agent
hooks' digest does the same after a session. A file without markers is never touched, an
unchanged section is never rewritten (no mtime churn, no dirty tree), a setting turns it off."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from conftest import run_cli
from graphmem import Memory
from graphmem.rules import agents_md as am
from test_agent_hooks import digested, install, session
from test_agent_hooks import proj as proj  # the fixture
from test_code_freshness import PAY, commit, git

OTHER = "# Notes for agents\n\nRun the tests with pytest -q.\n"


def repo(tmp_path: Path) -> Path:
    root = tmp_path / "shop"
    (root / "src").mkdir(parents=True)
    (root / "src" / "pay.py").write_text(PAY)
    git(root, "init", "-q")
    git(root, "config", "user.email", "t@example.invalid")
    git(root, "config", "user.name", "t")
    commit(root, "start")
    return root


def stamp(path: Path) -> tuple[int, int, bytes]:
    st = path.stat()
    return st.st_ino, st.st_mtime_ns, path.read_bytes()


def wait_for(path: Path, text: str, timeout: float = 120.0) -> str:
    """The hooks run detached: wait until ``path`` holds ``text``."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        body = path.read_text()
        if text in body:
            return body
        time.sleep(0.3)
    raise AssertionError(f"{path.name} never got {text!r}; it holds:\n{path.read_text()}")


def test_a_commit_refreshes_the_marked_section_and_nothing_else(tmp_path):
    root = repo(tmp_path)
    with Memory(None, root) as m:
        m.append_gotcha("Never call refund() twice for one order; it double-pays")
        m.agents_md(root / "AGENTS.md")
    (root / "CLAUDE.md").write_text(OTHER)  # no markers: never touched
    rules = root / ".cursor" / "rules"
    rules.mkdir(parents=True)
    (rules / "style.mdc").write_text("---\nglobs: src/**/*.py\n---\n- Prefer dataclasses\n")
    commit(root, "memory and agent files")
    out = run_cli("hooks", "install", "--project-dir", str(root), "--json")
    assert out.returncode == 0, out.stderr
    claude, mdc = stamp(root / "CLAUDE.md"), stamp(rules / "style.mdc")

    with Memory(None, root) as m:
        m.append_gotcha("Avoid float money in charge(); use Decimal cents")
    commit(root, "learned about charge")  # post-commit: anchors, then the section, detached
    body = wait_for(root / "AGENTS.md", "Decimal cents")
    assert "double-pays" in body and body.count(am.BEGIN) == 1
    assert stamp(root / "CLAUDE.md") == claude and stamp(rules / "style.mdc") == mdc
    assert not (root / "GEMINI.md").exists() and not (root / ".claude").exists()


def test_unchanged_memory_leaves_the_file_unwritten_and_the_tree_clean(tmp_path):
    root = repo(tmp_path)
    head = "# Agents\n\nHand-written rules stay.\n\n"
    (root / "AGENTS.md").write_text(head)
    with Memory(None, root) as m:
        m.append_pattern("Use the payments client for every charge")
        m.agents_md(root / "AGENTS.md")
        commit(root, "section")
        before = stamp(root / "AGENTS.md")
        time.sleep(0.05)
        got = m.refresh_agents_md()
        assert got == {"refreshed": [], "unchanged": ["AGENTS.md"], "failed": [], "off": False}
    assert stamp(root / "AGENTS.md") == before  # same inode, mtime and bytes: not written
    assert git(root, "status", "--porcelain") == ""
    assert (root / "AGENTS.md").read_text().startswith(head)

    p = run_cli("agents-md", "--refresh", "--json", "--project-dir", str(root))
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["unchanged"] == ["AGENTS.md"]
    assert stamp(root / "AGENTS.md") == before


def test_refresh_is_off_by_setting_and_refuses_bad_markers_losing_nothing(tmp_path, monkeypatch):
    root = repo(tmp_path)
    with Memory(None, root) as m:
        m.append_gotcha("Never log card numbers in pay.py")
        m.agents_md(root / "AGENTS.md")
    broken = root / "CLAUDE.md"
    broken.write_text(f"{am.BEGIN}\none\n{am.END}\n{am.BEGIN}\ntwo\n{am.END}\n")
    before = stamp(root / "AGENTS.md")
    with Memory(None, root) as m:
        m.append_gotcha("Beware: refunds over 1000 need a second approval")
    monkeypatch.setenv("GRAPHMEM_AGENTS_MD_REFRESH", "false")
    p = run_cli("agents-md", "--refresh", "--json", "--project-dir", str(root))
    assert p.returncode == 0 and json.loads(p.stdout)["off"] is True
    assert stamp(root / "AGENTS.md") == before

    monkeypatch.delenv("GRAPHMEM_AGENTS_MD_REFRESH")
    p = run_cli("agents-md", "--refresh", "--project-dir", str(root))
    assert p.returncode == 1
    assert "CLAUDE.md" in p.stderr and "markers" in p.stderr and "Traceback" not in p.stderr
    assert broken.read_text().count(am.BEGIN) == 2  # left as it was
    assert "second approval" in (root / "AGENTS.md").read_text()  # the good file still refreshed
    p = run_cli("agents-md", "--refresh", "--write", "AGENTS.md", "--project-dir", str(root))
    assert p.returncode != 0 and "--refresh" in p.stderr


def test_a_linked_agent_file_is_not_followed(tmp_path):
    root = repo(tmp_path)
    outside = tmp_path / "elsewhere.md"
    outside.write_text(f"{am.BEGIN}\nold\n{am.END}\n")
    os.symlink(outside, root / "AGENTS.md")
    with Memory(None, root) as m:
        m.append_gotcha("Never retry a declined charge")
        assert m.refresh_agents_md()["refreshed"] == []
    assert outside.read_text() == f"{am.BEGIN}\nold\n{am.END}\n"


def test_the_agent_hooks_digest_refreshes_the_section(proj):
    with Memory(None, proj) as m:
        m.agents_md(proj / "CLAUDE.md")
    (proj / "AGENTS.md").write_text(OTHER)
    agents = stamp(proj / "AGENTS.md")
    install(proj)
    session(proj, "s-ref", "Make refund() round half-even in the payments module",
            [("Bash", {"command": "pytest tests/test_pay.py"}, "Exit code 1"),
             ("Bash", {"command": "pytest tests/test_pay.py -p no:randomly"}, None)])
    digested(proj, "s-ref")
    wait_for(proj / "CLAUDE.md", "no:randomly")
    assert stamp(proj / "AGENTS.md") == agents
