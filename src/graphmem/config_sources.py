"""Where settings come from, read with the standard library only (and python-dotenv for a named
``.env``): the one reader behind ``Settings.load`` and the CLI's cheap ``search_client``.

Sources, lowest to highest priority: ``graphmem.toml`` (``GRAPHMEM_CONFIG`` or ``./graphmem.toml``),
a ``.env`` file the caller names (``GRAPHMEM_ENV_FILE`` or ``env_file=``), then the process
environment. No ``.env`` is picked up unless named. This module must stay cheap to import: it
runs before every CLI search.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Mapping, NamedTuple

from .errors import ConfigError

SEARCH_SERVER_MODES = ("auto", "off")  # settings.SearchServerSettings.mode
DEFAULT_IDLE = 900.0  # seconds without a request before the warm search server exits


class Sources(NamedTuple):
    """What the settings sources hold, before any value is checked."""

    toml: dict[str, Any]  # the config file's tables ({} without one)
    env: dict[str, str]  # the named .env file's values, overlaid by the process environment
    # "config" / "env_file" -> [real path, sha256 of its bytes]: what a search server's key hashes
    files: dict[str, list[str]]


def read_sources(env: Mapping[str, str] | None = None, env_file: str | Path | None = None,
                 config_file: str | Path | None = None, cwd: str | Path | None = None) -> Sources:
    """Read the TOML file and the named ``.env``; ConfigError when one cannot be read."""
    environ = dict(os.environ if env is None else env)
    base = Path(cwd) if cwd is not None else Path.cwd()
    files: dict[str, list[str]] = {}
    data: dict[str, Any] = {}
    cfg = config_file or environ.get("GRAPHMEM_CONFIG")
    if cfg is None and (base / "graphmem.toml").is_file():
        cfg = "graphmem.toml"
    if cfg:
        import tomllib

        path = os.path.realpath(base / cfg)
        try:
            raw = Path(path).read_bytes()
            data = tomllib.loads(raw.decode("utf-8"))
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
            raise ConfigError(f"cannot read config file {cfg}: {exc}") from None
        files["config"] = [path, _digest(raw)]
    merged: dict[str, str] = {}
    dotenv = env_file or environ.get("GRAPHMEM_ENV_FILE")
    if dotenv:
        path = os.path.realpath(base / dotenv)
        if not Path(path).is_file():
            raise ConfigError(f"env file {dotenv} does not exist")
        try:
            from dotenv import dotenv_values

            raw = Path(path).read_bytes()
            merged.update({k: v for k, v in dotenv_values(path).items() if v is not None})
        except (OSError, ValueError) as exc:
            raise ConfigError(f"cannot read env file {dotenv}: {exc}") from None
        files["env_file"] = [path, _digest(raw)]
    merged.update(environ)
    return Sources(data, merged, files)


def default_home() -> str:
    """Per-user data folder for the index, the embedded FalkorDB and the project registry."""
    from platformdirs import user_data_dir

    return user_data_dir("graphmem", appauthor=False)


def default_model_cache() -> str:
    """Per-user cache folder for model files built on this machine (every home shares it)."""
    from platformdirs import user_cache_dir

    return user_cache_dir("graphmem", appauthor=False)


def _digest(raw: bytes) -> str:
    import hashlib

    return hashlib.sha256(raw).hexdigest()
