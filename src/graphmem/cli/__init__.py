"""The ``graphmem`` command line: the edge that parses, calls the façade and formats.

    app.py               the parser, the shared options and ``main`` (the console script)
    *_commands.py        one module per command group (search, sessions, code, graph, mcp)
    doctor.py            ``graphmem doctor``: assembles every subsystem's health rows
    display.py, hit_view.py   text for humans (hits, tables; terminal escapes stripped)
    search_server.py     the warm search server ``search``/``context`` start (renders with hit_view)
    search_client.py     its stdlib-only client: the fast path before anything heavy is imported
"""

from __future__ import annotations

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    """The ``graphmem`` console script. An agent's hook (``graphmem hook <agent> <Event>``, run
    once per event) goes straight to ``hook_command``, without the parser's imports."""
    import sys

    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["hook"] and len(args) == 3 and not args[1].startswith("-"):
        from graphmem.cli.hook_command import main as hook

        return hook(args[1:])
    from graphmem.cli.app import main as run

    return run(args)
