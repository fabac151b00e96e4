"""The CLI as a user runs it: a subprocess, human and JSON output, one-line errors."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from conftest import run_cli
from graphmem.files.salvage import CorruptFileWarning
from graphmem import Memory
from graphmem.cli.app import build_parser

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
    """Every command, and every option it shows in --help, has help text and appears in the
    README's Command line section (hidden deprecated spellings excepted)."""
    import argparse

    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    readme = README.read_text(encoding="utf-8")
    start = readme.index("## Command line")
    section = readme[start:readme.index("\n## ", start + 3)]
    assert "graphmem --version" in section
    for name, p in sub.choices.items():
        assert p.description and len(p.description) > 10, f"command {name} has no help text"
        assert re.search(rf"^graphmem {re.escape(name)}\b", section, re.M), \
            f"README's Command line section does not show `graphmem {name}`"
        for action in p._actions:
            if action.help == argparse.SUPPRESS or isinstance(action, argparse._HelpAction):
                continue
            assert action.help and len(action.help) > 5, f"{name} {action.dest} has no help text"
            for option in action.option_strings:
                assert option in section, f"README's Command line section lacks {name} {option}"


LONG_PATH = "src/" + "/".join(f"layer{i}" for i in range(12)) + "/deeply_nested_module.py"


def test_version_prints_the_package_version():
    import importlib.metadata

    r = run_cli("--version")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == f"graphmem {importlib.metadata.version('graphmem')}"


def test_insights_human_by_default_json_on_request(spec_dir):
    _seed(spec_dir)
    Memory(spec_dir).save_session_insights(2, {
        "discoveries": {"files_understood": {"src/db.py": "connection pool"},
                        "gotchas_encountered": ["pool must be closed"]},
        "recommendations_for_next_session": ["add tests"]})
    r = run_cli("insights", "--spec-dir", str(spec_dir))
    assert r.returncode == 0, r.stderr
    with pytest.raises(json.JSONDecodeError):
        json.loads(r.stdout)
    lines = [line.strip() for line in r.stdout.splitlines()]
    assert any(line.startswith("Session 1") or " Session 1 " in line for line in lines)
    assert "what worked" in lines and "- w" in lines
    assert "src/db.py: connection pool" in lines and "- pool must be closed" in lines
    assert "- add tests" in lines
    data = json.loads(run_cli("insights", "--spec-dir", str(spec_dir), "--json").stdout)
    assert [s["session_number"] for s in data] == [1, 2]


def test_clear_json_reports_what_was_cleared(spec_dir):
    _seed(spec_dir)
    r = run_cli("clear", "--spec-dir", str(spec_dir), "--yes", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout) == {"cleared": True, "spec_dir": str(spec_dir.resolve())}
    assert Memory(spec_dir).load_gotchas() == []


def test_piped_output_keeps_long_paths_on_one_line(spec_dir):
    with Memory(spec_dir) as m:
        m.update_codebase_map({LONG_PATH: "loads every service's nested configuration at start"})
    r = run_cli("map", "--spec-dir", str(spec_dir), env={"COLUMNS": "80"})
    assert r.returncode == 0, r.stderr
    assert any(LONG_PATH in line and "loads every service's nested configuration at start" in line
               for line in r.stdout.splitlines()), r.stdout
    r = run_cli("search", "nested configuration", "--spec-dir", str(spec_dir), "--limit", "1",
                env={"COLUMNS": "80"})
    assert r.returncode == 0, r.stderr
    assert any(line.strip() == str(spec_dir / "memory" / "codebase_map.json")
               for line in r.stdout.splitlines()), r.stdout
    assert any(LONG_PATH in line for line in r.stdout.splitlines()), r.stdout


def _run_with_tty_stderr(*args: str, cwd: Path | None = None) -> tuple[int, str, str]:
    """Run the CLI with stderr on a pseudo-terminal (as in a user's shell) and stdout piped."""
    import os
    import pty
    import subprocess
    import sys

    master, slave = pty.openpty()
    try:
        proc = subprocess.Popen([sys.executable, "-m", "graphmem.cli", *args],
                                stdout=subprocess.PIPE, stderr=slave, stdin=subprocess.DEVNULL, text=True, cwd=cwd,
                                env=dict(os.environ, COLUMNS="100"))
        os.close(slave)
        slave = None
        chunks = []
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: the child closed the terminal
                break
            if not chunk:
                break
            chunks.append(chunk)
        out = proc.stdout.read()
        proc.wait(timeout=120)
    finally:
        if slave is not None:
            os.close(slave)
        os.close(master)
    return proc.returncode, out, b"".join(chunks).decode("utf-8", "replace")


def test_slow_commands_show_progress_on_a_terminal_and_keep_stdout_clean(spec_dir):
    _seed(spec_dir)
    project = spec_dir.parent.parent
    code, out, err = _run_with_tty_stderr("reindex", "--project-dir", str(project), "--json")
    assert code == 0, err
    assert json.loads(out)["specs"] == 1  # stdout holds the answer only
    assert "reindexing" in err
    code, out, err = _run_with_tty_stderr("search", "database connections", "--spec-dir",
                                          str(spec_dir), "--json", "--no-server")
    assert code == 0, err
    assert json.loads(out)[0]["kind"] == "gotcha" and "searching" in err
    r = run_cli("reindex", "--project-dir", str(project), "--json")  # not a terminal: silent
    assert r.returncode == 0 and r.stderr == ""


def test_consolidate_whole_project_and_its_deprecated_spelling(spec_dir):
    with Memory(spec_dir) as m:
        m.save_session_insights(1, {"recommendations_for_next_session": ["Pin the lockfile"]})
    project = spec_dir.parent.parent
    r = run_cli("consolidate", "--spec-dir", str(spec_dir), "--whole-project", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["path"] == str(project.resolve() / ".graphmem" / "memory_summary.md")
    assert r.stderr == ""
    r = run_cli("consolidate", "--spec-dir", str(spec_dir), "--project", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["path"].endswith(".graphmem/memory_summary.md")
    assert "--project is deprecated; use --whole-project" in r.stderr
    assert "--project " not in run_cli("consolidate", "--help").stdout.replace("--project-dir", "")
