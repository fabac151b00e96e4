"""Episodic sessions on the façade: turns, steps, summaries, consolidation."""

from __future__ import annotations


class SessionsMixin:
    """Session operations of ``AsyncMemory``."""
