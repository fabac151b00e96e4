"""The warm search server: one process keeps the index view and the models loaded.

A cold ``graphmem search`` pays for the interpreter, pydantic, numpy, onnxruntime and the
embedding model before it searches for a few milliseconds. ``graphmem search-server`` keeps one
``DerivedStores`` (index view, embedder, reranker, graph client) loaded and answers ``search`` and
``context`` on a Unix socket. The CLI starts one by itself (``search_client.spawn``) unless
``search_server.mode`` is ``off``; it exits after ``search_server.idle`` seconds without a request.

Never stale: every search reads the index's generation from SQLite and applies what other
processes wrote since; a database that was deleted or replaced is reopened; settings or code that
differ from the server's give the client another key, hence another server (``search_client``).

Protocol: one JSON line in, one JSON line out. In: ``{"op": "search"|"context"|"hook"|"ping",
"key", "spec_dir", "project_dir"}`` (absolute paths) plus ``query, scope, kinds, limit, rerank``,
``task, max_tokens, files`` or, for ``hook``, ``action`` and its fields
(``hooks/agent_context.py``; a briefing is also kept on disk for a hook that finds no server,
``hooks/brief_cache.py``). Out: ``{"hits": [...]}``, ``{"context": "..."}``, ``{"pid", "served"}``,
``{"error": "field: problem", "exit": n}``, ``{"wrong_server": true}`` (another key), or
``{"internal_error": "..."}`` (a bug: the client searches in-process instead).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

from graphmem.cli.search_client import ServerConfig, client_config, code_roots

MAX_REQUEST = 1 << 20
OPS = ("search", "context", "hook", "ping")


class _State:
    """The server's derived stores, reopened when the index database is replaced under it."""

    def __init__(self, settings: Any, cfg: ServerConfig):
        from graphmem.index.db import db_path

        self.settings, self.cfg = settings, cfg
        self.db = db_path(Path(settings.home))
        self.derived = None
        self.identity: tuple | None = None
        self.served = 0  # search and context requests answered (``ping`` reports it)
        self.code: dict[str, int] = {}  # graphmem files loaded -> mtime, once warmed up
        self.modules = 0  # len(sys.modules) when ``code`` was last brought up to date
        self.outdated = False

    def code_changed(self) -> bool:
        """Whether a graphmem file this process loaded changed since (an upgrade, an edit)."""
        self.outdated = self.outdated or any(_mtime(p) != t for p, t in self.code.items())
        return self.outdated

    def loaded(self) -> None:
        """Watch the graphmem files a request imported too (the façade, the hooks' answers:
        a warm-up loads only the index), with their times now."""
        if len(sys.modules) != self.modules:
            self.modules = len(sys.modules)
            self.code = {**_code_files(), **self.code}

    def _stat(self) -> tuple | None:
        try:
            st = os.stat(self.db)
        except OSError:
            return None
        return st.st_dev, st.st_ino

    async def current(self):
        """The derived stores, reopened if the database file is not the one they opened."""
        from graphmem.facade.derived import DerivedStores

        if self.derived is not None and self._stat() != self.identity:
            await self.derived.aclose()
            self.derived = None
        if self.derived is None:
            self.derived = DerivedStores(self.settings)
            self.derived.local.index  # noqa: B018 - opens (or creates) the database now
            self.identity = self._stat()
        return self.derived


def _mtime(path: str) -> int:
    try:
        return os.stat(path).st_mtime_ns
    except OSError:
        return -1


def _code_files() -> dict[str, int]:
    """The graphmem source files this process has loaded, with their modification times."""
    roots = tuple(code_roots())
    files = [getattr(m, "__file__", None) for m in list(sys.modules.values())]
    return {f: _mtime(f) for f in files if f and f.startswith(roots)}


def _path(value: Any, field: str) -> str | None:
    from graphmem.errors import ValidationError
    from graphmem.models import check_folders

    if value is None:
        return None
    if not isinstance(value, str) or not os.path.isabs(value) or "\x00" in value:
        raise ValidationError("must be an absolute folder path", field=field)
    check_folders(**{field.removesuffix("_dir"): value})
    return value


async def _answer(state: _State, req: Any) -> dict[str, Any]:
    from graphmem.errors import GraphmemError, ValidationError
    from graphmem.facade.memory import AsyncMemory

    try:
        if not isinstance(req, dict):
            raise ValidationError("must be a JSON object", field="request")
        if req.get("key") != state.cfg.key or state.code_changed():
            return {"wrong_server": True}  # other settings or code: the client runs in-process
        op = req.get("op", "search")
        if op not in OPS:
            raise ValidationError(f"must be one of {', '.join(OPS)}, got {op!r}", field="op")
        if op == "ping":
            return {"pid": os.getpid(), "served": state.served}
        state.served += 1
        spec = _path(req.get("spec_dir"), "spec_dir")
        project = _path(req.get("project_dir"), "project_dir")
        if spec is None and project is None:
            raise ValidationError("a spec or project folder is required", field="project_dir")
        # one index view and one set of models for all
        mem = AsyncMemory(spec, project, settings=state.settings, derived=await state.current())
        if op == "hook":  # an agent's hook (``hooks/agent_context.py``): markdown or ''
            from graphmem.hooks.agent_context import answer

            return {"context": await answer(mem, req)}
        task: Any = req.get("task")  # the façade checks each field (it refuses a missing one)
        query: Any = req.get("query")
        if op == "context":
            text: str | None = await mem.context(task, max_tokens=req.get("max_tokens", 1500),
                                     files=req.get("files"))
            return {"context": text, "notes": list(mem.search_notes)}
        hits = await mem.search(query, scope=req.get("scope", "project"),
                                kinds=req.get("kinds"), limit=req.get("limit", 10),
                                rerank=req.get("rerank", False),
                                include_history=req.get("include_history", False))
        rows = [h.model_dump(mode="json") for h in hits]
        text = _render(rows, req.get("render"))
        out: dict[str, Any] = {"hits": rows} if text is None else {"hits": rows, "text": text}
        if getattr(mem, "search_notes", None):
            out["notes"] = mem.search_notes  # the client prints them on stderr: never silent
        return out
    except GraphmemError as exc:
        return {"error": str(exc), "exit": exc.exit_code}
    except Exception as exc:  # a bug: say so in the log, let the client answer in-process
        import traceback

        traceback.print_exc(file=sys.stderr)
        return {"internal_error": f"{type(exc).__name__}: {exc}"}


def _render(rows: list[dict], render: Any) -> str | None:
    """The CLI's human format as the client's console would print it; None if it cannot."""
    if not isinstance(render, dict) or not isinstance(render.get("env"), dict):
        return None
    import io

    from graphmem.cli.hit_view import show_hits
    from graphmem.cli.display import RICH_ENV, console_for

    env = {k: v for k, v in render["env"].items() if k in RICH_ENV and isinstance(v, str)}
    buf = io.StringIO()
    try:
        show_hits(rows, console_for(env, buf))  # no terminal here, as at the client
    except Exception:
        return None
    return buf.getvalue()


def _request_error(message: str) -> dict[str, Any]:
    return {"error": f"request: {message}", "exit": 2}


def health(rows: list[dict]) -> None:
    """``graphmem doctor`` rows: the mode, whether a server runs, and why one last failed."""
    from graphmem.health import row
    from graphmem.cli.search_client import ask, holder

    cfg = client_config()
    if cfg is None:
        rows.append(row("search server", "warn", "settings not readable without pydantic; "
                                                 "`graphmem search` works in-process"))
        return
    rows.append(row("mode", "ok", f"{cfg.mode} (GRAPHMEM_SEARCH_SERVER), idle exit after "
                                  f"{cfg.idle:g} s"))
    pid, answer = holder(cfg), ask(cfg, {"op": "ping"}, timeout=5.0) or {}
    if "pid" in answer:
        rows.append(row("server", "ok", f"pid {answer['pid']} on {cfg.socket}, "
                                        f"{answer['served']} request(s) answered"))
    elif pid is not None:
        rows.append(row("server", "ok", f"pid {pid} is starting (or answering for older code)"))
    else:
        rows.append(row("server", "ok", "none running; the next `graphmem search` starts one"
                        if cfg.mode == "auto" else "none running"))
    try:
        err = cfg.err.read_text(encoding="utf-8", errors="replace").strip()
    except OSError:
        return
    rows.append(row("last start", "warn", f"failed: {err[:300]} (log: {cfg.log})"))


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return -1


def _write_err(cfg: ServerConfig, text: str) -> None:
    """Leave why loading failed where CLIs look before starting another server."""
    try:
        fd = os.open(cfg.err, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
    except OSError:
        pass


REPLACE_WAIT = 10.0  # seconds a ``--replace`` server waits for the outdated one's lock


def _take_lock(cfg: ServerConfig, wait: float = 0.0) -> int | None:
    """Hold ``cfg.lock`` for the server's life (its pid inside); None when another holds it
    (still, after ``wait`` seconds)."""
    import fcntl
    import time

    from graphmem.errors import StorageError

    try:
        fd = os.open(cfg.lock, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    except OSError as exc:
        raise StorageError(f"cannot open the search server's lock {cfg.lock}: {exc}") from None
    owner = os.fstat(fd).st_uid
    if owner != os.getuid():  # $TMPDIR is shared: another user's file under our name
        os.close(fd)
        raise StorageError(f"refusing to use {cfg.lock}: it belongs to uid {owner}, not to you "
                           f"(uid {os.getuid()}); remove it")
    until = time.monotonic() + wait
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            break
        except OSError:
            if time.monotonic() >= until:
                os.close(fd)
                return None
            time.sleep(0.05)
    if wait and os.fstat(fd).st_nlink == 0:  # the old server unlinked it as it left
        os.close(fd)
        return _take_lock(cfg)
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
    return fd


async def serve(settings: Any, idle: float | None = None, ready: Any = None,
                auto: bool = False, replace: bool = False) -> None:
    """Answer on the settings' socket until ``idle`` seconds pass without a request.

    ``auto`` (started by the CLI): exit quietly if another server holds the lock, and leave
    ``cfg.err`` behind if loading fails, so that CLIs do not start one again at once.
    ``replace`` (started for an outdated server that is exiting): wait up to ``REPLACE_WAIT``
    seconds for its lock first.
    """
    from graphmem.errors import ConfigError, StorageError

    cfg = client_config()
    if cfg is None or cfg.home != os.path.realpath(settings.home):
        raise ConfigError("the search server could not work out its socket from the settings")
    idle = cfg.idle if idle is None else idle
    lock = _take_lock(cfg, wait=REPLACE_WAIT if replace else 0.0)
    if lock is None:
        if auto:
            return  # another CLI started one first
        raise StorageError(f"a search server already answers for {cfg.home} ({cfg.socket})")
    state = _State(settings, cfg)
    try:
        try:
            derived = await state.current()
            # Load what a search needs now, so the first client does not wait for it.
            await derived.search_local("warm up", projects=None, spec=None, kinds=None, limit=1)
        except Exception as exc:
            if auto:
                _write_err(cfg, f"{type(exc).__name__}: {exc}\n")
            raise
        cfg.err.unlink(missing_ok=True)
        state.code, state.modules = _code_files(), len(sys.modules)
        await _listen(state, idle, ready)
        # A clean exit leaves nothing in $TMPDIR. (A CLI that opened the lock file just before
        # the unlink may start a second server beside a new one; the one whose socket is
        # replaced exits within a second, see ``_listen``.)
        cfg.lock.unlink(missing_ok=True)
        if auto and _size(cfg.log) == 0:
            cfg.log.unlink(missing_ok=True)
    finally:
        if state.derived is not None:
            await state.derived.aclose()
        os.close(lock)  # releases the lock


async def _listen(state: _State, idle: float, ready: Any) -> None:
    import asyncio
    import signal

    path = state.cfg.socket
    busy = asyncio.Lock()  # one request at a time: the index view is not shared across threads
    loop = asyncio.get_running_loop()
    last = [loop.time()]
    stop = asyncio.Event()

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            try:
                req, out = json.loads(await reader.readuntil(b"\n")), None
            except asyncio.LimitOverrunError:
                out = _request_error(f"longer than {MAX_REQUEST} bytes")
            except asyncio.IncompleteReadError:
                out = _request_error("must end with a newline")
            except ValueError:  # not JSON, or not UTF-8
                out = _request_error("must be one line of JSON")
            if out is None:
                async with busy:
                    out = await _answer(state, req)
                    state.loaded()
                    last[0] = loop.time()
                if state.outdated and not stop.is_set():
                    print("graphmem search server: its code changed on disk; exiting",
                          file=sys.stderr, flush=True)  # kept in the log: it is not empty
                    stop.set()  # the next CLI starts a server with the new code
            writer.write(json.dumps(out, default=str).encode("utf-8") + b"\n")
            await writer.drain()
        except ConnectionError:
            pass
        finally:
            writer.close()

    path.unlink(missing_ok=True)  # we hold the lock: any socket here is a dead server's
    old = os.umask(0o177)  # the socket is the user's alone (0600)
    try:
        server = await asyncio.start_unix_server(handle, path=str(path), limit=MAX_REQUEST)
    finally:
        os.umask(old)
    ino = os.stat(path).st_ino
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):  # leave through ``finally``
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
                try:
                    if os.stat(path).st_ino != ino:
                        break  # our socket was replaced or removed: nobody can reach us
                except OSError:
                    break
    finally:
        try:
            if os.stat(path).st_ino == ino:
                path.unlink()
        except OSError:
            pass
