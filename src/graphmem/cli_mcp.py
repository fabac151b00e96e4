"""``graphmem mcp``: serve memory over MCP (stdio by default, or streamable HTTP on loopback)."""

from __future__ import annotations

import argparse
import ipaddress
import sys
from pathlib import Path

from .cli import command
from .errors import ConfigError


def _mcp_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--spec-dir", type=Path, default=None,
                   help="default spec folder for tools that are not given spec_dir")
    p.add_argument("--project-dir", type=Path, default=None,
                   help="default project root (default: two levels above the spec folder)")
    p.add_argument("--http", metavar="HOST:PORT", default=None,
                   help="serve streamable HTTP at http://HOST:PORT/mcp instead of stdio "
                        "(loopback only unless --allow-remote)")
    p.add_argument("--allow-remote", action="store_true",
                   help="allow --http on a non-loopback address (the server has no authentication)")


def _cmd_mcp(args: argparse.Namespace) -> int:
    from .errors import NotFoundError

    # Cheap checks first: a bad option fails before the MCP SDK is imported.
    address = parse_http(args.http, args.allow_remote) if args.http else None
    if args.spec_dir is not None and not args.spec_dir.is_dir():
        raise NotFoundError(f"spec folder not found: {args.spec_dir}")
    if args.project_dir is not None and not args.project_dir.is_dir():
        raise NotFoundError(f"project folder not found: {args.project_dir}")
    import anyio

    from .mcp_server import build_server

    server = build_server(args.spec_dir, args.project_dir)
    if address is None:
        # stdout is the protocol channel: anything else must go to stderr.
        anyio.run(server.run_stdio_async)
    else:
        host, port = address
        print(f"graphmem MCP server on http://{_url_host(host)}:{port}/mcp", file=sys.stderr, flush=True)
        anyio.run(lambda: server.run_streamable_http_async(host=host, port=port))
    return 0


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
    if not allow_remote and not _is_loopback(host):
        raise ConfigError(f"--http {address!r}: {host} is not a loopback address; the server has no "
                          "authentication, so pass --allow-remote to expose it on purpose")
    return host, port


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host


command("mcp", "serve memory to agents over MCP (stdio, or --http HOST:PORT)")(_cmd_mcp)(_mcp_args)
