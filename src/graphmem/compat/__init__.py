"""Auto-Claude's ``memory`` package, module for module and name for name, on graphmem.

Switch Auto-Claude with one line, run before anything imports ``memory`` (its ``run.py``, or a
test's ``conftest.py``)::

    import graphmem.compat; graphmem.compat.install()

``install`` makes ``memory`` and each of its modules (``memory.paths``, ``memory.sessions``,
``memory.codebase_map``, ``memory.patterns``, ``memory.summary``, ``memory.graphiti_helpers``,
``memory.main``) these modules. Or import the functions directly::

    from graphmem.compat import save_session_insights, load_all_insights, append_gotcha

Same signatures and return shapes; behind them, graphmem's atomic, locked file store, its index
and (when on) its graph. ``graphmem.compat.graphiti`` is the ``GraphitiMemory`` side.
"""

from __future__ import annotations

import sys
from types import ModuleType

from ._store import _CACHE, _close_all  # noqa: F401  (tests reach the process's cache)
from ._store import memory as _mem  # noqa: F401
from .codebase_map import load_codebase_map, update_codebase_map
from .graphiti_helpers import is_graphiti_memory_enabled
from .paths import clear_memory, get_memory_dir, get_session_insights_dir
from .patterns import append_gotcha, append_pattern, load_gotchas, load_patterns
from .sessions import load_all_insights, save_session_insights
from .summary import get_memory_summary

__all__ = [
    "append_gotcha", "append_pattern", "clear_memory", "get_memory_dir", "get_memory_summary",
    "get_session_insights_dir", "is_graphiti_memory_enabled", "load_all_insights",
    "load_codebase_map", "load_gotchas", "load_patterns", "save_session_insights",
    "update_codebase_map",
]

MODULES = ("paths", "sessions", "codebase_map", "patterns", "summary", "graphiti_helpers", "main")


def install(name: str = "memory") -> ModuleType:
    """Make ``import memory`` (and ``memory.<module>``) give these modules; returns the package.

    Run it before the first ``import memory``; an already imported ``memory`` is replaced.
    """
    import importlib

    package = sys.modules[__name__]
    sys.modules[name] = package
    for module in MODULES:
        sys.modules[f"{name}.{module}"] = importlib.import_module(f"{__name__}.{module}")
    return package
