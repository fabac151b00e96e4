"""Load the reference memory module (``../shared/reference``) to check compatibility against it.

The reference is a specification we must stay compatible with; loading it here lets tests check
that it reads what graphmem writes. It is never copied into graphmem. A clone without the shared
folder skips these tests; ``GRAPHMEM_REFERENCE_DIR`` points them at the folder elsewhere.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
REFERENCE_NAME = "auto-claude-memory.py.txt"

# Read at import: the autouse ``isolated_env`` fixture removes every GRAPHMEM_* variable before a
# test's own fixtures run, so a lookup inside a fixture would never see the user's setting.
REFERENCE_DIR = Path(os.environ.get("GRAPHMEM_REFERENCE_DIR") or REPO.parent / "shared" / "reference")


def reference_file() -> Path | None:
    """``auto-claude-memory.py.txt`` in ``REFERENCE_DIR``, or None when it is absent."""
    path = REFERENCE_DIR / REFERENCE_NAME
    return path if path.is_file() else None


def skip_reason() -> str:
    """Why the reference tests skip, and what to set so that they run."""
    return (f"reference module not found at {REFERENCE_DIR / REFERENCE_NAME}; set "
            "GRAPHMEM_REFERENCE_DIR to the folder holding it (shared/reference) to run these tests")


def load_reference(tmp_dir: Path):
    """Import the reference module from its text file (its first line is a path header)."""
    path = reference_file()
    if path is None:
        raise FileNotFoundError(skip_reason())
    text = path.read_text(encoding="utf-8")
    start = text.index("#!/usr/bin/env python3")
    Path(tmp_dir).mkdir(parents=True, exist_ok=True)
    mod_path = Path(tmp_dir) / "reference_memory.py"
    mod_path.write_text(text[start:], encoding="utf-8")
    spec = importlib.util.spec_from_file_location("reference_memory", mod_path)
    module = importlib.util.module_from_spec(spec)
    sys.modules["reference_memory"] = module
    spec.loader.exec_module(module)
    return module
