"""Search limits numpy's BLAS to one thread only while it runs, and gives the host its setting back."""

from __future__ import annotations

import threading

import numpy  # noqa: F401 - loaded before the limits below, so they reach its BLAS
import pytest
import threadpoolctl

from graphmem.index import blas


def _blas_threads() -> int:
    info = [i for i in threadpoolctl.threadpool_info() if i["user_api"] == "blas"]
    assert info, "numpy's BLAS is not visible to threadpoolctl"
    return info[0]["num_threads"]


def test_one_thread_inside_nested_blocks_and_the_host_setting_after():
    with threadpoolctl.threadpool_limits(2, user_api="blas"):
        assert _blas_threads() == 2
        with blas.one_thread():
            assert _blas_threads() == 1
            with blas.one_thread():
                assert _blas_threads() == 1
            assert _blas_threads() == 1  # the inner block does not lift the outer one's limit
        assert _blas_threads() == 2


def test_two_threads_in_blocks_at_once_each_run_on_one_thread_and_restore():
    with threadpoolctl.threadpool_limits(2, user_api="blas"):
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


def test_an_error_inside_the_block_still_restores():
    with threadpoolctl.threadpool_limits(2, user_api="blas"):
        with pytest.raises(RuntimeError):
            with blas.one_thread():
                raise RuntimeError("boom")
        assert _blas_threads() == 2
