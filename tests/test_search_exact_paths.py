"""Faster paths of a search that must give exactly what the plain ones gave (issue 17, search
p95): the late stage's MaxSim product in row chunks. Equality is bit for bit: a search's hits and
scores stay the same.
"""

from __future__ import annotations

import numpy as np
import pytest

from graphmem.index import late, maxsim
from graphmem.providers.local_colbert import pack, unpack


def _pool(seed: int, sizes: list[int], dim: int = 384) -> list[tuple[np.ndarray, np.ndarray]]:
    """Packed token matrices as the index stores them (int8 tokens, float32 scales)."""
    rng = np.random.default_rng(seed)
    out = []
    for n in sizes:
        m = rng.standard_normal((n, dim)).astype(np.float32)
        out.append(unpack(pack(m / np.linalg.norm(m, axis=1, keepdims=True))))
    return out


def _query(seed: int, q: int = 21) -> np.ndarray:
    qm = np.random.default_rng(seed).standard_normal((q, 384)).astype(np.float32)
    return qm / np.linalg.norm(qm, axis=1, keepdims=True)


def _one_product(mats, qm, session) -> np.ndarray:
    """The product before chunking: every token row of the pool in one run, then each
    matrix's best rows."""
    tokens = np.concatenate([m[0] for m in mats])
    scales = np.concatenate([m[1] for m in mats])
    if session is not None:
        sims = session.run(None, {"tokens": tokens, "scales": scales[:, None],
                                  "query": qm.T.copy()})[0]
    else:
        sims = (tokens.astype(np.float32) @ qm.T) * scales[:, None]
    starts = np.cumsum([0, *(len(m[0]) for m in mats[:-1])])
    return np.maximum.reduceat(sims, starts, axis=0)


# matrix sizes: one row, rows summing past a chunk, a matrix larger than a chunk on its own
SIZES = [1, 37, 256, 5, 180, 1, 99, 256, 64, 3, 250, 2, 1200, 17, 140, 256, 9]


@pytest.mark.parametrize("chunk_rows", [1024, 1000, 300, 256, 7, 1])
@pytest.mark.parametrize("sizes", [SIZES, [1], [1, 1], [300, 1], [2, 1, 1, 5, 1]])
@pytest.mark.parametrize("tokens", [21, 1])
def test_chunked_maxsim_is_the_one_product_bit_for_bit(chunk_rows, sizes, tokens):
    """Chunks of any size, not dividing the pool (2,777 rows), give the same float32 values as
    one product of the whole pool in onnxruntime: single rows and a one-token query too (there
    onnxruntime sums in another order, so they never make a chunk of their own)."""
    session = maxsim.maxsim_session()
    assert session is not None  # the onnxruntime path is the one searches take
    mats, qm = _pool(1, sizes), _query(2, q=tokens)
    got = maxsim.best_matches(mats, qm, chunk_rows=chunk_rows)
    want = _one_product(mats, qm, session)
    assert got.shape == (len(sizes), len(qm)) and got.dtype == np.float32
    assert np.array_equal(got, want)
    again = maxsim.best_matches(mats[::-1], qm, chunk_rows=chunk_rows)  # reused buffers
    assert np.array_equal(again, _one_product(mats[::-1], qm, session))


def test_chunked_maxsim_of_no_rows_and_of_rows_without_tokens():
    """An empty pool gives an empty answer; through ``token_best``, rows without tokens are NaN
    and the others are the one product's values."""
    qm = _query(3, q=9)
    assert maxsim.best_matches([], qm).shape == (0, 9)
    assert np.isnan(late.token_best(qm, [None, None])).all()
    mats = _pool(4, [12, 1, 40])
    docs = [None, mats[0], mats[1], None, mats[2], mats[0]]  # the last shares row 1's matrix
    got = late.token_best(qm, docs)
    want = _one_product(mats, qm, maxsim.maxsim_session()).T
    assert np.isnan(got[:, [0, 3]]).all()
    assert np.array_equal(got[:, [1, 2, 4, 5]], want[:, [0, 1, 2, 0]])


def test_chunked_maxsim_in_numpy_when_onnxruntime_is_unusable(monkeypatch):
    """Without the onnxruntime session numpy computes the chunks: the same values as numpy's
    one product, to float32 rounding (a BLAS may sum a small chunk in another order)."""
    monkeypatch.setattr(maxsim, "_maxsim", [None])
    mats, qm = _pool(5, SIZES), _query(6)
    for chunk_rows in (1024, 300, 1):
        got = maxsim.best_matches(mats, qm, chunk_rows=chunk_rows)
        np.testing.assert_allclose(got, _one_product(mats, qm, None), rtol=1e-6, atol=1e-6)

