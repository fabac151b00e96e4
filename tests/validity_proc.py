"""A process for the validity race test: for each memory id given, meets the other racers at a
barrier of files, then retires or supersedes it and prints ``<id> WON`` or
``<id> REFUSED <field> <message>``."""

from __future__ import annotations

import sys
import time
from pathlib import Path

from graphmem import Memory
from graphmem.errors import ValidationError


def barrier(folder: Path, name: str, worker: str, racers: int) -> None:
    """Wait until every racer has reached ``name``."""
    (folder / f"{name}.{worker}").touch()
    while len(list(folder.glob(f"{name}.*"))) < racers:
        time.sleep(0.001)


def main() -> None:
    spec, items, worker, racers, meet = (Path(sys.argv[1]), sys.argv[2].split(","), sys.argv[3],
                                         int(sys.argv[4]), Path(sys.argv[5]))
    with Memory(spec) as mem:
        mem.search("warm the index up", limit=1)
        for n, item in enumerate(items):
            barrier(meet, item, worker, racers)
            try:
                if (n + int(worker)) % 2:
                    mem.retire(item, f"retired by worker {worker}")
                else:
                    mem.supersede(item, f"Pin stripe to {100 * n + int(worker)} (w{worker})")
            except ValidationError as exc:
                print(f"{item} REFUSED {exc.field} {exc}", flush=True)
                continue
            print(f"{item} WON", flush=True)


if __name__ == "__main__":
    main()
