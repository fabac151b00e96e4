"""Search limits numpy's BLAS to one thread only while it runs, and gives the host its setting back.

Each scenario runs in a fresh interpreter where numpy starts with two BLAS threads (in this test
process numpy may have started with fewer, and OpenBLAS cannot be raised past the threads it
started with, so a restore could not be seen here).
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading

import pytest


def _blas_threads() -> int:
    import threadpoolctl

    info = [i for i in threadpoolctl.threadpool_info() if i["user_api"] == "blas"]
    assert info, "numpy's BLAS is not visible to threadpoolctl"
    return info[0]["num_threads"]


def nested() -> None:
    from graphmem.index import blas

    assert _blas_threads() == 2
    with blas.one_thread():
        assert _blas_threads() == 1
        with blas.one_thread():
            assert _blas_threads() == 1
        assert _blas_threads() == 1  # the inner block does not lift the outer one's limit
    assert _blas_threads() == 2


def two_threads() -> None:
    from graphmem.index import blas

    entered, release = threading.Event(), threading.Event()
    seen = []

    def other():
        with blas.one_thread():
            seen.append(_blas_threads())
            entered.set()
            release.wait(5)

    t = threading.Thread(target=other)
    with blas.one_thread():
        t.start()
        assert entered.wait(5)
        assert _blas_threads() == 1
    release.set()
    t.join(5)
    assert seen == [1] and _blas_threads() == 2


def error_inside() -> None:
    from graphmem.index import blas

    try:
        with blas.one_thread():
            raise RuntimeError("boom")
    except RuntimeError:
        pass
    assert _blas_threads() == 2


@pytest.mark.parametrize("scenario", ["nested", "two_threads", "error_inside"])
def test_one_thread_blocks_and_the_host_setting_after(scenario):
    env = dict(os.environ, OPENBLAS_NUM_THREADS="2")
    code = ("import numpy, sys; sys.path.insert(0, %r); import test_index_blas as t; t.%s(); "
            "print('ok')" % (os.path.dirname(__file__), scenario))
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr
