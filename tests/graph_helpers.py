"""Helpers for the graph tests: a deterministic embedder and a private FalkorDB per test home."""

from __future__ import annotations

import hashlib
import math
import re
from typing import Sequence


class HashEmbedder:
    """Deterministic bag-of-words vectors: texts sharing words get close vectors."""

    def __init__(self, dimension: int = 64, name: str = "test/hash"):
        self.dimension = dimension
        self.name = f"{name}-{dimension}"
        self.calls = 0

    async def embed(self, texts: Sequence[str]) -> list[list[float]]:
        self.calls += 1
        out = []
        for text in texts:
            v = [0.0] * self.dimension
            for w in re.findall(r"\w+", text.casefold()):
                h = int.from_bytes(hashlib.blake2b(w.encode(), digest_size=8).digest(), "big")
                v[h % self.dimension] += 1.0 if (h >> 32) & 1 else -1.0
            norm = math.sqrt(sum(x * x for x in v)) or 1.0
            out.append([x / norm if norm else 0.0 for x in v] if any(v) else [1.0] + [0.0] * (self.dimension - 1))
        return out
