"""`python -m graphmem.demo` runs end to end as CI would run `make demo`, and does what it says."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path


def _demo(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "graphmem.demo", *args], cwd=cwd, env=dict(os.environ),
                          capture_output=True, text=True, timeout=300)


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_demo_runs_the_whole_scenario(tmp_path: Path):
    root = tmp_path / "demo"
    run = _demo("--dir", str(root), cwd=tmp_path)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-4000:]
    report = json.loads((root / "demo-report.json").read_text())
    assert report["ok"] is True
    steps = {s["name"]: s for s in report["steps"]}
    assert all(s["ok"] for s in steps.values())

    # The graph was really on: the embedded FalkorDB started, took the writes, and was stopped.
    assert steps["start embedded FalkorDB"]["result"].startswith("unix://")
    for name in ("save shopfront", "save fleet-telemetry"):
        assert steps[name]["data"]["graph"] == ["written"], steps[name]
        assert steps[name]["data"]["sessions"] == 3 and steps[name]["data"]["turns"] == 12
    state = root / "home" / "falkordb" / "server.json"
    if state.exists():
        assert not _pid_alive(json.loads(state.read_text())["pid"])

    # The meaning-only search found a memory of the duplicate-webhook story without sharing a word.
    meaning = steps["search: meaning only"]["data"]
    assert meaning["shared_words"] == [] and 1 <= meaning["rank"] <= 3
    path = steps["search: exact file path"]["data"]
    assert path["hits"][path["rank"] - 1]["kind"] == "file"
    cross = steps["search: cross-project"]["data"]
    assert {h["project"] for h in cross["hits"]} >= {"shopfront", "fleet-telemetry"}

    # The files it says it wrote exist, in the reference layout.
    for project, spec in (("shopfront", "001-checkout"), ("fleet-telemetry", "003-ingest-pipeline")):
        mem = root / "projects" / project / "auto-claude" / "specs" / spec / "memory"
        assert len(list((mem / "session_insights").glob("session_*.json"))) == 3
        assert (mem / "gotchas.md").read_text().count("\n- ") >= 3
        assert json.loads((mem / "codebase_map.json").read_text())["_metadata"]["total_files"] >= 6
        assert str(mem) in " ".join(run.stdout.split())  # printed where its files are
    assert "webhook" in (root / "context.md").read_text().lower()
    assert steps["consolidate past sessions"]["data"]["summaries"]
    assert steps["doctor"]["data"]["errors"] == 0

    # Given only the spec folder, the CLI finds the demo's project (issue 15: it printed
    # "No matching memories." and "No sessions." without --project-dir).
    spec = root / "projects" / "shopfront" / "auto-claude" / "specs" / "001-checkout"
    env = {**os.environ, "GRAPHMEM_HOME": str(root / "home"), "GRAPHMEM_GRAPH": "off"}
    for args, expect in ((("search", "stripe webhook retries"), "webhook"), (("sessions",), "stripe webhook")):
        out = subprocess.run([sys.executable, "-m", "graphmem.cli", *args, "--spec-dir", str(spec)],
                             env=env, capture_output=True, text=True, timeout=120, cwd=tmp_path)
        assert out.returncode == 0 and expect in out.stdout.lower(), out.stdout + out.stderr
    assert "Demo finished" in run.stdout


def test_demo_never_wipes_a_folder_it_did_not_make(tmp_path: Path):
    precious = tmp_path / "mine"
    precious.mkdir()
    (precious / "notes.txt").write_text("keep me")
    run = _demo("--dir", str(precious), "--no-graph", cwd=tmp_path)
    assert run.returncode == 1
    assert "was not made by the demo" in run.stdout
    assert (precious / "notes.txt").read_text() == "keep me"
