"""Connection settings are checked when loaded: one line naming the variable, nothing written."""

from __future__ import annotations

import pytest

from graphmem import compat
from graphmem.errors import ConfigError
from graphmem.settings import Settings

from conftest import run_cli


@pytest.mark.parametrize("url, why", [
    ("localhost:6379", "must start with redis://"), ("http://db:6379", "scheme 'http'"),
    ("redis://", "names no host"), ("redis://db:99999", "port"), ("redis://db:port", "port"),
    ("redis://:@db:6379", "empty password"), ("unix://", "socket path")])
def test_a_bad_falkordb_url_is_refused_naming_the_variable(url, why):
    with pytest.raises(ConfigError, match=f"GRAPHMEM_FALKORDB_URL.*{why}"):
        Settings.load(env={"GRAPHMEM_FALKORDB_URL": url})


def test_good_urls_and_ports_load():
    for url in ("redis://db:6379", "redis://:s3cret@db.example.com:6380/0", "rediss://db",
                "unix:///run/falkordb.sock"):
        assert Settings.load(env={"GRAPHMEM_FALKORDB_URL": url}).graph.falkordb_url == url
    with pytest.raises(ConfigError, match="GRAPHITI_FALKORDB_PORT"):
        Settings.load(env={"GRAPHITI_FALKORDB_PORT": "70000"})
    with pytest.raises(ConfigError, match="GRAPHITI_FALKORDB_HOST"):
        Settings.load(env={"GRAPHITI_FALKORDB_HOST": "redis://db"})


def test_the_password_is_never_echoed():
    with pytest.raises(ConfigError) as info:
        Settings.load(env={"GRAPHMEM_FALKORDB_URL": "redis://:hunter2@db:notaport"})
    assert "hunter2" not in str(info.value)


def test_a_write_with_a_bad_url_writes_no_file(spec_dir, monkeypatch):
    monkeypatch.setenv("GRAPHMEM_GRAPH", "on")
    monkeypatch.setenv("GRAPHMEM_FALKORDB_URL", "localhost:6379")
    with pytest.raises(ConfigError, match="GRAPHMEM_FALKORDB_URL"):
        compat.append_gotcha(spec_dir, "never written")
    assert not (spec_dir / "memory" / "gotchas.md").exists()


@pytest.mark.parametrize("server", ["off", "auto"])
def test_the_cli_prints_one_line_naming_the_variable(spec_dir, server):
    env = {"GRAPHMEM_GRAPH": "on", "GRAPHMEM_FALKORDB_URL": "localhost:6379",
           "GRAPHMEM_SEARCH_SERVER": server}
    for args in (("search", "anything", "--spec-dir", str(spec_dir)),
                 ("summary", "--spec-dir", str(spec_dir))):
        r = run_cli(*args, env=env)
        assert r.returncode != 0 and "Traceback" not in r.stderr, r.stderr
        assert len(r.stderr.strip().splitlines()) == 1 and "GRAPHMEM_FALKORDB_URL" in r.stderr, r.stderr
