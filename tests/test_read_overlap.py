"""The read path's overlap (issue 17, search latency): work moved beside the model's passes on a
worker thread must give exactly the hits the one-after-another path gives.

The real index and the bundled ColBERT model (as ``test_late.py``).
"""

from __future__ import annotations

import asyncio
import dataclasses
import threading

import pytest

from graphmem.index import late
from graphmem.index import local_search as query_module
from graphmem.index.local_index import LocalIndex
from graphmem.index.local_search import begin_query, search_local
from graphmem.providers.local_colbert import ColbertEncoder, ColbertMeanEmbedder
from test_late import TURNS, turns


@pytest.fixture(scope="module")
def encoder():
    return ColbertEncoder()


class Threads:
    """The real encoder, saying which thread ran each query pass (and failing on demand)."""

    def __init__(self, enc: ColbertEncoder):
        self.enc, self.name, self.fail = enc, enc.name, False
        self.queries: list[tuple[str, str]] = []

    def documents_sync(self, texts):
        return self.enc.documents_sync(texts)

    def query_sync(self, text):
        self.queries.append((text, threading.current_thread().name))
        if self.fail:
            raise RuntimeError("model crashed")
        return self.enc.query_sync(text)


def _forget(encoder):
    encoder.recent.clear()
    query_module.forget_query_vectors()


def _answer(hits):
    return [(h.id, h.score) for h in hits]


def test_a_query_pass_begun_early_gives_the_same_hits_from_one_pass(tmp_path, encoder):
    """``begin_query`` runs the pass on its worker thread; ``search_local`` takes that result
    (no second pass) and ranks exactly as when it encodes the query itself."""
    model = Threads(encoder)
    idx = LocalIndex(tmp_path, ColbertMeanEmbedder(model), model, late_always=True)
    asyncio.run(idx.upsert(turns(TURNS * 3)))
    answers = {}
    for early in (False, True):
        _forget(encoder)
        model.queries.clear()
        tuning = dataclasses.replace(idx.tuning, early_query=early, overlap=False)
        q = "we took in a shelter puppy"
        begin_query(idx, q, tuning=tuning)
        answers[early] = _answer(asyncio.run(search_local(idx, q, projects=None, limit=5,
                                                          tuning=tuning)))
        assert [t for t, _ in model.queries] == [q]  # one pass served both stages
        worker = model.queries[0][1].startswith("graphmem-query")
        assert worker is early, model.queries
    assert answers[True] == answers[False]
    assert answers[True][0][0].startswith("s1-2")
    assert not late._passes  # a finished pass is not kept: the encoder remembers its matrix


def test_a_failing_early_pass_leaves_the_words_to_answer(tmp_path, encoder):
    """The model fails on the worker thread: the search still answers by words (as when it
    fails in the searching thread), and the next search encodes the query again."""
    model = Threads(encoder)
    idx = LocalIndex(tmp_path, ColbertMeanEmbedder(model), model, late_always=True)
    asyncio.run(idx.upsert(turns()))
    _forget(encoder)
    tuning = dataclasses.replace(idx.tuning, early_query=True, overlap=False)
    model.fail = True
    begin_query(idx, "a beagle named Max", tuning=tuning)
    hits = asyncio.run(search_local(idx, "a beagle named Max", projects=None, limit=3,
                                    tuning=tuning))
    assert hits and hits[0].id == "s1-2"
    assert model.queries[0][1].startswith("graphmem-query")
    model.fail = False
    model.queries.clear()
    hits = asyncio.run(search_local(idx, "a beagle named Max", projects=None, limit=3,
                                    tuning=tuning))
    assert hits[0].id == "s1-2" and model.queries == [("a beagle named Max", "MainThread")]


def test_a_project_search_begins_the_pass_as_it_starts_with_the_same_hits(tmp_path, monkeypatch):
    """``Memory.search`` starts the query pass before its other work (code snapshot, journal,
    word scoring), computes the candidates' freshness while the MaxSim product runs, and
    answers exactly as the one-after-another path."""
    from graphmem import Memory
    from test_code_recall import ABOUT_SCHED, DOCS, SCHED
    from test_code_freshness import project

    threads: list[str] = []
    plain = ColbertEncoder.query_sync

    def spied(self, text):
        threads.append(threading.current_thread().name)
        return plain(self, text)

    monkeypatch.setattr(ColbertEncoder, "query_sync", spied)
    from graphmem.code import freshness

    warmed: list[int] = []  # the candidates' freshness computed while the product runs
    plain_warm = freshness.warm
    monkeypatch.setattr(freshness, "warm", lambda hits, *a: (warmed.append(len(hits)),
                                                             plain_warm(hits, *a)))
    root, spec = project(tmp_path, {"src/sched.py": SCHED, "src/docs.py": DOCS})
    with Memory(spec, root) as mem:
        for n, line in enumerate(["Retry backoff is capped at a minute", "Ticks are idempotent",
                                  "The queue drains on shutdown"], start=1):
            mem.save_session_insights(n, {**ABOUT_SCHED, "what_worked": [line]})
        index = mem._async._recall.backends.local.index
        answers = {}
        for early in (False, True):
            index.tuning = dataclasses.replace(index.tuning, early_query=early, overlap=False)
            index.late.recent.clear()
            query_module.forget_query_vectors()
            threads.clear()
            warmed.clear()
            hits = mem.search("how do scheduled retries back off", scope="project", limit=5)
            answers[early] = [(h.id, h.score, h.metadata.get("freshness")) for h in hits]
            assert len(threads) == 1 and threads[0].startswith("graphmem-query") is early, threads
            assert bool(warmed) is early and (not early or warmed[0] >= len(hits))
            assert all(h.metadata.get("freshness") for h in hits)
    assert answers[True] == answers[False] and answers[True]
