"""``graphmem mcp``: serve memory over MCP (stdio by default, or authenticated streamable HTTP).

``graphmem mcp token [--rotate]`` shows (or replaces) the bearer token HTTP clients must send.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from graphmem.cli.app import command
from graphmem.errors import ConfigError
from graphmem.serve.mcp_auth import is_loopback  # stdlib only: cheap before the SDK is imported


def _mcp_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("action", nargs="?", choices=["token"], default=None,
                   help="token: print the bearer token HTTP clients must send (created on first use)")
    p.add_argument("--rotate", action="store_true",
                   help="with `token`: replace the token; clients holding the old one get 401")
    p.add_argument("--spec-dir", type=Path, default=None,
                   help="default spec folder for tools that are not given spec_dir (also a root)")
    p.add_argument("--project-dir", type=Path, default=None,
                   help="default project root (default: the spec's project: its enclosing git "
                        "work tree, else two levels above it; also a root)")
    p.add_argument("--root", type=Path, action="append", default=[], metavar="DIR",
                   help="another folder whose specs and projects tools may name (repeatable); "
                        "folder arguments outside the roots are refused")
    p.add_argument("--http", metavar="HOST:PORT", default=None,
                   help="serve streamable HTTP at http://HOST:PORT/mcp instead of stdio; every "
                        "request needs the bearer token (loopback only unless --allow-remote)")
    p.add_argument("--allow-remote", action="store_true",
                   help="allow --http on a non-loopback address (still token-protected, but "
                        "plain HTTP: put TLS in front of it)")


def _cmd_mcp(args: argparse.Namespace) -> int:
    from graphmem.errors import ValidationError
    from graphmem.models import check_folders
    from graphmem.settings import Settings

    if args.action == "token":
        return _cmd_token(Settings.load().home, args.rotate)
    if args.rotate:
        raise ValidationError("only applies to `graphmem mcp token`", field="--rotate")
    # Cheap checks first: a bad option fails before the MCP SDK is imported.
    address = parse_http(args.http, args.allow_remote) if args.http else None
    check_folders(spec=args.spec_dir, project=args.project_dir)
    for root in args.root:
        check_folders(root=root)
    import anyio

    from graphmem.serve.mcp_server import build_server

    settings = Settings.load()
    server = build_server(args.spec_dir, args.project_dir, settings=settings, roots=args.root)
    if address is None:
        # stdout is the protocol channel: anything else must go to stderr.
        anyio.run(server.run_stdio_async)
    else:
        host, port = address
        app = http_app(server, settings.home, host, port)
        print(f"graphmem MCP server on http://{_url_host(host)}:{port}/mcp (bearer token: "
              "`graphmem mcp token`)", file=sys.stderr, flush=True)
        anyio.run(lambda: _serve(app, host, port))
    return 0


def _cmd_token(home: Path, rotate: bool) -> int:
    from graphmem.serve.mcp_auth import get_token, rotate_token, token_path

    token = rotate_token(home) if rotate else get_token(home)
    print(token)
    if rotate:
        print(f"graphmem: new token written to {token_path(home)}; the old one no longer works",
              file=sys.stderr)
    return 0


def http_app(server, home: Path, host: str, port: int):
    """The SDK's streamable HTTP app behind graphmem's guard (token, Host and Origin checks)."""
    from mcp.server.transport_security import TransportSecuritySettings

    from graphmem.serve.mcp_auth import HttpGuard

    # The guard checks Host/Origin for every bind address; the SDK's own check knows only
    # 127.0.0.1, localhost and ::1, so it is turned off rather than half-on.
    app = server.streamable_http_app(host=host, transport_security=TransportSecuritySettings(
        enable_dns_rebinding_protection=False))
    return HttpGuard(app, home, host, port)


async def _serve(app, host: str, port: int) -> None:
    import uvicorn

    await uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_level="warning")).serve()


def parse_http(address: str, allow_remote: bool = False) -> tuple[str, int]:
    """``HOST:PORT`` (``[::1]:PORT`` for IPv6) -> (host, port); non-loopback needs ``allow_remote``."""
    host, sep, port_text = address.rpartition(":")
    if not sep or not host:
        raise ConfigError(f"--http {address!r}: expected HOST:PORT, e.g. 127.0.0.1:8765")
    host = host.strip("[]")
    try:
        port = int(port_text)
    except ValueError:
        raise ConfigError(f"--http {address!r}: port {port_text!r} is not a number") from None
    if not 0 < port < 65536:
        raise ConfigError(f"--http {address!r}: port must be 1-65535")
    if not allow_remote and not is_loopback(host):
        raise ConfigError(f"--http {address!r}: {host} is not a loopback address; pass "
                          "--allow-remote to expose it to the network on purpose")
    return host, port


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host


command("mcp", "serve memory to agents over MCP (stdio, or --http HOST:PORT)")(_cmd_mcp)(_mcp_args)
