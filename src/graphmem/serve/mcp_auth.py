"""The HTTP MCP edge's guard: a bearer token kept 0600 in ``GRAPHMEM_HOME``, and Host/Origin checks.

Every HTTP request must carry ``Authorization: Bearer <token>`` and a ``Host`` naming the address
the server was bound to (an ``Origin``, when a browser sends one, must name it too). Anything else
is answered with a bare status and a one-line JSON error before the MCP app sees it, so an
unauthenticated client learns nothing about the tools or the memory behind them.
"""

from __future__ import annotations

import errno
import hmac
import ipaddress
import json
import logging
import os
import secrets
import stat
from pathlib import Path
from typing import Any, Awaitable, Callable

from graphmem.errors import ConfigError

log = logging.getLogger("graphmem.mcp")

TOKEN_FILE = "mcp_token"

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


def token_path(home: Path) -> Path:
    """Where the HTTP MCP token of this ``GRAPHMEM_HOME`` lives."""
    return Path(home) / TOKEN_FILE


def read_token(home: Path) -> str | None:
    """The stored token, or None when there is none yet; refuses a file others could read or swap."""
    path = token_path(home)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno == errno.ELOOP:  # a symlink: its target is not ours to trust
            raise ConfigError(f"{path} is a symbolic link; remove it and run "
                              "`graphmem mcp token --rotate`") from None
        raise ConfigError(f"cannot read {path}: {exc.strerror}") from None
    with os.fdopen(fd, "r", encoding="ascii", errors="replace") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode):
            raise ConfigError(f"{path} is not a regular file")
        if st.st_uid != os.getuid() or st.st_mode & 0o077:
            # A token others can read is no secret: refuse rather than serve with it.
            raise ConfigError(f"{path} has mode {stat.S_IMODE(st.st_mode):04o} owned by uid "
                              f"{st.st_uid}: it must be 0600 and yours; run "
                              "`graphmem mcp token --rotate` to replace it")
        token = f.read().strip()
    return token or None


def write_token(home: Path, token: str, *, replace: bool = True) -> bool:
    """Store ``token`` atomically, created 0600 (never through a symlink, never briefly readable).

    With ``replace=False`` an existing token wins (two first uses at once agree on one token);
    returns whether this token was stored.
    """
    home = Path(home)
    home.mkdir(parents=True, exist_ok=True, mode=0o700)
    path = token_path(home)
    tmp = home / f".{TOKEN_FILE}.{secrets.token_hex(8)}.tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
    try:
        with os.fdopen(fd, "w", encoding="ascii") as f:
            f.write(token + "\n")
            f.flush()
            os.fsync(f.fileno())
        if replace:
            os.replace(tmp, path)  # replaces a link itself, never its target
            return True
        try:
            os.link(tmp, path)  # fails if a token (or anything) is already there
            return True
        except FileExistsError:
            return False
    finally:
        tmp.unlink(missing_ok=True)


def get_token(home: Path) -> str:
    """The token of this home, generated on first use."""
    token = read_token(home)
    if token is None:
        token = secrets.token_urlsafe(32)
        if not write_token(home, token, replace=False):
            token = read_token(home)  # another process created it first: use theirs
    if token is None:
        raise ConfigError(f"{token_path(home)} is empty; run `graphmem mcp token --rotate`")
    return token


def rotate_token(home: Path) -> str:
    """Replace the token with a fresh one; clients holding the old one get 401 from then on."""
    token = secrets.token_urlsafe(32)
    write_token(home, token)
    return token


def allowed_hosts(host: str, port: int) -> set[str] | None:
    """``Host`` header values this bind address answers to; None for a wildcard bind (any name)."""
    if _is_wildcard(host):
        return None  # 0.0.0.0 / ::: clients name the machine however they reach it
    names = {f"[{host}]" if ":" in host else host}
    if is_loopback(host):
        names.add("localhost")  # a name no other machine (or rebinding page) can claim
        if host == "localhost":
            names |= {"127.0.0.1", "[::1]"}
    return {f"{name.lower()}:{port}" for name in names}


class HttpGuard:
    """ASGI middleware: Host/Origin first (421/403), then the bearer token (401), then the app."""

    def __init__(self, app: ASGIApp, home: Path, host: str, port: int):
        self.app = app
        self.home = Path(home)
        self.hosts = allowed_hosts(host, port)
        self.port = port
        self._stamp: tuple[int, int, int] | None = None
        self._token: str | None = None
        get_token(self.home)  # generated now, so `graphmem mcp token` shows the one in use

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self.app(scope, receive, send)  # starts and stops the SDK's session manager
            return
        if scope["type"] != "http":
            await send({"type": "websocket.close", "code": 1008})  # MCP speaks plain HTTP only
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        host = headers.get("host", "").lower()
        if not self._host_ok(host):
            await _reply(send, 421, "invalid Host header")
            return
        origin = headers.get("origin")
        if origin is not None and origin.lower() != f"http://{host}":
            await _reply(send, 403, "invalid Origin header")
            return
        if not self._token_ok(headers.get("authorization", "")):
            await _reply(send, 401, "missing or wrong bearer token (see `graphmem mcp token`)",
                         [(b"www-authenticate", b'Bearer realm="graphmem"')])
            return
        await self.app(scope, receive, send)

    def _host_ok(self, host: str) -> bool:
        if self.hosts is None:
            return host.rpartition(":")[2] == str(self.port)
        return host in self.hosts

    def _token_ok(self, authorization: str) -> bool:
        scheme, _, presented = authorization.partition(" ")
        expected = self._current_token()
        if scheme.lower() != "bearer" or not presented or expected is None:
            return False
        return hmac.compare_digest(presented.strip().encode(), expected.encode())

    def _current_token(self) -> str | None:
        """The token on disk, re-read when the file changes (a rotation takes effect at once)."""
        try:
            st = os.stat(token_path(self.home), follow_symlinks=False)
        except OSError:
            return None  # deleted while serving: refuse everyone until a token exists again
        stamp = (st.st_ino, st.st_mtime_ns, st.st_size)
        if stamp != self._stamp:
            try:
                self._token = read_token(self.home)
            except ConfigError as exc:
                log.error("refusing every request: %s", exc)
                self._token = None
            self._stamp = stamp
        return self._token


async def _reply(send: Send, status: int, message: str,
                 extra: list[tuple[bytes, bytes]] | None = None) -> None:
    body = json.dumps({"error": message}).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"),
                            (b"content-length", str(len(body)).encode()), *(extra or [])]})
    await send({"type": "http.response.body", "body": body})


def is_loopback(host: str) -> bool:
    """``localhost`` or an address of the loopback network (127.0.0.0/8, ::1)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _is_wildcard(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_unspecified
    except ValueError:
        return False
