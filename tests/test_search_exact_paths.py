"""Faster paths of a search that must give exactly what the plain ones gave (issue 17, search
p95): the late stage's MaxSim product in row chunks, and the word stage's postings read in one
call for all query terms. Equality is bit for bit: a search's hits and scores stay the same.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from graphmem.index import late, maxsim
from graphmem.providers.local_colbert import pack, unpack

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
from codemem_exact import one_product, term_scores_per_term


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
    want = one_product(mats, qm, session)
    assert got.shape == (len(sizes), len(qm)) and got.dtype == np.float32
    assert np.array_equal(got, want)
    again = maxsim.best_matches(mats[::-1], qm, chunk_rows=chunk_rows)  # reused buffers
    assert np.array_equal(again, one_product(mats[::-1], qm, session))


def test_chunked_maxsim_of_no_rows_and_of_rows_without_tokens():
    """An empty pool gives an empty answer; through ``token_best``, rows without tokens are NaN
    and the others are the one product's values."""
    qm = _query(3, q=9)
    assert maxsim.best_matches([], qm).shape == (0, 9)
    assert np.isnan(late.token_best(qm, [None, None])).all()
    mats = _pool(4, [12, 1, 40])
    docs = [None, mats[0], mats[1], None, mats[2], mats[0]]  # the last shares row 1's matrix
    got = late.token_best(qm, docs)
    want = one_product(mats, qm, maxsim.maxsim_session()).T
    assert np.isnan(got[:, [0, 3]]).all()
    assert np.array_equal(got[:, [1, 2, 4, 5]], want[:, [0, 1, 2, 0]])


def test_chunked_maxsim_on_several_threads_at_once():
    """Each thread keeps its own chunk buffers and binding: searches on several threads at once
    (the search server's worker, the event loop) still get the one product's values."""
    from concurrent.futures import ThreadPoolExecutor

    session = maxsim.maxsim_session()
    pools = [(_pool(10 + i, SIZES[i:] + SIZES[:i]), _query(20 + i, q=5 + i)) for i in range(4)]
    want = [one_product(m, q, session) for m, q in pools]

    def run(i: int) -> bool:
        return all(np.array_equal(maxsim.best_matches(*pools[i], chunk_rows=300), want[i])
                   for _ in range(15))

    with ThreadPoolExecutor(4) as ex:
        assert all(ex.map(run, range(4)))


def test_chunked_maxsim_in_numpy_when_onnxruntime_is_unusable(monkeypatch):
    """Without the onnxruntime session numpy computes the chunks: the same values as numpy's
    one product, to float32 rounding (a BLAS may sum a small chunk in another order)."""
    monkeypatch.setattr(maxsim, "_maxsim", [None])
    mats, qm = _pool(5, SIZES), _query(6)
    for chunk_rows in (1024, 300, 1):
        got = maxsim.best_matches(mats, qm, chunk_rows=chunk_rows)
        np.testing.assert_allclose(got, one_product(mats, qm, None), rtol=1e-6, atol=1e-6)


# ---- the word stage's postings, read for all query terms at once --------------------------

def _index_with_base_delta_and_deletes(tmp_path):
    """A real index whose view has a saved base, a delta (sessions spanning both, a word only
    the delta knows), and rows deleted or replaced since the base."""
    import asyncio

    from graphmem.index.local_index import LocalIndex
    from graphmem.models import MemoryItem

    idx = LocalIndex(tmp_path / "home", None)
    words = ["retry", "backoff", "cache", "tenant", "deploy", "key", "proxy", "port", "flaky"]
    rng = np.random.default_rng(8)

    def turns(start, n, prefix):
        return [MemoryItem(id=f"{prefix}{i}", kind="turn", project="/p", spec="s",
                           session=f"s{i % 7}", metadata={"i": i},
                           text=" ".join(rng.choice(words, int(rng.integers(1, 6)))))
                for i in range(start, start + n)]

    asyncio.run(idx.upsert(turns(0, 60, "a")))
    base = idx.snapshot().base
    asyncio.run(idx.upsert(turns(60, 25, "b") + [MemoryItem(
        id="z", kind="gotcha", project="/p", spec="s", session="s3", text="zebra retry")]))
    asyncio.run(idx.upsert(turns(3, 4, "a")))  # same ids, new text: the base copies are hidden
    idx.delete(project="/p", ids=["a10", "a11", "b61"])
    view = idx.snapshot()
    assert view.base is base and view.n > view.nb and view.n_live < view.n  # all three kinds
    from graphmem.index.text import tokenize

    terms = list(idx.term_ids(tokenize(" ".join(words) + " zebra")).values())
    return idx, view, terms


def test_postings_of_all_terms_are_each_terms_postings_in_turn(tmp_path):
    """``postings_of`` gives, term after term, what ``postings`` reads for each term alone; a
    term no segment holds, or only the delta, gives nothing or the delta's rows."""
    from graphmem.index.tuning import DEFAULT

    _, view, terms = _index_with_base_delta_and_deletes(tmp_path)
    terms = [*terms, 10**6, terms[0]]  # a term nobody holds, and one asked twice
    d, w, counts = view.postings_of(terms, DEFAULT)
    reads = [view.postings(t, DEFAULT) for t in terms]
    assert counts.tolist() == [len(r[0]) for r in reads] and counts[-2] == 0
    assert np.array_equal(d, np.concatenate([r[0] for r in reads]))
    assert np.array_equal(w, np.concatenate([r[2] for r in reads]))
    assert d.dtype == reads[0][0].dtype  # positions as the per-term read gives them
    empty = view.postings_of([], DEFAULT)
    assert [len(x) for x in empty] == [0, 0, 0]


def test_session_postings_of_all_terms_add_base_and_delta_counts(tmp_path):
    """``session_postings_of``: per term, every session holding it once, its base and delta
    counts added, as one read per term and segment gives them."""
    _, view, terms = _index_with_base_delta_and_deletes(tmp_path)
    which, sess, count = view.session_postings_of(terms)
    for i, term in enumerate(terms):
        want: dict[int, float] = {}
        for ptr, doc, tf in view.s_segments:
            if term + 1 < len(ptr):
                for s, f in zip(doc[ptr[term]:ptr[term + 1]], tf[ptr[term]:ptr[term + 1]]):
                    want[int(s)] = want.get(int(s), 0.0) + float(f)
        got = {int(s): float(c) for s, c in zip(sess[which == i], count[which == i])}
        assert got == want and list(got) == sorted(got)
    assert (np.diff(which) >= 0).all()


def test_word_scores_are_those_of_one_read_per_term_bit_for_bit(tmp_path):
    """The word stage's row and session BM25 from one read of all terms equal, float32 bit for
    bit, one read and one sum per term (terms in base and delta, deleted rows, a term asked
    twice); so does everything ``lexical`` makes of them."""
    from graphmem.index import ranker
    from graphmem.index.tuning import DEFAULT

    _, view, terms = _index_with_base_delta_and_deletes(tmp_path)
    for query in (terms, terms[:3], terms[-1:], [terms[2], terms[5]], [10**6], []):
        got = ranker.term_scores(view, query, DEFAULT)
        want = term_scores_per_term(view, query, DEFAULT)
        for a, b in zip(got[:3], want[:3]):
            assert a.dtype == b.dtype and np.array_equal(a, b)
        assert got[3] == want[3]
    got = ranker.term_scores(view, terms, DEFAULT)
    assert got[0].any() and got[1].any()  # rows and sessions scored


def test_colbert_passes_on_one_thread_are_those_of_two_bit_for_bit():
    """The ColBERT model runs on one onnxruntime thread (``local_colbert.THREADS``): its token
    vectors of queries and documents, short, long and cut at the token limit, are the ones a
    two-thread session of the same model gives, so ranking does not move."""
    from graphmem.providers import local_colbert
    from graphmem.providers.local_fuse import fused
    from graphmem.providers.onnx_runtime import load_session

    enc = local_colbert.ColbertEncoder()
    own = enc._model()[0]
    assert own.get_session_options().intra_op_num_threads == local_colbert.THREADS == 1
    two = load_session(enc.path, enc.cache.folder, threads=2,
                       prefer=fused(enc.path / "model.onnx", enc.cache))
    texts = ["where is the refund handled now?", "ok",
             "The login test flakes because the shared fixture `db_session` in tests/conftest.py "
             "is reused across workers; pin pytest-xdist to --dist loadfile. " * 6,
             "!!! ... ???", "src/pay/stripe_client.py: refund() retries 3 times with backoff"]
    for text in texts:
        for marker, limit, punct in ((local_colbert.Q_MARKER, local_colbert.QUERY_TOKENS, False),
                                     (local_colbert.D_MARKER, local_colbert.DOC_TOKENS, True)):
            got = enc._run(text, marker, limit, punct)
            want = enc._run(text, marker, limit, punct, session=two)
            assert got.dtype == want.dtype == np.float32 and got.shape == want.shape
            assert np.array_equal(got, want), text[:40]
    assert np.array_equal(enc.query_sync(texts[0]), enc._run(texts[0], local_colbert.Q_MARKER,
                                                               local_colbert.QUERY_TOKENS, False,
                                                               session=two))
