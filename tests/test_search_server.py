"""The warm search server: started by the CLI, same answers, never stale (real processes, socket)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import run_cli

from graphmem import Memory
from graphmem.cli.search_client import PREFIXES, ask, client_config, holder
from graphmem.settings import ENV_NAMES

AUTO = {"GRAPHMEM_SEARCH_SERVER": "auto", "GRAPHMEM_SEARCH_SERVER_IDLE": "120"}


def _pids(home: Path) -> list[int]:
    """Search servers running with this home (started by a CLI or by a test)."""
    out = []
    for proc in Path("/proc").iterdir():
        try:
            if proc.name.isdigit() and b"search-server" in (proc / "cmdline").read_bytes() and \
                    f"GRAPHMEM_HOME={home}".encode() in (proc / "environ").read_bytes().split(b"\0"):
                if (proc / "stat").read_text().split(") ")[1][0] != "Z":
                    out.append(int(proc.name))
        except OSError:
            continue
    return out


@pytest.fixture
def home(isolated_env):
    """The test's home; every search server of it is stopped when the test ends."""
    yield isolated_env
    deadline = time.monotonic() + 30
    while (pids := _pids(isolated_env)) and time.monotonic() < deadline:
        for pid in pids:  # again each round: a server may still be starting
            os.kill(pid, signal.SIGTERM)
        time.sleep(0.2)
    for pid in _pids(isolated_env):
        os.kill(pid, signal.SIGKILL)


def _cfg():
    return client_config(env=dict(os.environ, **AUTO))


def _wait_ping(cfg, timeout: float = 120.0) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        answer = ask(cfg, {"op": "ping"})
        if answer and "pid" in answer:
            return answer
        time.sleep(0.2)
    log = cfg.log.read_text() if cfg.log.exists() else "(none)"
    raise AssertionError(f"no search server answered; its log: {log}")


def _start(home: Path, *args: str) -> subprocess.Popen:
    proc = subprocess.Popen([sys.executable, "-m", "graphmem.cli", "search-server", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=dict(os.environ, GRAPHMEM_HOME=str(home)))
    line = proc.stdout.readline()  # printed once the models are loaded and the socket listens
    assert "graphmem search server on" in line, proc.stderr.read()
    return proc


def _raw(path: Path, payload: bytes, half_close: bool = False) -> dict:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(60)
        s.connect(str(path))
        try:
            s.sendall(payload)
        except BrokenPipeError:  # the server answered before reading all (an over-long line)
            pass
        if half_close:
            s.shutdown(socket.SHUT_WR)
        return json.loads(s.makefile().readline())


def _project(tmp_path: Path) -> tuple[Path, Path]:
    spec = tmp_path / "shop" / "specs" / "001"
    spec.mkdir(parents=True)
    with Memory(spec) as m:
        m.append_gotcha("Stripe webhooks arrive twice; make the handler idempotent")
        m.append_gotcha("The CI runner kills any job that prints nothing for ten minutes")
        m.append_pattern("Money is kept in integer cents, never floats")
    return spec, spec.parent.parent


def test_cli_starts_a_server_that_answers_as_the_library_does(tmp_path: Path, home):
    spec, project = _project(tmp_path)
    cfg = _cfg()
    where = ("--project-dir", str(project))
    search = ("search", "payment notifications delivered more than once", *where)
    first = run_cli(*search, "--json", env=AUTO)  # no server yet: in-process, then starts one
    assert first.returncode == 0, first.stderr
    served = _wait_ping(cfg)["served"]
    with Memory(spec) as m:
        library = [h.model_dump(mode="json") for h in m.search(search[1], scope="project")]
    assert json.loads(first.stdout) == library
    assert library[0]["text"].startswith("Stripe webhooks")

    def both(*args: str) -> str:
        """The CLI's output through the server, checked equal to the in-process output."""
        nonlocal served
        warm, cold = run_cli(*args, env=AUTO), run_cli(*args, "--no-server", env=AUTO)
        assert (warm.returncode, warm.stdout, warm.stderr) == \
            (cold.returncode, cold.stdout, cold.stderr), (args, warm, cold)
        now = ask(cfg, {"op": "ping"}).get("served")
        assert now == served + 1  # the server answered the first, not the --no-server one
        served = now
        return warm.stdout

    assert json.loads(both(*search, "--json")) == library
    both(*search)  # the human format too
    both("search", "money", "--spec-dir", str(spec), "--kind", "pattern", "--limit", "1", "--json")
    assert "Stripe webhooks" in both("context", "build the payment webhook handler", *where)
    both("context", "webhooks", "--max-tokens", "60", "--json", *where)
    # what else to know comes back from the server as in-process: a file nothing is known
    # about (context's notes), retired memories a search left out (stderr; stdout stays a list)
    typo = json.loads(both("context", "webhooks", "--file", "src/nowhere.py", "--json", *where))
    assert "nothing is known about src/nowhere.py" in typo["notes"][0], typo
    with Memory(spec) as m:
        m.append_gotcha("Webhook secrets rotate every month")
        m.retire(m.search("webhook secrets rotate", limit=1)[0].id, "they no longer rotate")
    both("search", "webhook secrets rotate", *where, "--json")
    told = run_cli("search", "webhook secrets rotate", *where, "--json", env=AUTO)
    assert "graphmem: note: 1 matching memory left out" in told.stderr, told.stderr
    served += 1
    # A write by another process is in the server's next answer.
    with Memory(spec) as m:
        m.append_gotcha("Refunds over 500 EUR need a second approver")
    assert json.loads(both("search", "refund approval", *where, "--json"))[0]["text"] \
        .startswith("Refunds over 500 EUR")
    # The database deleted under the server: it reopens the new one, never the old view; the
    # new one is rebuilt from the files (the index heals), so the answer holds what the files
    # hold: a gotcha removed from gotchas.md meanwhile is gone, the others are found again.
    gotchas = spec / "memory" / "gotchas.md"
    gotchas.write_text("".join(ln for ln in gotchas.read_text().splitlines(True)
                               if "Stripe webhooks" not in ln))
    for p in Path(cfg.home).glob("index.sqlite3*"):
        p.unlink()
    assert "Stripe webhooks" not in both(*search)
    assert "Refunds over 500 EUR" in both("search", "refund approval", *where)
    with Memory(spec) as m:
        m.append_gotcha("Webhook retries come from Stripe within three days")
    assert "three days" in both(*search)
    # Errors come back as the in-process path reports them.
    bad = run_cli("search", "", *where, env=AUTO)
    assert bad.returncode == 2 and "query" in bad.stderr and "Traceback" not in bad.stderr
    bad = run_cli("context", "x", "--max-tokens", "5", *where, env=AUTO)
    assert bad.returncode == 2 and "max_tokens" in bad.stderr
    missing = run_cli("search", "x", "--project-dir", "nowhere", env=AUTO)
    assert missing.returncode == 4 and "project folder not found: nowhere" in missing.stderr
    assert len(_pids(home)) == 1


def test_stale_socket_is_replaced_and_a_cli_started_server_exits_when_idle(tmp_path: Path, home):
    spec, project = _project(tmp_path)
    cfg = _cfg()
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:  # left by a killed server
        s.bind(str(cfg.socket))
    cfg.lock.write_text("999999\n")  # and its pid file, naming no live process
    args = ("search", "webhooks twice", "--project-dir", str(project), "--json")
    env = dict(AUTO, GRAPHMEM_SEARCH_SERVER_IDLE="2")
    cfg.err.write_text("ConfigError: model files missing\n")  # a server failed to start lately
    cold = run_cli(*args, env=env)
    time.sleep(1.5)  # a server started by it would hold its lock by now
    assert cold.returncode == 0 and holder(cfg) is None, cold.stderr
    old = time.time() - 3600
    os.utime(cfg.err, (old, old))  # long ago: the next CLI tries again
    stale = run_cli(*args, env=env)
    assert stale.returncode == 0 and stale.stdout == cold.stdout, stale.stderr
    pid = _wait_ping(cfg)["pid"]
    assert not cfg.err.exists()  # loaded fine this time
    assert holder(cfg) == pid and _pids(home) == [pid]
    assert (cfg.socket.stat().st_mode & 0o777) == 0o600
    deadline = time.monotonic() + 60
    while _pids(home) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not _pids(home), "the server did not exit when idle"
    assert not cfg.socket.exists() and not cfg.lock.exists() and not cfg.log.exists()


def test_two_clis_racing_leave_one_server(tmp_path: Path, home):
    _spec, project = _project(tmp_path)
    cmd = [sys.executable, "-m", "graphmem.cli", "search", "ci job killed", "--project-dir",
           str(project), "--json"]
    procs = [subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              env=dict(os.environ, **AUTO)) for _ in range(2)]
    outs = [p.communicate(timeout=120) for p in procs]
    assert all(p.returncode == 0 for p in procs) and outs[0][0] == outs[1][0]
    pid = _wait_ping(_cfg())["pid"]
    time.sleep(1.0)  # a second server, if any was started, has found the lock taken by now
    assert _pids(home) == [pid]


def test_off_setting_and_no_server_neither_ask_nor_start(tmp_path: Path, home, monkeypatch):
    _spec, project = _project(tmp_path)
    cfg = _cfg()
    args = ("search", "webhooks", "--project-dir", str(project), "--json")
    off = run_cli(*args, env={"GRAPHMEM_SEARCH_SERVER": "off"})
    flag = run_cli(*args, "--no-server", env=AUTO)
    assert off.returncode == 0 and flag.returncode == 0 and off.stdout == flag.stdout
    (tmp_path / "cwd" / "graphmem.toml").write_text('[search_server]\nmode = "off"\n')
    toml = run_cli(*args, env={"GRAPHMEM_SEARCH_SERVER": ""})
    assert toml.returncode == 0 and toml.stdout == off.stdout
    time.sleep(1.5)  # a server started by any of them would hold its lock by now
    assert holder(cfg) is None and not _pids(home)
    # ... and with a server running, they still do not ask it.
    (tmp_path / "cwd" / "graphmem.toml").unlink()
    proc = _start(home, "--idle", "60")
    try:
        before = ask(cfg, {"op": "ping"})["served"]
        run_cli(*args, env={"GRAPHMEM_SEARCH_SERVER": "off"})
        run_cli(*args, "--no-server", env=AUTO)
        assert ask(cfg, {"op": "ping"})["served"] == before
        run_cli(*args, env=AUTO)
        assert ask(cfg, {"op": "ping"})["served"] == before + 1
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
    assert not cfg.socket.exists()
    bad = run_cli(*args, env={"GRAPHMEM_SEARCH_SERVER": "sometimes"})
    assert bad.returncode == 3 and "search_server.mode" in bad.stderr


def test_garbage_requests_get_clear_errors(tmp_path: Path, home):
    _spec, project = _project(tmp_path)
    cfg = _cfg()
    proc = _start(home, "--idle", "60")
    try:
        second = run_cli("search-server", "--idle", "3")
        assert second.returncode != 0 and "already answers" in second.stderr
        path, key = cfg.socket, cfg.key

        def req(**fields) -> dict:
            return _raw(path, json.dumps(dict({"key": key, "project_dir": str(project)},
                                              **fields)).encode() + b"\n")

        assert _raw(path, b"not json\n") == {"error": "request: must be one line of JSON",
                                             "exit": 2}
        assert _raw(path, b"\xff\xfe\n")["exit"] == 2
        assert _raw(path, b"[1, 2]\n") == {"error": "request: must be a JSON object", "exit": 2}
        assert _raw(path, b'{"op": "ping"}', half_close=True)["error"] == \
            "request: must end with a newline"
        assert "longer than" in _raw(path, b"x" * (2 << 20) + b"\n")["error"]
        assert req(key="another") == {"wrong_server": True}
        assert req(op="drop")["error"].startswith("op: must be one of")
        assert req(query="x", project_dir="relative/path")["error"].startswith("project_dir:")
        assert req(query="x", project_dir=str(tmp_path / "gone"))["exit"] == 4
        assert req(query="x", project_dir=None)["error"].startswith("project_dir:")
        assert req(query="x", limit="ten")["error"].startswith("limit:")
        assert req(query=["x"])["error"].startswith("query:")
        assert req(query="x", kinds=["secret"])["error"].startswith("kinds:")
        assert req(query="x", scope="galaxy")["error"].startswith("scope:")
        assert req(op="hook", action="dance")["error"].startswith("action:")  # agent hooks' op
        told = req(op="hook", action="prompt", prompt="the Stripe webhooks handler runs twice")
        assert "Stripe webhooks arrive twice" in told["context"]
        assert req(op="hook", action="prompt", prompt="translate emails into German") == \
            {"context": ""}  # under the relevance floor: nothing
        assert req(op="context", task="x", max_tokens="many")["error"].startswith("max_tokens:")
        assert req(query="webhooks")["hits"][0]["text"].startswith("Stripe webhooks")
        cfg.err.write_text("ConfigError: model files missing\n")
        doctor = run_cli("doctor", "--json")
        rows = {r["name"]: r for r in json.loads(doctor.stdout)["sections"]["search server"]}
        assert f"pid {proc.pid} " in rows["server"]["detail"] and rows["server"]["status"] == "ok"
        assert rows["last start"]["status"] == "warn" and "model files" in \
            rows["last start"]["detail"]
        cfg.err.unlink()
    finally:
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
    bad = run_cli("search-server", "--idle", "0")
    assert bad.returncode == 2 and "--idle" in bad.stderr


def test_each_setting_that_can_change_a_result_gives_another_server(tmp_path: Path, monkeypatch):
    base = {k: v for k, v in os.environ.items() if not k.startswith("GRAPHMEM_SEARCH_SERVER")}
    base["GRAPHMEM_HOME"] = str(tmp_path / "h")
    key = client_config(env=base).key
    assert client_config(env=dict(base, GRAPHMEM_SEARCH_SERVER_IDLE="5")).key == key
    assert client_config(env=dict(base, GRAPHMEM_SEARCH_SERVER="off")).key == key
    for change in ({"GRAPHMEM_HOME": str(tmp_path / "other")},
                   {"GRAPHMEM_LOCAL_EMBEDDING_MODEL": "wordllama"},
                   {"OPENAI_API_KEY": "sk-test"}, {"GRAPHMEM_GRAPH": "on"}):
        assert client_config(env=dict(base, **change)).key != key, change
    toml = tmp_path / "cwd" / "graphmem.toml"
    toml.write_text('redact = false\n')
    with_toml = client_config(env=base)
    assert with_toml.key != key
    toml.write_text('redact = true\n')
    assert client_config(env=base).key not in (key, with_toml.key)
    toml.write_text(f'home = "{tmp_path / "toml-home"}"\n[search_server]\nidle = 7\n')
    cfg = client_config(env={k: v for k, v in base.items() if k != "GRAPHMEM_HOME"})
    assert cfg.home == str(tmp_path / "toml-home") and cfg.idle == 7.0 and cfg.mode == "auto"
    toml.write_text('[search_server]\nmode = "never"\n')
    assert client_config(env=base) is None  # in-process: Settings.load names the field
    # every variable the settings read is part of the key
    assert all(name.startswith(PREFIXES) for name in ENV_NAMES)


def test_the_client_resolves_home_mode_and_idle_as_settings_load_does(tmp_path: Path):
    from graphmem.errors import ConfigError
    from graphmem.settings import Settings

    base = {"GRAPHMEM_HOME": str(tmp_path / "h")}
    for extra in ({}, {"GRAPHMEM_SEARCH_SERVER": "off"}, {"GRAPHMEM_SEARCH_SERVER_IDLE": "30"},
                  {"GRAPHMEM_SEARCH_SERVER": "never"}, {"GRAPHMEM_SEARCH_SERVER_IDLE": "0"}):
        env = dict(base, **extra)
        cfg = client_config(env=env)
        try:
            s = Settings.load(env=env)
        except ConfigError:
            assert cfg is None, extra  # refused by both: the CLI falls back to in-process
            continue
        assert cfg is not None, extra
        assert (cfg.home, cfg.mode, cfg.idle) == (str(s.home), s.search_server.mode,
                                                  s.search_server.idle), extra
