"""Redaction cost per text: what every write (and every query) pays before it reaches a store.

Texts: a short note with no secret (the common case, decided by the substring gate), a short note
that mentions secret-ish words (``token``, ``password``: the generic patterns run), a long code
excerpt (~8 KB), and a secret-heavy text holding one sample of every kind. Prints a table of
microseconds per text (median and p95 over repeated runs) and writes ``results/redact.json``.

    python bench/redact.py [--repeat 2000]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from _common import pct, table, write_json

from graphmem.redact import redact_text

CODE = '''def load_settings(path: Path) -> Settings:
    """Read the settings file; unknown keys are refused."""
    data = tomllib.loads(path.read_text())
    timeout = data.get("timeout", 30)
    for name, value in data.items():
        if name not in FIELDS:
            raise ConfigError(f"unknown setting {name!r} in {path}")
    return Settings(**data, timeout=timeout)
'''


def texts() -> dict[str, str]:
    from test_redact import SECRETS  # one sample of every kind, as the tests use them

    return {
        "short, plain": "Run migrations before the first request or the cache stays cold.",
        "short, secret words": "Rotate the password and the API token weekly; max_tokens=4096.",
        "long code (~8 KB)": (CODE * 20)[:8192],
        "secret-heavy": " ".join(SECRETS.values()),
    }


def measure(text: str, repeat: int) -> list[float]:
    """Microseconds per call, one sample per call."""
    out = []
    for _ in range(repeat):
        t = time.perf_counter()
        redact_text(text)
        out.append((time.perf_counter() - t) * 1e6)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=2000, help="calls per text (default 2000)")
    args = ap.parse_args()
    rows, results = [], {}
    for name, text in texts().items():
        measure(text, min(50, args.repeat))  # warm-up: patterns compiled, caches filled
        us = measure(text, args.repeat)
        changed = redact_text(text) != text
        rows.append([name, len(text), pct(us, 50), pct(us, 95), "yes" if changed else "no"])
        results[name] = {"chars": len(text), "p50_us": pct(us, 50), "p95_us": pct(us, 95),
                         "redacted": changed}
    table(f"redact_text cost per text ({args.repeat} calls each)",
          ["text", "chars", "p50 us", "p95 us", "redacted"], rows)
    write_json("redact", {"repeat": args.repeat, "texts": results})


if __name__ == "__main__":
    main()
