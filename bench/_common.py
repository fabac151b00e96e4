"""Helpers shared by the benchmarks: percentiles, a table printer and JSON output."""

from __future__ import annotations

import json
import os
import platform
import statistics
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("GRAPHITI_TELEMETRY_ENABLED", "false")
RESULTS = Path(__file__).resolve().parent / "results"


def pct(values: list[float], q: float) -> float:
    """The q-th percentile (0-100) of ``values``."""
    if not values:
        return float("nan")
    s = sorted(values)
    k = min(len(s) - 1, max(0, round(q / 100 * (len(s) - 1))))
    return s[k]


def timed(fn, *args, **kwargs) -> float:
    """Milliseconds one call takes."""
    t = time.perf_counter()
    fn(*args, **kwargs)
    return (time.perf_counter() - t) * 1000


def table(title: str, columns: list[str], rows: list[list[Any]]) -> None:
    """Print an aligned table."""
    cells = [[f"{c:.3f}" if isinstance(c, float) else str(c) for c in r] for r in rows]
    widths = [max(len(h), *(len(r[i]) for r in cells)) for i, h in enumerate(columns)]
    print(f"\n{title}")
    print("  ".join(h.ljust(w) for h, w in zip(columns, widths)))
    print("  ".join("-" * w for w in widths))
    for r in cells:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths)))


def write_json(name: str, data: dict) -> Path:
    """Write ``bench/results/<name>.json`` with machine facts attached."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    data = {"machine": {"python": platform.python_version(), "cpus": os.cpu_count(),
                        "platform": platform.platform()},
            "when": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), **data}
    path = RESULTS / f"{name}.json"
    path.write_text(json.dumps(data, indent=2, default=str))
    print(f"\nwrote {path}")
    return path


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def need(path: Path, what: str, variable: str) -> None:
    """Exit 0 with a line saying what to set when material from outside the repository (the
    ../shared folder) is absent: ``make bench`` on a fresh clone runs what it can."""
    if not Path(path).exists():
        import sys

        print(f"skipped: {what} not found at {path}; set {variable} to run this benchmark")
        sys.exit(0)


# Vocabulary of the synthetic memories the graph and team benches write.
WORDS = {
    "adj": "async nightly legacy shared remote cached signed nested partial stale encrypted "
           "sharded pooled lazy batched streaming retried orphaned compressed versioned".split(),
    "what": "cache queue parser scheduler router migration token session logger worker socket "
            "config index uploader renderer validator billing invoice webhook crawler".split(),
    "verb": "drops retries blocks leaks duplicates corrupts delays skips rejects reorders "
            "truncates serialises locks expires throttles".split(),
    "obj": "messages requests rows events files headers payloads timestamps users jobs batches "
           "credentials images reports tickets".split(),
    "cond": ["under load", "after a restart", "on windows", "with unicode names", "behind the proxy",
             "during deploys", "when the disk is full", "at midnight utc", "with empty input",
             "in dry runs", "over ipv6", "for admin users"],
}


class ListingCounter:
    """Counts the ``git ls-files -o`` runs (the code snapshot's listing of untracked files)
    from now until ``stop``: ``subprocess.run`` wrapped to count, git still runs."""

    def __init__(self):
        import subprocess

        self.runs, self.module, self.real = 0, subprocess, subprocess.run

        def counting(cmd, *a, **kw):
            if "ls-files" in cmd and "-o" in cmd:
                self.runs += 1
            return self.real(cmd, *a, **kw)

        subprocess.run = counting

    def stop(self) -> None:
        self.module.run = self.real
