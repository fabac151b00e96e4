"""The search read path's plumbing (issue 17, latency): cheaper hit copies and ``local_path``
set only on the hits a search returns must give exactly the answers the costlier path gave.

Real git repositories, the real index and the bundled embedder (as ``test_code_recall.py``).
"""

from __future__ import annotations

import os
from datetime import datetime, timezone

from graphmem import Hit, Memory
from graphmem.code import reorder as recall
from test_code_freshness import project
from test_code_recall import WORDS, search_after


def _hit() -> Hit:
    return Hit(id="i1", kind="insight", text="retry backoff", score=0.5, project="p", spec="s/1",
               session="3", time=datetime(2026, 1, 2, tzinfo=timezone.utc),
               metadata={"freshness": {"state": "current"}, "n": [1, 2]}, source="s/1/x.json")


def test_replaced_is_model_copy_with_the_update():
    """``Hit.replaced`` gives what pydantic's ``model_copy(update=)`` gives: same fields, same
    fields-set (what ``model_dump(exclude_unset=True)`` shows), the original untouched."""
    hit = _hit()
    for update in ({"score": 0.25}, {"local_path": "/x/y"},
                   {"metadata": {**hit.metadata, "freshness": {"state": "gone"}}}, {}):
        fast, slow = hit.replaced(**update), hit.model_copy(update=update)
        assert fast == slow and type(fast) is Hit
        assert fast.model_dump() == slow.model_dump()
        assert fast.model_fields_set == slow.model_fields_set
        assert fast.model_dump(exclude_unset=True) == slow.model_dump(exclude_unset=True)
        assert fast.model_dump_json() == slow.model_dump_json()
    assert hit == _hit()  # the original is unchanged
    other = hit.replaced(score=0.1)
    other.text = "changed on the copy"  # a copy's own field does not reach the original
    assert hit.text == "retry backoff"


def test_every_hit_a_search_returns_has_its_local_path(tmp_path, monkeypatch):
    """``local_path`` is set once, on the returned hits only: memories that joined through code
    recall (older sessions about the same file, sharing no word with the task) carry it too."""
    monkeypatch.setattr(recall, "RECENCY_GAIN", 0.0)
    long_session = [f"Scheduled jobs back off: the {a} {b} retry delay" for a in WORDS for b in WORDS]
    sessions = [["Tick intervals are cached per loop"], ["Shutdown drains the queue"], long_session]
    hits = search_after(tmp_path, sessions, "scheduled jobs back off", 3)
    # sessions 1 and 2 share no word with the task: they joined through code recall
    assert {h.session for h in hits} == {"1", "2", "3"}, [(h.session, h.text) for h in hits]
    root = tmp_path / "proj"
    for h in hits:
        assert h.local_path == os.path.join(str(root), h.source), (h.id, h.local_path)
        assert os.path.isfile(h.local_path)


def test_context_and_files_pinned_memories_are_unchanged_by_late_localising(tmp_path):
    """``context(files=)`` pins memories read by id (``hits_by_id`` still localises by
    default); the context names them as before."""
    root, spec = project(tmp_path, {"src/sched.py": "def tick(loop):\n    return loop\n"})
    with Memory(spec, root) as mem:
        mem.save_session_insights(1, {"discoveries": {"files_understood": {
            "src/sched.py": "the scheduler loop"}}, "what_worked": ["Ticks are idempotent"]})
        text = mem.context("unrelated words entirely", max_tokens=800, files=["src/sched.py"])
        by_id = mem._async._recall.hits_by_id([h.id for h in mem.search(
            "ticks idempotent", scope="project", limit=5)])
    assert "Ticks are idempotent" in text
    assert by_id and all(h.local_path for h in by_id)


def test_late_stage_multiplies_a_shared_matrix_once_with_the_same_answer():
    """Rows of one text share one cached token matrix; ``token_best`` multiplies it once and
    gives each row exactly what separate copies give (NaN for a row without tokens)."""
    import numpy as np

    from graphmem.index.late import token_best

    rng = np.random.default_rng(7)

    def doc(n):
        return (rng.integers(-127, 128, (n, 16), dtype=np.int8),
                rng.uniform(0.001, 0.01, n).astype(np.float32))

    qm = rng.standard_normal((5, 16)).astype(np.float32)
    a, b, c = doc(3), doc(9), doc(1)
    shared = [a, b, None, a, c, b, a]
    copies = [None if d is None else (d[0].copy(), d[1].copy()) for d in shared]
    got, want = token_best(qm, shared), token_best(qm, copies)
    assert got.shape == (5, 7)
    assert np.array_equal(got, want, equal_nan=True)
    assert np.isnan(got[:, 2]).all() and not np.isnan(got[:, [0, 1, 3, 4, 5, 6]]).any()
    assert np.array_equal(got[:, 0], got[:, 3]) and np.array_equal(got[:, 1], got[:, 5])
    # each column is its own document's best dot product per query token
    for j, d in enumerate(shared):
        if d is not None:
            exact = ((d[0].astype(np.float32) @ qm.T) * d[1][:, None]).max(axis=0)
            assert np.allclose(got[:, j], exact, atol=1e-5)


def test_late_stage_product_runs_on_one_thread_with_the_two_thread_answer():
    """The MaxSim product's session has one intra-op thread (measured faster on the shared
    2-core box) and computes what a session with the machine's default threads computes."""
    import numpy as np
    import onnxruntime as ort

    from graphmem.index import maxsim
    from graphmem.providers.onnx_runtime import model_cache, session_options

    one = maxsim.maxsim_session()
    assert one is not None
    assert one.get_session_options().intra_op_num_threads == 1
    two = ort.InferenceSession(str(model_cache().folder / "maxsim-v1-onnx-ir8.onnx"),
                               session_options(ort, optimise=True),
                               providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(3)
    feeds = {"tokens": rng.integers(-127, 128, (3000, 384), dtype=np.int8),
             "scales": rng.uniform(0.001, 0.01, (3000, 1)).astype(np.float32),
             "query": rng.standard_normal((384, 40)).astype(np.float32)}
    np.testing.assert_allclose(one.run(None, feeds)[0], two.run(None, feeds)[0], rtol=1e-6,
                               atol=1e-6)
