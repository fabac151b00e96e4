"""graphmem: memory for autonomous coding agents. Files first; a knowledge graph when enabled."""

import os as _os

# graphiti-core reads this at import time; graphmem never phones home.
_os.environ.setdefault("GRAPHITI_TELEMETRY_ENABLED", "false")

from .errors import (ConfigError, GraphError, GraphmemError, NotFoundError,
                     ProviderError, StorageError, ValidationError)

__all__ = ["AsyncMemory", "ConfigError", "GraphError", "GraphmemError", "Hit", "Memory",
           "MemoryItem", "NotFoundError", "ProviderError", "SaveReport", "Settings",
           "StorageError", "ValidationError"]
__version__ = "0.1.0"

# The façade and the models load on first use: ``import graphmem.cli.app`` (every command) would
# otherwise pay for pydantic and the whole write path before parsing its arguments.
_LAZY = {"AsyncMemory": "facade.async_memory", "Memory": "facade.memory", "Hit": "models",
         "MemoryItem": "models", "SaveReport": "models", "Settings": "settings"}


def __getattr__(name: str):
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'graphmem' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value
