"""Load the reference memory module (``../shared/reference``) to check compatibility against it.

The reference is a specification we must stay compatible with; loading it here lets tests check
that it reads what graphmem writes. It is never copied into graphmem.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def reference_file() -> Path:
    """``auto-claude-memory.py.txt`` beside the repo (``GRAPHMEM_REFERENCE_DIR`` overrides)."""
    base = Path(os.environ.get("GRAPHMEM_REFERENCE_DIR", REPO.parent / "shared" / "reference"))
    path = base / "auto-claude-memory.py.txt"
    if not path.is_file():
        raise FileNotFoundError(f"reference memory module not found at {path}; "
                                "set GRAPHMEM_REFERENCE_DIR to the shared/reference folder")
    return path


def load_reference(tmp_dir: Path):
    """Import the reference module from its text file (its first line is a path header)."""
    text = reference_file().read_text(encoding="utf-8")
    start = text.index("#!/usr/bin/env python3")
    Path(tmp_dir).mkdir(parents=True, exist_ok=True)
    mod_path = Path(tmp_dir) / "reference_memory.py"
    mod_path.write_text(text[start:], encoding="utf-8")
    spec = importlib.util.spec_from_file_location("reference_memory", mod_path)
    module = importlib.util.module_from_spec(spec)
    sys.modules["reference_memory"] = module
    spec.loader.exec_module(module)
    return module
