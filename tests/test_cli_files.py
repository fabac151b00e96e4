"""The CLI as a user runs it: a subprocess, human and JSON output, one-line errors."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from conftest import run_cli
from graphmem.files.spec_store import CorruptFileWarning
from graphmem import Memory
from graphmem.cli import build_parser

README = Path(__file__).resolve().parents[1] / "README.md"


def _seed(spec: Path) -> None:
    m = Memory(spec)
    m.save_session_insights(1, {"subtasks_completed": ["s1"], "what_worked": ["w"]})
    m.update_codebase_map({"src/auth.py": "JWT validation"})
    m.append_gotcha("Close DB connections in workers")
    m.append_pattern("Use dependency injection for clients")


def test_summary_human_and_json(spec_dir):
    _seed(spec_dir)
    r = run_cli("summary", "--spec-dir", str(spec_dir))
    assert r.returncode == 0, r.stderr
    assert "Sessions: 1" in r.stdout and "Gotchas: 1" in r.stdout
    r = run_cli("summary", "--spec-dir", str(spec_dir), "--json")
    data = json.loads(r.stdout)
    assert data["total_files_mapped"] == 1 and data["recent_insights"][0]["session_number"] == 1


def test_list_commands(spec_dir):
    _seed(spec_dir)
    assert "Close DB connections in workers" in run_cli("gotchas", "--spec-dir", str(spec_dir)).stdout
    assert json.loads(run_cli("patterns", "--spec-dir", str(spec_dir), "--json").stdout) == [
        "Use dependency injection for clients"]
    assert json.loads(run_cli("map", "--spec-dir", str(spec_dir), "--json").stdout) == {
        "src/auth.py": "JWT validation"}
    assert json.loads(run_cli("insights", "--spec-dir", str(spec_dir), "--json").stdout)[0]["what_worked"] == ["w"]


def test_clear_asks_and_yes_skips(spec_dir):
    _seed(spec_dir)
    r = run_cli("clear", "--spec-dir", str(spec_dir))  # no tty: refuses
    assert r.returncode != 0 and "--yes" in r.stderr
    assert Memory(spec_dir).load_gotchas()
    r = run_cli("clear", "--spec-dir", str(spec_dir), "--yes")
    assert r.returncode == 0 and Memory(spec_dir).load_gotchas() == []


def test_user_errors_are_one_line_without_traceback(tmp_path):
    r = run_cli("summary", "--spec-dir", str(tmp_path / "missing"))
    assert r.returncode != 0
    assert r.stderr.strip().count("\n") == 0 and "Traceback" not in r.stderr
    assert "spec folder not found" in r.stderr


def test_doctor_lists_corrupt_files(spec_dir):
    _seed(spec_dir)
    bad = spec_dir / "memory" / "session_insights" / "session_001.json"
    bad.write_text("{")
    with pytest.warns(CorruptFileWarning):
        Memory(spec_dir).load_all_insights()  # moves it aside
    r = run_cli("doctor", "--spec-dir", str(spec_dir), "--json")
    report = json.loads(r.stdout)
    assert any("session_001.json.corrupt-" in row["detail"] for row in report["sections"]["files"])


def test_every_command_has_help_and_is_in_readme():
    parser = build_parser()
    sub = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction")
    readme = README.read_text(encoding="utf-8")
    for name, p in sub.choices.items():
        assert p.description and len(p.description) > 10, f"command {name} has no help text"
        assert re.search(rf"graphmem {re.escape(name)}\b", readme), f"README does not show `graphmem {name}`"
