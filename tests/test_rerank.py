"""search(..., rerank=True): passages with session context, budget, deadline, fusion, any reranker."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from datetime import datetime, timedelta, timezone

import pytest

from graphmem import Memory, ValidationError, _sync
from graphmem.errors import ProviderError
from graphmem.index import rerank
from graphmem.index.tuning import DEFAULT
from graphmem.models import Hit, MemoryItem, stable_id
from graphmem.settings import Settings

LONG_QUESTION = ("so before we start the migration I want to be sure about one thing that has "
                 "bitten us in the past several times when we moved services between clusters, "
                 "and it is about the storage layer: which database does the billing service use "
                 "in production right now?")
TURNS = [
    "user: can you look at the flaky deploy job first?",
    "assistant: the deploy job times out because the runner has no cache for node modules",
    LONG_QUESTION,
    "assistant: Postgres 15, behind pgbouncer in transaction mode",
    "user: thanks, and the search service?",
    "assistant: it keeps everything in Elasticsearch 8 with two replicas",
]
GOTCHA = "Timestamps from the billing API are in Pacific time, not UTC"


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """One spec with a gotcha and a session of turns, in a real local index (default embedder)."""
    root = tmp_path_factory.mktemp("rerank")
    spec = root / "proj" / "specs" / "001"
    spec.mkdir(parents=True)
    settings = Settings.load(home=str(root / "home"))
    with Memory(spec, settings=settings) as m:
        m.append_gotcha(GOTCHA)
        t0 = datetime(2026, 3, 1, 9, 0, tzinfo=timezone.utc)
        project, sp = m.aio.project.key, m.aio.spec_key
        items = [MemoryItem(id=stable_id(project, sp, "turn", "s1", str(i)), kind="turn", text=t,
                            project=project, spec=sp, session="s1",
                            time=t0 + timedelta(seconds=i), metadata={"n": i})
                 for i, t in enumerate(TURNS)]
        _sync.run(m.aio.derived.local.index.upsert(items))
    return {"spec": spec, "settings": settings}


def first_stage(m: Memory, query: str) -> list[Hit]:
    return m.search(query, limit=20)


def test_a_turn_is_shown_with_the_end_of_the_turn_before_it(world):
    with Memory(world["spec"], settings=world["settings"]) as m:
        hits = first_stage(m, "which database does billing use, postgres or pgbouncer, search")
        by_text = dict(zip((h.text for h in hits),
                           rerank.passages(m.aio.derived.local.index, hits, DEFAULT)))
    answer = by_text[TURNS[3]]
    before, own = answer.split("\n")
    assert own == TURNS[3]
    # The long question is cut to its last CONTEXT_WORDS words, marked as cut.
    assert before.startswith("… ") and before.endswith("in production right now?")
    assert len(before[2:].split()) == DEFAULT.rerank_context_words
    assert by_text[TURNS[5]] == f"{TURNS[4]}\n{TURNS[5]}"  # short: whole
    assert by_text[TURNS[0]] == TURNS[0]  # first of its session: nothing before it
    assert by_text[GOTCHA] == GOTCHA  # not a sequence kind: its own text only


def test_budget_and_deadline_bound_what_the_local_cross_encoder_reads(world):
    from graphmem.providers.local import make_reranker

    rr = make_reranker(world["settings"])
    texts = [f"passage number {i} about databases and billing" for i in range(12)]
    counts = rr.count_tokens("which database", texts)
    assert len(counts) == 12 and all(c > 8 for c in counts)
    # the budget alone decides here
    tuning = replace(DEFAULT, rerank_budget_tokens=sum(counts[:5]) + 1, rerank_deadline=600.0)
    got = asyncio.run(rerank.score(rr, "which database", texts, tuning))
    assert [s is not None for s in got] == [True] * 5 + [False] * 7  # best-first, then stop
    assert got[:5] == pytest.approx(rr.score_pairs("which database", texts[:5]), abs=1e-6)
    tuning = replace(DEFAULT, rerank_budget_tokens=10_000, rerank_deadline=0.0)
    got = asyncio.run(rerank.score(rr, "which database", texts, tuning))
    assert sum(s is not None for s in got) == tuning.rerank_batch  # the first batch always runs


def test_fusion_keeps_unscored_hits_below_the_scored_ones():
    hits = [Hit(id=f"h{i}", kind="turn", text=str(i), project="p",
                score=1.0 - i / 10) for i in range(5)]
    fused = rerank.fuse([h.model_copy() for h in hits], [0.1, 5.0, -3.0, None, None], DEFAULT)
    assert [h.id for h in fused] == ["h1", "h0", "h2", "h3", "h4"]
    assert fused[0].score > fused[1].score > fused[2].score > fused[3].score
    # Fewer than two scores: nothing to scale, the first stage's order stays.
    same = rerank.fuse([h.model_copy() for h in hits], [2.0, None, None, None, None], DEFAULT)
    assert [h.id for h in same] == [h.id for h in hits]


class WordCountReranker:
    """A reranker with only the protocol's ``score`` (as a remote API client has)."""

    name = "test/words"

    def __init__(self) -> None:
        self.calls: list[tuple[str, list[str]]] = []

    async def score(self, query, passages):
        self.calls.append((query, list(passages)))
        # Favours the passage whose own turn (its last line) names pgbouncer.
        return [float("pgbouncer" in p.split("\n")[-1]) * 10 + len(p) / 1000 for p in passages]


def test_a_reranker_with_only_score_gets_the_whole_pool_in_one_call(world):
    rr = WordCountReranker()
    with Memory(world["spec"], settings=world["settings"]) as m:
        m.aio.derived.local._reranker = rr
        hits = m.search("what runs the deploy job and the search service", limit=3, rerank=True)
    assert len(rr.calls) == 1
    query, passages = rr.calls[0]
    assert query == "what runs the deploy job and the search service"
    assert len(passages) == len(TURNS) + 1  # the whole spec fits in the pool
    assert hits[0].text == TURNS[3]  # the reranker's favourite wins the fusion
    assert len(hits) == 3 and hits[0].score >= hits[1].score >= hits[2].score


def test_rerank_with_the_local_cross_encoder_is_repeatable(world):
    with Memory(world["spec"], settings=world["settings"]) as m:
        index = m.aio.derived.local.index  # a busy machine must not cut one run short
        index.tuning = replace(index.tuning, rerank_deadline=600.0)
        a = m.search("which database is billing on", limit=4, rerank=True)
        b = m.search("which database is billing on", limit=4, rerank=True)
    assert TURNS[3] in [h.text for h in a[:2]]  # the answer (the question itself may lead)
    assert [(h.id, h.score) for h in a] == [(h.id, h.score) for h in b]


def test_garbage_reaches_the_cross_encoder_as_a_clear_error(world):
    from graphmem.providers.local import make_reranker

    rr = make_reranker(world["settings"])
    with pytest.raises(ValidationError, match="texts"):
        rr.score_pairs("q", "one string")
    with pytest.raises(ValidationError, match="item 1"):
        rr.count_tokens("q", ["ok", None])


class BrokenReranker:
    """A remote reranker that fails, or answers in the wrong shape."""

    name = "test/broken"

    def __init__(self, answer):
        self.answer = answer

    async def score(self, query, passages):
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer


@pytest.mark.parametrize("answer", [ProviderError("HTTP 503 from the reranker", provider="x"),
                                    [1.0, 2.0], None, ["high", "low"] * 10])
def test_a_failing_reranker_leaves_the_first_stage_order(world, answer, caplog):
    query = "what runs the deploy job and the search service"
    with Memory(world["spec"], settings=world["settings"]) as m:
        m.aio.derived.local.index.late_always = True  # the first stage rerank=True starts from
        plain = m.search(query, limit=5)
        m.aio.derived.local.index.late_always = False
        m.aio.derived.local._reranker = BrokenReranker(answer)
        with caplog.at_level("WARNING", logger="graphmem.index"):
            hits = m.search(query, limit=5, rerank=True)
    assert [h.id for h in hits] == [h.id for h in plain]
    assert "test/broken" in caplog.text and "first-stage order kept" in caplog.text
