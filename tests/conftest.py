"""Shared fixtures: every test gets its own GRAPHMEM_HOME and a clean provider environment."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

os.environ["GRAPHITI_TELEMETRY_ENABLED"] = "false"
# graphiti-core calls python-dotenv's load_dotenv() when imported, which loads the first .env
# found above its own folder (or the current one): a developer's .env would leak API keys and
# GRAPHMEM_* values into the tests and their subprocesses. A .env named by GRAPHMEM_ENV_FILE is
# still read (config_sources uses dotenv_values, which this switch does not affect).
os.environ["PYTHON_DOTENV_DISABLED"] = "1"

from graphmem.cli.search_client import PREFIXES as _PREFIXES


@pytest.fixture(autouse=True)
def isolated_env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """A private GRAPHMEM_HOME, no stray provider keys, and a cwd with no graphmem.toml or .env.

    The variables are looked up at every test (not once at import), so a variable that an
    earlier test set by hand is removed here and restored afterwards by monkeypatch. An embedded
    FalkorDB left running in the test's home is stopped when the test ends.
    """
    for key in [k for k in os.environ if k.startswith(_PREFIXES)]:
        monkeypatch.delenv(key, raising=False)
    home = tmp_path / "gm-home"
    monkeypatch.setenv("GRAPHMEM_HOME", str(home))
    monkeypatch.setenv("GRAPHITI_TELEMETRY_ENABLED", "false")
    # A CLI search would start a warm search server per test home; tests of it turn it on.
    monkeypatch.setenv("GRAPHMEM_SEARCH_SERVER", "off")
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    yield home
    _stop_servers_under(tmp_path)



@pytest.fixture
def graph_on(monkeypatch: pytest.MonkeyPatch, isolated_env: Path):
    """The graph on, with the offline wordllama embedder; yields the test's home and stops its
    embedded FalkorDB afterwards."""
    from graphmem import Settings
    from graphmem.graph import server

    monkeypatch.setenv("GRAPHMEM_GRAPH", "on")
    monkeypatch.setenv("GRAPHMEM_LOCAL_EMBEDDING_MODEL", "wordllama")
    yield isolated_env
    server.EmbeddedServer(Settings.load()).stop()

def _stop_servers_under(root: Path) -> None:
    """Stop every embedded FalkorDB whose data folder lies under ``root`` (tests own their homes)."""
    pid_files = list(root.rglob("falkordb/server.json")) if root.exists() else []
    if not pid_files:
        return
    from graphmem.graph.server import EmbeddedServer
    from graphmem.settings import Settings

    for pid_file in pid_files:
        try:
            EmbeddedServer(Settings.load(env={"GRAPHMEM_HOME": str(pid_file.parent.parent)})).stop()
        except Exception:  # a server already gone is what we want
            pass


@pytest.fixture
def tune_code():
    """Code memory's knobs for one test: ``tune_code(untracked_ttl=0.0)`` puts the tuning in
    force with those fields replaced (``graphmem.code.code_tuning``); the one before is back
    after the test."""
    from dataclasses import replace

    from graphmem.code import code_tuning

    before = code_tuning.current()
    yield lambda **changes: code_tuning.use(replace(code_tuning.current(), **changes))
    code_tuning.use(before)


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


def _home_under(proc: Path, base: Path) -> bool:
    """Whether a process runs with a GRAPHMEM_HOME under ``base`` (a search server of a test)."""
    try:
        env = (proc / "environ").read_bytes().split(b"\0")
    except OSError:
        return False
    return any(v.startswith(b"GRAPHMEM_HOME=" + str(base).encode()) for v in env)


def pytest_sessionfinish(session, exitstatus):
    """Last line of defence: no FalkorDB or search server of this run's tests outlives the run."""
    base = session.config._tmp_path_factory.getbasetemp() if hasattr(session.config, "_tmp_path_factory") else None
    if base is None:
        return
    leftovers = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            cmd = (proc / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if "redis-server" in cmd and str(base) in cmd or "search-server" in cmd and \
                _home_under(proc, base):
            leftovers.append((int(proc.name), cmd))
    for pid, _ in leftovers:
        try:
            os.kill(pid, 9)
        except OSError:
            pass
    if leftovers:
        print(f"\nconftest: stopped {len(leftovers)} server(s) a test left running:")
        for _, cmd in leftovers[:10]:
            print("  ", cmd[-160:])


_SLOW = Path(__file__).with_name("slow_tests.txt")
_SECONDS = Path(__file__).with_name("file_seconds.txt")


def _data_lines(path: Path) -> list[str]:
    return [line.strip() for line in path.read_text().splitlines()
            if line.strip() and not line.startswith("#")] if path.exists() else []


def pytest_collection_modifyitems(config, items):
    """Mark ``slow`` the tests tests/slow_tests.txt names (measured; `make slow-list` rewrites it),
    so that `make test-fast` (``-m "not slow"``) runs the rest in under a minute; and order the
    test files longest first (tests/file_seconds.txt; a file not measured yet first of all), each
    file's tests in their own order, so that the xdist workers (one file each at a time) never
    start a long file last and finish it alone."""
    names = set(_data_lines(_SLOW))
    seconds = {m: float(t) for m, _, t in (line.partition(" ") for line in _data_lines(_SECONDS))}
    for item in items:
        if f"{item.module.__name__.rpartition('.')[2]}::{item.originalname}" in names:
            item.add_marker(pytest.mark.slow)
    if os.environ.get("PYTEST_XDIST_WORKER"):  # one process keeps the files' own order: long
        # files first left it past 1,024 open descriptors before a select() (test_compat_write_behind)
        items.sort(key=lambda item: -seconds.get(item.module.__name__.rpartition(".")[2], 1e9))
