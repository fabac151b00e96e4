"""Write tests/slow_tests.txt from a JUnit XML report: the tests that `make test-fast` leaves out.

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


def slow_tests(report: Path, threshold: float = THRESHOLD) -> list[str]:
    """``module::function`` of every test of ``report`` slower than ``threshold``."""
    slow = set()
    for case in ET.parse(report).iter("testcase"):
        if float(case.get("time", 0)) > threshold:
            module = case.get("classname", "").split(".")[-1]
            slow.add(f"{module}::{case.get('name', '').split('[')[0]}")
    return sorted(slow)


if __name__ == "__main__":
    names = slow_tests(Path(sys.argv[1]), float(sys.argv[2]) if len(sys.argv) > 2 else THRESHOLD)
    OUT.write_text("# written by tests/slow_list.py (make slow-list); conftest.py marks these slow\n"
                   + "".join(f"{n}\n" for n in names))
    print(f"{len(names)} slow tests -> {OUT}")
