"""An optional warm search server, so ``graphmem search`` need not load models in every process.

A cold ``graphmem search`` pays for the interpreter, pydantic, numpy, onnxruntime and the
embedding model (about 1-2 s on a busy 2-core box) before it searches for a few milliseconds.
``graphmem search-server`` keeps one ``Backends`` (index view, embedder, reranker, graph client)
loaded and answers on a Unix socket; ``graphmem search`` asks it first and falls back to the
in-process path when none is running. The client side of this module imports only the standard
library.

Protocol: one JSON line in (``{"query", "scope", "kinds", "limit", "rerank", "spec_dir",
"project_dir"}``, absolute paths), one JSON line out: ``{"hits": [...]}`` or ``{"error": "...",
"exit": n}``.
"""

from __future__ import annotations

import json
import os
import socket
import zlib
from pathlib import Path
from typing import Any

IDLE_SECONDS = 900.0  # a server nobody asked for this long exits
MAX_REQUEST = 1 << 20


def socket_path(home: str | Path) -> Path:
    """Where the server of ``home`` listens (short: Unix socket paths are limited to ~100 bytes)."""
    # crc32, not sha1: hashlib costs the client 10 ms of import; a collision is harmless because
    # the server refuses requests for another home (see ``_answer``).
    home = str(Path(home).resolve())
    key = f"{zlib.crc32(home.encode('utf-8')):08x}{len(home):x}"
    return Path(os.environ.get("TMPDIR") or "/tmp") / f"graphmem-{os.getuid()}-{key}.sock"


def quick_home(env: dict[str, str] | None = None) -> Path | None:
    """The home as the settings would resolve it, when that needs no config file; else None."""
    env = os.environ if env is None else env
    if env.get("GRAPHMEM_HOME"):
        return Path(env["GRAPHMEM_HOME"])
    if env.get("GRAPHMEM_CONFIG") or env.get("GRAPHMEM_ENV_FILE") or Path("graphmem.toml").exists():
        return None  # the home may be set there: only the full settings can tell
    from platformdirs import user_data_dir

    return Path(user_data_dir("graphmem", appauthor=False))


def ask(home: Path, request: dict[str, Any], timeout: float = 30.0) -> dict[str, Any] | None:
    """The server's answer, or None when no server of ours listens for ``home``."""
    path = socket_path(home)
    request = dict(request, home=str(Path(home).resolve()))
    try:
        if os.stat(path).st_uid != os.getuid():  # never talk to another user's socket
            return None
    except OSError:
        return None
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(timeout)
            s.connect(str(path))
            s.sendall(json.dumps(request).encode("utf-8") + b"\n")
            data = b""
            while not data.endswith(b"\n"):
                chunk = s.recv(65536)
                if not chunk:
                    break
                data += chunk
        return json.loads(data) if data else None
    except (OSError, ValueError):
        return None  # a stale socket or a dying server: search in-process instead


async def _answer(backends: Any, settings: Any, req: dict[str, Any]) -> dict[str, Any]:
    from .errors import GraphmemError, NotFoundError, ValidationError
    from .memory import AsyncMemory

    try:
        if not isinstance(req, dict):
            raise ValidationError("must be a JSON object", field="request")
        if req.get("home") != str(Path(settings.home).resolve()):
            return {"wrong_home": True}  # the client searches in-process instead
        spec, project = req.get("spec_dir"), req.get("project_dir")
        for value, what in ((spec, "spec"), (project, "project")):
            if value is not None and not Path(value).is_dir():
                raise NotFoundError(f"{what} folder not found: {value}")
        if spec is None and project is None:
            raise ValidationError("a spec or project folder is required", field="project_dir")
        mem = AsyncMemory(spec, project, settings=settings)
        mem._backends = backends  # one index view and one set of models for every project
        hits = await mem.search(req.get("query"), scope=req.get("scope", "project"),
                                kinds=req.get("kinds"), limit=req.get("limit", 10),
                                rerank=req.get("rerank", False))
        return {"hits": [h.model_dump(mode="json") for h in hits]}
    except GraphmemError as exc:
        return {"error": str(exc), "exit": exc.exit_code}


async def serve(settings: Any, idle: float = IDLE_SECONDS, ready: Any = None) -> None:
    """Answer searches on the home's socket until ``idle`` seconds pass without one."""
    import asyncio

    from .backends import Backends
    from .errors import StorageError

    backends = Backends(settings)
    # Load what a search needs now, so the first client does not wait for it.
    await backends.search_local("warm up", projects=None, spec=None, kinds=None, limit=1)
    path = socket_path(settings.home)
    lock = asyncio.Lock()  # one search at a time: the index view is not shared across threads
    last = [asyncio.get_running_loop().time()]

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            line = await reader.readuntil(b"\n")
            try:
                req = json.loads(line)
            except ValueError:
                req = None
            async with lock:
                out = await _answer(backends, settings, req)
                last[0] = asyncio.get_running_loop().time()
            writer.write(json.dumps(out, default=str).encode("utf-8") + b"\n")
            await writer.drain()
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError):
            pass
        finally:
            writer.close()

    if path.exists():
        if ask(settings.home, {}, timeout=2.0) is not None:
            raise StorageError(f"a search server already answers for {settings.home} ({path})")
        path.unlink()  # left by a server that was killed
    old = os.umask(0o177)  # the socket is the user's alone (0600)
    try:
        server = await asyncio.start_unix_server(handle, path=str(path), limit=MAX_REQUEST)
    finally:
        os.umask(old)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    import signal

    for sig in (signal.SIGTERM, signal.SIGINT):  # exit through ``finally``: remove the socket
        loop.add_signal_handler(sig, stop.set)
    if ready is not None:
        ready(path)
    try:
        async with server:
            while not stop.is_set() and loop.time() - last[0] < idle:
                try:
                    await asyncio.wait_for(stop.wait(), min(1.0, idle))
                except asyncio.TimeoutError:
                    pass
    finally:
        path.unlink(missing_ok=True)
        await backends.aclose()
