"""Shared fixtures: every test gets its own GRAPHMEM_HOME and a clean provider environment."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

os.environ["GRAPHITI_TELEMETRY_ENABLED"] = "false"

_PROVIDER_VARS = [k for k in os.environ if k.startswith(("GRAPHMEM_", "GRAPHITI_", "OPENAI_",
                                                         "ANTHROPIC_", "VOYAGE_", "AZURE_OPENAI_",
                                                         "OLLAMA_"))]


@pytest.fixture(autouse=True)
def isolated_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A private GRAPHMEM_HOME, no stray provider keys, and a cwd with no graphmem.toml or .env."""
    for key in _PROVIDER_VARS:
        if key != "GRAPHITI_TELEMETRY_ENABLED":
            monkeypatch.delenv(key, raising=False)
    home = tmp_path / "gm-home"
    monkeypatch.setenv("GRAPHMEM_HOME", str(home))
    monkeypatch.setenv("GRAPHITI_TELEMETRY_ENABLED", "false")
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    return home


@pytest.fixture
def spec_dir(tmp_path: Path) -> Path:
    """``<tmp>/project/auto-claude/specs/001-feature`` (project = two levels up, as in the reference)."""
    d = tmp_path / "project" / "auto-claude" / "specs" / "001-feature"
    d.mkdir(parents=True)
    return d


def run_cli(*args: str, env: dict | None = None, input: str | None = None, cwd: Path | None = None):
    """Run ``graphmem`` as a subprocess with the test's environment."""
    import subprocess

    full_env = dict(os.environ)
    full_env.update(env or {})
    return subprocess.run([sys.executable, "-m", "graphmem.cli", *args], capture_output=True,
                          text=True, env=full_env, input=input, cwd=cwd, timeout=120)
