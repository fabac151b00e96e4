"""``graphmem mcp``: serve memory over MCP (stdio by default, or streamable HTTP on loopback)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .cli import command


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
    import anyio

    from .errors import NotFoundError
    from .mcp_server import build_server, parse_http

    address = parse_http(args.http, args.allow_remote) if args.http else None
    if args.spec_dir is not None and not args.spec_dir.is_dir():
        raise NotFoundError(f"spec folder not found: {args.spec_dir}")
    if args.project_dir is not None and not args.project_dir.is_dir():
        raise NotFoundError(f"project folder not found: {args.project_dir}")
    server = build_server(args.spec_dir, args.project_dir)
    if address is None:
        # stdout is the protocol channel: anything else must go to stderr.
        anyio.run(server.run_stdio_async)
    else:
        host, port = address
        print(f"graphmem MCP server on http://{_url_host(host)}:{port}/mcp", file=sys.stderr, flush=True)
        anyio.run(lambda: server.run_streamable_http_async(host=host, port=port))
    return 0


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host


command("mcp", "serve memory to agents over MCP (stdio, or --http HOST:PORT)")(_cmd_mcp)(_mcp_args)
