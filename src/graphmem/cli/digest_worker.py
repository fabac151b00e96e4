"""``python -m graphmem.cli.digest_worker PROJECT``: the detached digest worker that the agent
hooks' Stop, PreCompact and SessionEnd start (``hooks/digest_state.start_worker``).

It runs ``hooks/digest.py`` with the warm search server's key for the project's settings, under
which the worker keeps the briefing it computes after digesting (``hooks/brief_cache.py``). The
key is worked out here, in the worker, not in the hook that starts it: the hook is paid for on
every turn, the worker runs in the background.
"""

from __future__ import annotations

import sys


def main(argv: list[str]) -> int:
    """Digest the project's spools (``hooks/digest.main``), the briefing kept under the key."""
    from graphmem.cli.search_client import client_config
    from graphmem.hooks.digest import main as digest

    if len(argv) != 1:
        print("usage: python -m graphmem.cli.digest_worker PROJECT", file=sys.stderr)
        return 2
    cfg = client_config(cwd=argv[0])
    return digest(argv + ([cfg.key] if cfg is not None and cfg.mode != "off" else []))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
