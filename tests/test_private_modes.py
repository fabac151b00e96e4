"""Private by default: graphmem's home, index, FalkorDB data and socket folders are the user's alone.

Modes are read with ``stat``. Ownership checks need a second owner: the tests run as root in CI,
where ``os.chown`` to uid 65534 (nobody) fakes a folder another user made; elsewhere they skip.
"""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
from pathlib import Path

import pytest

from graphmem import Memory
from graphmem.errors import ServerError, StorageError
from graphmem.graph.server import EmbeddedServer
from graphmem.index import db
from graphmem.settings import Settings

NOBODY = 65534
as_root = pytest.mark.skipif(os.geteuid() != 0, reason="faking another owner needs root (chown)")


@pytest.fixture(autouse=True)
def fast_embedder(monkeypatch):
    monkeypatch.setenv("GRAPHMEM_LOCAL_EMBEDDING_MODEL", "wordllama")


def mode(path: Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


def modes_under(root: Path) -> dict[str, int]:
    """Every folder and file under ``root`` (itself included) with its permission bits."""
    out = {".": mode(root)}
    for folder, dirs, files in os.walk(root):
        for name in dirs + files:
            path = Path(folder) / name
            out[str(path.relative_to(root))] = mode(path)
    return out


# ---- GRAPHMEM_HOME and the SQLite index --------------------------------------------------------
def test_home_index_and_its_wal_are_private(spec_dir: Path, isolated_env: Path):
    home = isolated_env
    with Memory(spec_dir) as m:
        m.append_gotcha("tokens live in the keyring")
        assert m.search("keyring", limit=1)
        files = {p.name: mode(p) for p in home.iterdir() if p.name.startswith("index.sqlite3")}
    assert mode(home) == 0o700
    assert {"index.sqlite3", "index.sqlite3-wal", "index.sqlite3-shm"} <= set(files)
    assert files == dict.fromkeys(files, 0o600)
    assert mode(home / "search-cache") == 0o700  # derived too: postings and vectors of the memory


def test_an_older_loose_home_and_index_are_tightened(isolated_env: Path):
    home = isolated_env
    db.connect(home).close()
    os.chmod(home, 0o755)
    os.chmod(home / "index.sqlite3", 0o644)
    db.connect(home).close()
    assert mode(home) == 0o700 and mode(home / "index.sqlite3") == 0o600


@as_root
def test_a_home_owned_by_another_user_is_refused(isolated_env: Path):
    home = isolated_env
    home.mkdir(mode=0o700)
    os.chown(home, NOBODY, NOBODY)
    with pytest.raises(StorageError, match=f"{home}.*belongs to uid {NOBODY}"):
        db.connect(home)
    assert list(home.iterdir()) == []


# ---- the embedded FalkorDB -------------------------------------------------------------------
def long_home(tmp_path: Path) -> Path:
    """A home whose socket path is too long for sun_path, so the socket goes to the fallback."""
    return tmp_path / ("home-with-a-long-name-" + "x" * 90)


@pytest.fixture
def fallback_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """``tempfile.gettempdir()`` pointed at a folder of this test, and no ``XDG_RUNTIME_DIR``.

    The folder is made directly in the system's temporary folder, as short as /tmp's own
    fallback would be: under ``tmp_path`` (longer under pytest-xdist) the socket path itself
    would pass sun_path's 108 bytes."""
    shared = Path(tempfile.mkdtemp(prefix="gmt-"))
    os.chmod(shared, 0o1777)  # like /tmp
    monkeypatch.delenv("XDG_RUNTIME_DIR", raising=False)
    monkeypatch.setattr(tempfile, "tempdir", str(shared))
    yield shared / f"graphmem-{os.getuid()}"
    shutil.rmtree(shared, ignore_errors=True)


def test_falkordb_data_log_and_socket_folder_are_private(tmp_path: Path, fallback_tmp: Path):
    home = long_home(tmp_path)
    server = EmbeddedServer(Settings.load(env={"GRAPHMEM_HOME": str(home)}))
    try:
        ep = server.ensure()
        assert Path(ep.unix_socket).parent == fallback_tmp
        assert mode(fallback_tmp) == 0o700
        assert mode(Path(ep.unix_socket)) & 0o077 == 0
        data = modes_under(server.data_dir)
        assert "appendonlydir" in data and len(data) > 2  # the log folder and its files exist
        loose = {k: oct(v) for k, v in modes_under(home).items() if v & 0o077}
        assert loose == {}, loose
    finally:
        server.stop()


@pytest.mark.parametrize("plant", ["world-writable", "link", "another-owner"])
def test_a_socket_folder_someone_else_prepared_is_refused(tmp_path, fallback_tmp, plant):
    elsewhere = tmp_path / "attacker"
    elsewhere.mkdir()
    if plant == "world-writable":
        fallback_tmp.mkdir()
        os.chmod(fallback_tmp, 0o777)
    elif plant == "link":
        fallback_tmp.symlink_to(elsewhere, target_is_directory=True)
    else:
        if os.geteuid() != 0:
            pytest.skip("faking another owner needs root (chown)")
        fallback_tmp.mkdir(mode=0o700)
        os.chown(fallback_tmp, NOBODY, NOBODY)
    server = EmbeddedServer(Settings.load(env={"GRAPHMEM_HOME": str(long_home(tmp_path))}))
    with pytest.raises(ServerError, match=f"refusing to use {fallback_tmp}"):
        server.ensure()
    assert list(elsewhere.iterdir()) == []
    if not fallback_tmp.is_symlink():
        assert list(fallback_tmp.iterdir()) == []


# ---- the warm search server's files in $TMPDIR --------------------------------------------------
@as_root
def test_search_server_files_another_user_left_in_tmp_are_not_used(tmp_path: Path):
    import time

    from conftest import run_cli

    from graphmem.cli.search_client import client_config, holder
    from graphmem.cli.search_server import _take_lock

    spec = tmp_path / "shop" / "specs" / "001"
    spec.mkdir(parents=True)
    with Memory(spec) as m:
        m.append_gotcha("Stripe webhooks arrive twice")
    auto = {"GRAPHMEM_SEARCH_SERVER": "auto", "GRAPHMEM_SEARCH_SERVER_IDLE": "5"}
    cfg = client_config(env=dict(os.environ, **auto))
    for path in (cfg.log, cfg.lock):  # planted first, readable by their owner
        path.write_bytes(b"theirs\n")
        os.chown(path, NOBODY, NOBODY)
    try:
        r = run_cli("search", "webhooks", "--spec-dir", str(spec), "--json", env=auto)
        assert r.returncode == 0 and "Stripe" in r.stdout, r.stderr  # answered in-process
        time.sleep(1.5)  # a server it started would hold the lock by now
        assert holder(cfg) is None
        assert cfg.log.read_bytes() == b"theirs\n" and cfg.lock.read_bytes() == b"theirs\n"
        with pytest.raises(StorageError, match=f"{cfg.lock}.*belongs to uid {NOBODY}"):
            _take_lock(cfg)
        assert cfg.lock.read_bytes() == b"theirs\n"
    finally:
        pid = holder(cfg)  # only when the check failed: a server took the planted files
        if pid and pid > 0:
            os.kill(pid, 15)
        for path in (cfg.log, cfg.lock, cfg.err, cfg.socket):
            path.unlink(missing_ok=True)
