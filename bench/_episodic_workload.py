"""The workload both sides of bench/episodic.py replay: same sessions, same turn texts, same queries.

Plain Python only: it is imported by graphmem's side and by velune's (in its own venv).
"""

from __future__ import annotations

import random

_WORDS = ("database migration schema index query cache retry timeout socket server client "
          "upload download token secret config deploy staging production rollback commit branch "
          "merge rebase conflict test fixture mock assert coverage lint format type error warning "
          "exception traceback logging metric alert latency throughput memory leak thread process "
          "lock queue worker scheduler cron backup restore snapshot volume container image build "
          "pipeline artifact release version changelog docs readme api endpoint route handler "
          "middleware auth session cookie header payload json yaml toml parser encoder decoder "
          "vector embedding graph node edge episode summary insight pattern gotcha refactor "
          "function method class module package import dependency upgrade pin wheel venv python "
          "falkordb redis sqlite postgres kafka nginx docker kubernetes helm terraform ansible").split()

TURNS_PER_SESSION = 1000


def turn_text(i: int) -> str:
    """The i-th turn's content: 8-40 words, deterministic."""
    rng = random.Random(i)
    return " ".join(rng.choice(_WORDS) for _ in range(rng.randint(8, 40)))


def role(i: int) -> str:
    return "user" if i % 2 == 0 else "assistant"


def queries(n: int = 50) -> list[str]:
    """Search queries of one or two words."""
    rng = random.Random(12345)
    return [" ".join(rng.sample(_WORDS, rng.choice((1, 2)))) for _ in range(n)]
