"""Hooks that run graphmem from other programs' lifecycles: git hooks (``git_hooks.py``)."""
