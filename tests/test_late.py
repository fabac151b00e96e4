"""Late interaction (ColBERT) second stage of the local index: storage, failures, ranking, settings."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest

from graphmem.errors import ConfigError
from graphmem.index import late
from graphmem.index.local_backend import open_index
from graphmem.index.local_search import search_local
from graphmem.index.tuning import Tuning
from graphmem.index.local_index import LocalIndex
from graphmem.models import MemoryItem
from graphmem.index import local_search as query_module
from graphmem.providers.local_colbert import (ColbertEncoder, ColbertMeanEmbedder, make_late_encoder,
                                              mean_vector, pack, unpack)
from graphmem.settings import Settings

TURNS = ["Alice: Work has been rough, the deadline moved up again.",
         "Bob: Did anything good happen this week?",
         "Alice: Yes! We adopted a rescue dog, a little beagle named Max.",
         "Bob: The weather was awful, rain all week long.",
         "Alice: I finally finished reading that novel about the war.",
         "Bob: My sister got a new cat last week, she loves pets.",
         "Alice: I want a pet someday, maybe a parrot."]


@pytest.fixture(scope="module")
def encoder():
    return ColbertEncoder()


class Counting:
    """The real encoder, counting the texts it encodes (and failing on demand)."""

    def __init__(self, enc: ColbertEncoder):
        self.enc, self.name, self.texts, self.fail = enc, enc.name, [], False
        self.queries: list[str] = []

    def documents_sync(self, texts):
        if self.fail:
            raise RuntimeError("model crashed")
        self.texts += list(texts)
        return self.enc.documents_sync(texts)

    def query_sync(self, text):
        self.queries.append(text)
        return self.enc.query_sync(text)


def turns(texts=TURNS, session="s1"):
    return [MemoryItem(id=f"{session}-{i}", kind="turn", text=t, project="/p", spec="s",
                       session=session, metadata={"i": i}) for i, t in enumerate(texts)]


def tokens_count(idx) -> int:
    return idx.conn.execute("SELECT count(*) FROM search_tokens").fetchone()[0]


def test_pack_keeps_token_vectors_and_refuses_a_torn_blob(encoder):
    mat = encoder.documents_sync(["The staging proxy strips Authorization headers"])[0]
    assert mat.shape[1] == 384 and np.allclose(np.linalg.norm(mat, axis=1), 1, atol=1e-4)
    q, scales = unpack(pack(mat))
    assert np.abs(q * scales[:, None] - mat).max() < 0.01
    assert len(pack(mat)) == len(mat) * (384 + 2)
    with pytest.raises(ValueError, match="not a multiple"):
        unpack(pack(mat)[:-1])


def test_a_text_is_encoded_once_and_its_tokens_leave_with_its_last_item(tmp_path, encoder):
    enc = Counting(encoder)
    idx = LocalIndex(tmp_path, None, enc)
    same = [MemoryItem(id=f"g{i}", kind="gotcha", text="npm ci wipes node_modules", project="/p",
                       spec="s") for i in range(2)]
    asyncio.run(idx.upsert(same + turns()[:2]))
    assert len(enc.texts) == 3 and tokens_count(idx) == 3
    asyncio.run(idx.upsert(turns()[:2]))  # unchanged text: nothing encoded again
    assert len(enc.texts) == 3
    idx.delete(project="/p", ids=["g0"])
    assert tokens_count(idx) == 3  # g1 still holds that text
    idx.delete(project="/p", ids=["g1"])
    assert tokens_count(idx) == 2


def test_a_failing_encoder_keeps_the_rows_and_reindex_fills_the_tokens(tmp_path, encoder):
    enc = Counting(encoder)
    enc.fail = True
    idx = LocalIndex(tmp_path, None, enc)
    asyncio.run(idx.upsert(turns()))
    assert idx.count() == len(TURNS) and tokens_count(idx) == 0
    hits = asyncio.run(search_local(idx, "rescue beagle", projects=None, limit=3))
    assert hits[0].id == "s1-2"  # the first stage answers alone
    enc.fail = False
    asyncio.run(idx.refill_vectors())
    assert tokens_count(idx) == len(TURNS) and late.usable(idx)


def test_the_second_stage_finds_a_turn_that_shares_no_word_with_the_question(tmp_path, encoder):
    idx = LocalIndex(tmp_path, None, encoder)  # no embedder: words, then late interaction
    asyncio.run(idx.upsert(turns()))
    q = "Which animal joined Alice's family?"
    words_only = asyncio.run(search_local(idx, q, projects=None, limit=3,
                                          tuning=Tuning(late_pool=0)))
    both = asyncio.run(search_local(idx, q, projects=None, limit=3))
    assert words_only[0].id != "s1-2"
    assert both[0].id == "s1-2"


def test_maxsim_reads_a_turn_with_its_neighbours(tmp_path, encoder):
    idx = LocalIndex(tmp_path, None, encoder)
    asyncio.run(idx.upsert(turns()))
    snap = idx.snapshot()
    qm = encoder.query_sync("adopted a rescue dog")
    rows = late.token_rows(idx, [int(r) for r in snap.rowid])
    best = late.token_best(qm, [rows[int(r)] for r in snap.rowid])
    assert best.shape == (len(qm), len(TURNS)) and int(best.mean(axis=0).argmax()) == 2
    # Row 3 follows the dog turn: with context it gains, alone it does not.
    ranked = [(i, 1.0) for i in range(len(TURNS))]
    near = np.stack([np.array(snap.neighbours[0][0]), np.array(snap.neighbours[0][1])])
    nb = np.stack([np.where(near[s] >= 0, best[:, np.maximum(near[s], 0)], np.nan)
                   for s in (0, 1)])
    alone = dict(late.rescore(ranked, best, None, near, Tuning(late_neighbour=0)))
    ctx = dict(late.rescore(ranked, best, nb, near, Tuning(late_neighbour=0)))
    assert ctx[3] > alone[3] and ctx[2] == max(ctx.values())


def test_the_setting_turns_it_off_and_garbage_names_the_field(tmp_path):
    off = Settings.load(home=str(tmp_path / "h1"))
    off.providers.local.late_interaction = "off"
    assert make_late_encoder(off) is None
    assert open_index(off).late is None
    bad = Settings.load(home=str(tmp_path / "h2"))
    bad.providers.local.late_interaction = "banana"
    with pytest.raises(ConfigError, match="providers.local.late_interaction"):
        make_late_encoder(bad)
    on = Settings.load(home=str(tmp_path / "h3"))
    assert isinstance(open_index(on).late, ColbertEncoder)
    assert open_index(on).late_always is False  # by default only rerank=True pays for it
    on.providers.local.late_search = "all"
    assert open_index(on).late_always is True
    on.providers.local.late_search = "sometimes"
    with pytest.raises(ConfigError, match="providers.local.late_search"):
        open_index(on)


def test_by_default_only_searches_that_ask_use_the_second_stage(tmp_path, encoder):
    idx = LocalIndex(tmp_path, None, encoder, late_always=False)
    asyncio.run(idx.upsert(turns()))
    q = "Which animal joined Alice's family?"
    plain = asyncio.run(search_local(idx, q, projects=None, limit=3))
    asked = asyncio.run(search_local(idx, q, projects=None, limit=3, late_stage=True))
    assert plain[0].id != "s1-2" and asked[0].id == "s1-2"


def test_a_rewritten_item_is_scored_by_its_new_text(tmp_path, encoder):
    idx = LocalIndex(tmp_path, None, encoder)
    first = MemoryItem(id="g", kind="gotcha", text="The CI runner kills silent jobs",
                       project="/p", spec="s")
    asyncio.run(idx.upsert([first]))
    rowid = int(idx.snapshot().rowid[0])
    old = late.token_rows(idx, [rowid])[rowid]  # now cached under the old text's hash
    asyncio.run(idx.upsert([first.model_copy(update={"text": "Billing timestamps are in UTC"})]))
    new = late.token_rows(idx, [rowid])[rowid]
    want = encoder.documents_sync(["Billing timestamps are in UTC"])[0]
    assert len(new[0]) == len(want) and not np.array_equal(old[0][:1], new[0][:1])
    assert np.abs(new[0] * new[1][:, None] - want).max() < 0.01
    assert tokens_count(idx) == 1  # the old text's tokens left with it


def test_the_default_embedder_and_the_tokens_share_one_model_pass(tmp_path, encoder):
    counting = Counting(encoder)
    idx = LocalIndex(tmp_path, ColbertMeanEmbedder(counting), counting)
    assert late.shares_pass(idx)
    asyncio.run(idx.upsert(turns()))
    assert sorted(counting.texts) == sorted(TURNS)  # each text once, for its vector and tokens
    assert tokens_count(idx) == len(TURNS)
    blob = idx.conn.execute("SELECT v.vec FROM search_vectors v JOIN search_items i "
                            "ON i.hash=v.hash WHERE i.id='s1-2'").fetchone()[0]
    want = mean_vector(encoder.documents_sync([TURNS[2]])[0])
    assert np.allclose(np.frombuffer(blob, np.float32), want, atol=1e-5)
    encoder.recent.clear()
    query_module.forget_query_vectors()
    hits = asyncio.run(search_local(idx, "we took in a shelter puppy", projects=None, limit=3,
                                    late_stage=True))
    assert counting.queries == ["we took in a shelter puppy"]  # one pass served both stages
    assert hits[0].id == "s1-2"
    # A model that fails mid-write: the rows still go in, without vector or tokens, and say so.
    counting.fail = True
    asyncio.run(idx.upsert(turns(["Carol: the build is green again"], session="s2")))
    assert idx.last_embed_error == "model crashed" and tokens_count(idx) == len(TURNS)
    assert idx.count() == len(TURNS) + 1
    assert idx.conn.execute("SELECT count(*) FROM search_vectors").fetchone()[0] == len(TURNS)


def test_token_best_is_the_same_in_onnxruntime_and_numpy(monkeypatch):
    """The late stage's product runs in onnxruntime (threads that sleep when idle); numpy is the
    fallback. Both give each query token's best scaled dot product per document."""
    import numpy as np

    from graphmem.providers.local_colbert import pack, unpack

    rng = np.random.default_rng(7)
    docs = []
    for n in (3, 17, 1, 40):
        m = rng.standard_normal((n, 384)).astype(np.float32)
        docs.append(unpack(pack(m / np.linalg.norm(m, axis=1, keepdims=True))))
    docs.insert(2, None)  # a row without tokens
    qm = rng.standard_normal((9, 384)).astype(np.float32)
    expected = np.full((9, 5), np.nan, np.float32)
    for j, doc in enumerate(docs):
        if doc is not None:
            expected[:, j] = (qm @ (doc[0].astype(np.float32) * doc[1][:, None]).T).max(axis=1)
    from graphmem.index import maxsim

    assert maxsim.maxsim_session() is not None  # the onnxruntime path is the one measured
    fast = late.token_best(qm, docs)
    monkeypatch.setattr(maxsim, "_maxsim", [None])
    slow = late.token_best(qm, docs)
    for got in (fast, slow):
        assert np.isnan(got[:, 2]).all()
        np.testing.assert_allclose(np.delete(got, 2, axis=1), np.delete(expected, 2, axis=1),
                                   atol=1e-4)


def test_another_embedder_and_the_tokens_each_encode_the_query_once(tmp_path, encoder):
    """bge vectors with ColBERT tokens: two models, both asked once per query; a failing
    embedder leaves words and the late stage to answer."""
    from graphmem.errors import ProviderError
    from graphmem.providers.local import BgeEmbedder

    class CountingBge:
        name, dimension = "local/bge-small-en-v1.5", 384

        def __init__(self):
            self.bge, self.queries, self.fail = BgeEmbedder(), [], False

        async def embed(self, texts):
            return await self.bge.embed(texts)

        async def embed_query(self, text):
            self.queries.append(text)
            if self.fail:
                raise ProviderError("embedder down", provider="test")
            return await self.bge.embed_query(text)

    counting, bge = Counting(encoder), CountingBge()
    idx = LocalIndex(tmp_path, bge, counting, late_always=True)
    assert not late.shares_pass(idx)
    asyncio.run(idx.upsert(turns()))
    encoder.recent.clear()
    query_module.forget_query_vectors()
    q = "Which animal joined Alice's family?"
    hits = asyncio.run(search_local(idx, q, projects=None, limit=3))
    assert counting.queries == [q] and bge.queries == [q] and hits[0].id == "s1-2"
    bge.fail = True
    query_module.forget_query_vectors()
    again = asyncio.run(search_local(idx, "a beagle named Max", projects=None, limit=3))
    assert again[0].id == "s1-2"  # words and tokens still answer


def test_documents_just_encoded_are_remembered_within_a_byte_cap(monkeypatch):
    enc = ColbertEncoder()
    runs: list[str] = []
    real = enc._run
    monkeypatch.setattr(enc, "_run", lambda text, *a, **k: runs.append(text) or real(text, *a, **k))
    a, b = "the proxy strips Authorization headers", "npm ci wipes node_modules"
    first = enc.documents_sync([a, b, a])
    assert runs == [a, b] and first[0] is first[2]  # a text repeated in one call runs once
    again = enc.documents_sync([b, a])
    assert runs == [a, b] and again[0] is first[1] and again[1] is first[0]
    assert np.array_equal(again[1], ColbertEncoder().documents_sync([a])[0])  # same vectors
    with pytest.raises(ValueError):  # shared: callers cannot change what others get
        again[0][0, 0] = 1.0
    enc.recent_docs.limit = first[1].nbytes  # room for one matrix the size of b's
    enc.documents_sync(["a third text about retries"])  # evicts the older ones
    assert enc.recent_docs.keys() == ["a third text about retries"]
    enc.documents_sync([a])
    assert runs[-1] == a and runs.count(a) == 2


def test_lru_drops_the_least_recently_used_past_its_limit():
    from graphmem.lru import LRU, nbytes

    counted = LRU(2)
    counted.put("a", 1), counted.put("b", 2)
    assert counted.get("a") == 1  # a use: "b" is now the oldest
    counted.put("c", 3)
    assert counted.keys() == ["a", "c"] and counted.get("b") is None
    sized = LRU(100, size=nbytes)
    sized.put("x", np.zeros(10, np.float32))  # 40 bytes
    sized.put("x", np.zeros(20, np.float32))  # replaced, not counted twice: 80 bytes
    assert sized.used == 80 and len(sized) == 1
    sized.put("y", (np.zeros(4, np.float32), np.zeros(2, np.float32)))  # a tuple: 24 bytes
    assert sized.keys() == ["y"] and sized.used == 24  # 104 > 100: "x" went
    sized.clear()
    assert sized.used == 0 and sized.get("y") is None
