"""compose/: the FalkorDB stack has the service, ports, volume, password and health check the docs promise.

Docker cannot run here, so the file is parsed (PyYAML) and its ``${VAR}`` references are
resolved the way ``docker compose`` does, from ``compose/.env.example``.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

COMPOSE = Path(__file__).resolve().parents[1] / "compose"
_VAR = re.compile(r"\$\{(\w+)(?:(:?[-?])([^}]*))?\}")


def _env_example() -> dict[str, str]:
    env = {}
    for line in (COMPOSE / ".env.example").read_text().splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            key, _, value = line.partition("=")
            env[key.strip()] = value.strip()
    return env


def interpolate(text: str, env: dict[str, str]) -> str:
    """Compose's ``${VAR}``, ``${VAR:-default}`` and ``${VAR:?error}`` rules ($$ is a literal $)."""
    def sub(m: re.Match) -> str:
        name, op, arg = m.group(1), m.group(2), m.group(3)
        value = env.get(name)
        if op in (":-", "-"):
            return value if value or (op == "-" and value is not None) else arg
        if op in (":?", "?"):
            if not value:
                raise KeyError(f"{name}: {arg}")
            return value
        return value or ""
    return _VAR.sub(sub, text.replace("$$", "\x00")).replace("\x00", "$")


def _service(env: dict[str, str]) -> dict:
    doc = yaml.safe_load(interpolate((COMPOSE / "docker-compose.yml").read_text(), env))
    return doc, doc["services"]["falkordb"]


def test_service_image_ports_and_volume():
    doc, svc = _service(_env_example())
    assert svc["image"].startswith("falkordb/falkordb:")
    ports = {p.rsplit(":", 1)[1]: p for p in svc["ports"]}
    assert set(ports) == {"6379", "3000"}  # FalkorDB and its Browser UI
    assert ports["6379"] == "127.0.0.1:6379:6379"  # loopback unless FALKORDB_BIND says otherwise
    assert ports["3000"] == "127.0.0.1:3000:3000"
    assert svc["environment"]["BROWSER"] == "1"
    assert "falkordb-data:/var/lib/falkordb/data" in svc["volumes"]
    assert "falkordb-data" in doc["volumes"]  # a named, persistent volume
    assert "--appendonly yes" in svc["environment"]["REDIS_ARGS"]
    assert svc["restart"] == "unless-stopped"


def test_password_comes_from_the_environment_and_is_required():
    env = _env_example()
    _, svc = _service(env)
    assert f"--requirepass {env['FALKORDB_PASSWORD']}" in svc["environment"]["REDIS_ARGS"]
    assert svc["environment"]["REDISCLI_AUTH"] == env["FALKORDB_PASSWORD"]
    env.pop("FALKORDB_PASSWORD")
    with pytest.raises(KeyError, match="FALKORDB_PASSWORD"):
        _service(env)
    raw = (COMPOSE / "docker-compose.yml").read_text()
    assert "change-me" not in raw  # no password baked into the file


def test_health_check_pings_with_auth():
    _, svc = _service(_env_example())
    hc = svc["healthcheck"]
    cmd = " ".join(hc["test"])
    assert hc["test"][0] in ("CMD", "CMD-SHELL") and "redis-cli" in cmd and "ping" in cmd
    # redis-cli authenticates from REDISCLI_AUTH, which the service sets from the password;
    # without auth the reply would be NOAUTH, so the check demands PONG.
    assert "REDISCLI_AUTH" in svc["environment"] and "PONG" in cmd
    assert all(k in hc for k in ("interval", "timeout", "retries"))


def test_bind_and_ports_follow_the_env_file():
    env = _env_example() | {"FALKORDB_BIND": "0.0.0.0", "FALKORDB_PORT": "16379",
                            "FALKORDB_BROWSER_PORT": "13000", "FALKORDB_BROWSER": "0"}
    _, svc = _service(env)
    assert svc["ports"] == ["0.0.0.0:16379:6379", "0.0.0.0:13000:3000"]
    assert svc["environment"]["BROWSER"] == "0"


def test_readme_documents_the_url_graphmem_reads():
    from graphmem.settings import Settings

    readme = (COMPOSE / "README.md").read_text()
    env = _env_example()
    for promise in ("GRAPHMEM_FALKORDB_URL", "redis://:<FALKORDB_PASSWORD>@localhost:6379",
                    "GRAPHMEM_GRAPH=on", "FALKORDB_BIND", "http://localhost:3000", "Docker is not available"):
        assert promise in readme, promise
    url = f"redis://:{env['FALKORDB_PASSWORD']}@localhost:{env['FALKORDB_PORT']}"
    s = Settings.load(env={"GRAPHMEM_FALKORDB_URL": url, "GRAPHMEM_GRAPH": "on",
                           "GRAPHMEM_HOME": "/tmp/x"})
    assert s.graph.falkordb_url == url and s.graph.mode == "on"
