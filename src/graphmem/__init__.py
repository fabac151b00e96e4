"""graphmem: memory for autonomous coding agents. Files first; a knowledge graph when enabled."""

import os as _os

# graphiti-core reads this at import time; graphmem never phones home.
_os.environ.setdefault("GRAPHITI_TELEMETRY_ENABLED", "false")

from .errors import (ConfigError, GraphError, GraphmemError, NotFoundError,  # noqa: E402
                     ProviderError, StorageError, ValidationError)
from .memory import AsyncMemory, Memory  # noqa: E402
from .models import Hit, MemoryItem, SaveReport  # noqa: E402
from .settings import Settings  # noqa: E402

__all__ = ["AsyncMemory", "ConfigError", "GraphError", "GraphmemError", "Hit", "Memory",
           "MemoryItem", "NotFoundError", "ProviderError", "SaveReport", "Settings",
           "StorageError", "ValidationError"]
__version__ = "0.1.0"
