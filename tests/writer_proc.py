"""A writer process for the concurrency and crash tests: prints ``ACK <kind> <value>`` per write."""

from __future__ import annotations

import sys
from pathlib import Path

from graphmem import compat


def main() -> None:
    spec, worker, count = Path(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
    for i in range(count):
        op = i % 4
        if op == 0:
            value = f"gotcha w{worker} n{i}" if i % 8 else f"shared gotcha {i % 10}"
            compat.append_gotcha(spec, value)
        elif op == 1:
            value = f"pattern w{worker} n{i}"
            compat.append_pattern(spec, value)
        elif op == 2:
            value = f"src/w{worker}/f{i}.py"
            compat.update_codebase_map(spec, {value: f"file {i} of worker {worker}"})
        else:
            value = str(worker * 10_000 + i + 1)
            compat.save_session_insights(spec, int(value), {"what_worked": [f"w{worker} i{i}"]})
        print(f"ACK {op} {value}", flush=True)


if __name__ == "__main__":
    main()
