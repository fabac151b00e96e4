"""Write tests/slow_tests.txt from a JUnit XML report: the tests that `make test-fast` leaves out;
and tests/file_seconds.txt: each test file's seconds, by which conftest.py hands the longest files
to the xdist workers first (so that no long file starts last and runs alone).

    make slow-list   # runs the suite with --junitxml, then this script

A test is slow when it took over THRESHOLD seconds (setup and teardown included) on this 2-core
machine; parametrised cases count by their function. The file is data: conftest.py marks the tests
it names ``slow``, and a test missing from it runs in the fast subset.
"""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ET
from pathlib import Path

THRESHOLD = 0.3  # seconds on a quiet machine (1.0 under a load of ~15): the fast subset then runs in under a minute
OUT = Path(__file__).with_name("slow_tests.txt")
SECONDS = Path(__file__).with_name("file_seconds.txt")


def slow_tests(report: Path, threshold: float = THRESHOLD) -> list[str]:
    """``module::function`` of every test of ``report`` slower than ``threshold``."""
    slow = set()
    for case in ET.parse(report).iter("testcase"):
        if float(case.get("time", 0)) > threshold:
            module = case.get("classname", "").split(".")[-1]
            slow.add(f"{module}::{case.get('name', '').split('[')[0]}")
    return sorted(slow)


def file_seconds(report: Path) -> dict[str, float]:
    """Seconds of every test module of ``report`` (setup and teardown included), longest first."""
    total: dict[str, float] = {}
    for case in ET.parse(report).iter("testcase"):
        module = case.get("classname", "").split(".")[-1]
        total[module] = total.get(module, 0.0) + float(case.get("time", 0))
    return dict(sorted(total.items(), key=lambda kv: -kv[1]))


if __name__ == "__main__":
    names = slow_tests(Path(sys.argv[1]), float(sys.argv[2]) if len(sys.argv) > 2 else THRESHOLD)
    OUT.write_text("# written by tests/slow_list.py (make slow-list); conftest.py marks these slow\n"
                   + "".join(f"{n}\n" for n in names))
    print(f"{len(names)} slow tests -> {OUT}")
    seconds = file_seconds(Path(sys.argv[1]))
    SECONDS.write_text("# written by tests/slow_list.py (make slow-list): seconds per test file; "
                       "conftest.py starts the longest first\n"
                       + "".join(f"{m} {t:.1f}\n" for m, t in seconds.items()))
    print(f"{len(seconds)} test files -> {SECONDS}")
