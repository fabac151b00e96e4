"""The file store: the source of truth. Every other backend is derived from these files."""

from .atomic import append_line, atomic_write_bytes, atomic_write_json, atomic_write_text
from .lock import folder_lock
from .spec_store import SpecStore

__all__ = ["SpecStore", "append_line", "atomic_write_bytes", "atomic_write_json",
           "atomic_write_text", "folder_lock"]
