"""Files that are not regular files where code memory reads the project: a tracked file replaced
by a FIFO, a FIFO swapped in after a check, a link to a device. Each is skipped, never read (reading a FIFO
waits for a writer that may never come), so writes and reads finish; every call runs in a
subprocess with a timeout, so a hang fails its test rather than the suite."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading

import pytest

from graphmem import Memory
from test_code_freshness import project

PAY = "def refund(order):\n    return order.total\n\n\ndef charge(n):\n    return n\n"
REFUND = "`refund` in src/pay.py must run after the ledger write"
WRITE = """
import sys
from graphmem import Memory
with Memory(sys.argv[1], sys.argv[2]) as mem:
    mem.append_gotcha(sys.argv[3])
print("written")
"""


def run(what: str, args: list[str], timeout: float = 60) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(args, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        pytest.fail(f"{what} hung (over {timeout:.0f}s)")


def cli(*args: str) -> subprocess.CompletedProcess:
    return run(f"graphmem {args[0]}", [sys.executable, "-m", "graphmem.cli", *args])


def test_a_tracked_file_replaced_by_a_fifo_is_not_read_by_writes_or_reads(tmp_path):
    root, spec = project(tmp_path, {"src/pay.py": PAY, "src/other.py": "def other():\n    pass\n"})
    with Memory(spec, root) as mem:
        mem.append_gotcha(REFUND)
    (root / "src" / "pay.py").unlink()
    os.mkfifo(root / "src" / "pay.py")  # git still tracks src/pay.py; the work tree has a FIFO
    wrote = run("a write", [sys.executable, "-c", WRITE, str(spec), str(root),
                 "`charge` in src/pay.py rounds to cents"])
    assert wrote.returncode == 0 and "written" in wrote.stdout, wrote.stderr
    about = cli("about", "refund", "--project-dir", str(root), "--json")
    assert about.returncode == 0, about.stderr
    assert [e["text"] for e in json.loads(about.stdout)["current"]] == [REFUND]
    found = cli("search", "refund ledger", "--project-dir", str(root), "--scope", "project",
                "--json")
    assert found.returncode == 0, found.stderr
    assert REFUND in [h["text"] for h in json.loads(found.stdout)]
    ctx = cli("context", "refund after the ledger write", "--project-dir", str(root),
              "--file", "src/pay.py")
    assert ctx.returncode == 0 and REFUND in ctx.stdout, ctx.stderr


def test_a_fifo_swapped_in_after_the_stat_is_not_read(tmp_path):
    # what the untracked-file hasher meets when a file becomes a FIFO between its stat and its
    # open: the open itself must not wait and must refuse what is not a regular file
    from graphmem.code.history import read_regular

    fifo, regular = tmp_path / "events.pipe", tmp_path / "a.py"
    os.mkfifo(fifo)
    regular.write_bytes(b"x = 1\n")
    got: list = []
    reader = threading.Thread(target=lambda: got.append(read_regular(fifo)), daemon=True)
    reader.start()
    reader.join(10)
    if reader.is_alive():  # unblock the reader before failing, so the suite goes on
        with open(fifo, "wb"):
            pass
        pytest.fail("reading a FIFO waited for a writer")
    assert got == [None]
    assert read_regular(regular)[0] == b"x = 1\n"
    assert read_regular(regular, limit=3) is None  # over the limit: not read whole
    assert read_regular("/dev/zero") is None
