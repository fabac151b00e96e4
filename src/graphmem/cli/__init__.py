"""The ``graphmem`` command line: the edge that parses, calls the façade and formats.

    app.py               the parser, the shared options and ``main`` (the console script)
    *_commands.py        one module per command group (search, sessions, code, graph, mcp)
    doctor.py            ``graphmem doctor``: assembles every subsystem's health rows
    display.py, hit_view.py   text for humans (hits, tables; terminal escapes stripped)
    search_server.py     the warm search server ``search``/``context`` start (renders with hit_view)
    search_client.py     its stdlib-only client: the fast path before anything heavy is imported
"""

from graphmem.cli.app import main

__all__ = ["main"]
