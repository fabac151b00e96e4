"""The offline local models: they load with networking disabled and their vectors carry meaning."""

from __future__ import annotations

import asyncio
import math
import socket

import pytest

from graphmem import providers
from graphmem.errors import ConfigError, ValidationError
from graphmem.providers import local, onnx_runtime
from graphmem.providers.base import Embedder, Reranker
from graphmem.settings import Settings

TRIPLES = [  # (text, paraphrase, unrelated)
    ("The database connection pool ran out of connections under load.",
     "Under heavy traffic the DB pool was exhausted.",
     "My grandmother grows tomatoes in her garden."),
    ("Run the migrations before starting the server.",
     "Apply the schema migrations first, then launch the server.",
     "The concert was cancelled because of the rain."),
    ("Caroline went to a support group for transgender people.",
     "Caroline attended an LGBTQ support meeting.",
     "Melanie painted a sunrise over the lake."),
]


@pytest.fixture(scope="module")
def offline():
    """No network in this process while the models load and run; fresh loads, not cached ones."""
    mp = pytest.MonkeyPatch()

    def refuse(*args, **kwargs):
        raise OSError("network disabled in this test")

    mp.setattr(socket.socket, "connect", refuse)
    mp.setattr(socket.socket, "connect_ex", refuse)
    mp.setattr(socket, "create_connection", refuse)
    mp.setattr(socket, "getaddrinfo", refuse)
    onnx_runtime.forget_models()
    providers.clear_cache()
    yield
    mp.undo()
    providers.clear_cache()


def _cos(a, b):
    return sum(x * y for x, y in zip(a, b)) / math.sqrt(sum(x * x for x in a) * sum(y * y for y in b))


@pytest.mark.parametrize("model,name,dim", [("default", "local/answerai-colbert-small-v1", 384),
                                            ("answerai-colbert-small-v1",
                                             "local/answerai-colbert-small-v1", 384),
                                            ("bge-small-en-v1.5", "local/bge-small-en-v1.5", 384),
                                            ("wordllama", "local/wordllama-l2-supercat-256", 256)])
def test_local_embedder_offline_ranks_paraphrase_first(offline, model, name, dim):
    settings = Settings.load(env={"GRAPHMEM_LOCAL_EMBEDDING_MODEL": model})
    assert providers.validate(settings) == []
    emb = providers.get_embedder(settings)
    assert isinstance(emb, Embedder) and (emb.name, emb.dimension) == (name, dim)
    for text, para, other in TRIPLES:
        a, b, c = asyncio.run(emb.embed([text, para, other]))
        assert len(a) == dim and abs(_cos(a, a) - 1) < 1e-4 and abs(sum(x * x for x in a) - 1) < 1e-3
        assert _cos(a, b) > _cos(a, c) + 0.05, (text, _cos(a, b), _cos(a, c))


def test_default_is_the_one_line_constant(offline):
    emb = providers.get_embedder(Settings.load(env={}))
    assert emb.name == f"local/{local.DEFAULT_EMBEDDING_MODEL}"


def test_bge_batch_order_and_padding_do_not_change_vectors(offline):
    emb = providers.get_embedder(Settings.load(env={"GRAPHMEM_LOCAL_EMBEDDING_MODEL": "bge-small-en-v1.5"}))
    short, long_ = "cache invalidation", "a much longer sentence about " * 20 + "cache invalidation"
    texts = [long_] + [f"note {i} about {short}" for i in range(40)] + [short]
    batch = asyncio.run(emb.embed(texts))  # > INLINE: runs in a worker thread, sorted by length
    alone = asyncio.run(emb.embed([short]))[0]
    # int8 dynamic quantization scales activations per batch, so batch-mates move a vector a
    # little (cos ~0.995); each vector must still land at its own text's position.
    assert _cos(batch[-1], alone) > 0.99
    assert max(range(len(batch)), key=lambda i: _cos(batch[i], alone)) == len(batch) - 1
    assert _cos(batch[0], asyncio.run(emb.embed([long_]))[0]) > 0.99
    assert asyncio.run(emb.embed_query(short)) == pytest.approx(alone, abs=1e-5)
    assert asyncio.run(emb.embed([])) == []


def test_models_load_once_per_process(offline):
    a = providers.get_embedder(Settings.load(env={"GRAPHMEM_LOCAL_EMBEDDING_MODEL": "wordllama"}))
    b = providers.get_embedder(Settings.load(env={"GRAPHMEM_LOCAL_EMBEDDING_MODEL": "wordllama"},
                                             providers__timeout=5.0))  # other settings, same model
    assert a is b


def test_local_reranker_offline_prefers_the_answer(offline):
    settings = Settings.load(env={"GRAPHMEM_RERANKER": "local"})
    rr = providers.get_reranker(settings)
    assert isinstance(rr, Reranker) and rr.name == "local/ms-marco-MiniLM-L-12-v2"
    passages = ["Paris is the capital and largest city of France.",
                "The Eiffel Tower was painted brown in 1968.",
                "Bananas are rich in potassium."]
    scores = asyncio.run(rr.score("What is the capital of France?", passages))
    assert len(scores) == 3 and all(0.0 < s < 1.0 for s in scores)
    assert scores[0] > scores[1] > scores[2]
    many = asyncio.run(rr.score("capital of France", passages * 4))  # worker-thread path
    assert many[:3] == pytest.approx(asyncio.run(rr.score("capital of France", passages)), abs=1e-4)


def test_garbage_input_is_refused(offline):
    emb = providers.get_embedder(Settings.load(env={}))
    with pytest.raises(ValidationError, match="texts"):
        asyncio.run(emb.embed("not a list"))
    with pytest.raises(ValidationError, match="texts: item 1"):
        asyncio.run(emb.embed(["ok", 42]))
    rr = providers.get_reranker(Settings.load(env={"GRAPHMEM_RERANKER": "local"}))
    with pytest.raises(ValidationError, match="query"):
        asyncio.run(rr.score(None, ["x"]))


def test_unknown_local_model_lists_known_ones():
    with pytest.raises(ConfigError, match="'default', 'answerai-colbert-small-v1', 'bge-small-en-v1.5' or 'wordllama'"):
        Settings.load(env={"GRAPHMEM_LOCAL_EMBEDDING_MODEL": "minilm"})
    with pytest.raises(ConfigError, match="GRAPHMEM_LOCAL_RERANKER .*'default' or 'ms-marco-MiniLM-L-12-v2'"):
        Settings.load(env={"GRAPHMEM_RERANKER": "local", "GRAPHMEM_LOCAL_RERANKER": "bge-reranker"})
    # Settings built in code skip the load's check: the factory still refuses, listing the names.
    settings = Settings.load()
    settings.providers.local.embedding_model = "minilm"
    with pytest.raises(ConfigError, match="known: default, answerai-colbert-small-v1, bge-small-en-v1.5, wordllama"):
        providers.get_embedder(settings)


def test_optimised_graph_is_cached_and_a_damaged_cache_is_rebuilt(offline, tmp_path):
    cache = tmp_path / "models"
    first = local.BgeEmbedder(onnx_runtime.ModelCache(cache))
    files = list(cache.glob("bge_small_en-*ort*.onnx"))
    assert len(files) == 1 and not list(cache.glob(".*.tmp"))
    second = local.BgeEmbedder(onnx_runtime.ModelCache(cache))  # loads the cached graph
    text = ["the outbox replays queued graph writes"]
    assert second.embed_sync(text)[0] == pytest.approx(first.embed_sync(text)[0], abs=1e-5)
    files[0].write_bytes(b"not an onnx model")
    third = local.BgeEmbedder(onnx_runtime.ModelCache(cache))
    assert third.embed_sync(text)[0] == pytest.approx(first.embed_sync(text)[0], abs=1e-5)
    assert files[0].stat().st_size > 1_000_000  # rebuilt


def test_bge_long_lists_run_side_by_side_with_the_same_vectors(offline):
    emb = local.BgeEmbedder()
    texts = [f"gotcha {i}: the {w} cache drops writes after a restart" for i, w in
             enumerate(["redis", "disk", "page", "query", "token", "dns", "http", "blob", "l2",
                        "cdn", "object", "plan"])]
    texts.append("a much longer text about the queue, " * 15 + "and its retries")
    assert len(texts) > local.INLINE  # the pooled path
    alone = [emb.embed_sync([t])[0] for t in texts]
    assert emb.embed_sync(texts) == alone  # exactly: each text still runs alone, in order
    assert asyncio.run(emb.embed(texts)) == alone  # async path: worker thread + pool
    # Two callers at once (search embedding a query while a write embeds its items) share the
    # session and the pool; neither sees the other's vectors.
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(2) as ex:
        a, b = ex.map(emb.embed_sync, [texts, texts[::-1]])
    assert a == alone and b == alone[::-1]
    with pytest.raises(ValidationError, match="texts: item 3"):
        asyncio.run(emb.embed(texts[:3] + [None] + texts[3:]))


def test_text_pool_is_remade_in_a_forked_child():
    import os
    import signal

    import threading

    gate = threading.Barrier(onnx_runtime.PARALLEL + 1)
    running = [onnx_runtime.pool().submit(gate.wait) for _ in range(onnx_runtime.PARALLEL)]
    gate.wait()  # every thread of the parent's pool exists (and is busy at once)
    for f in running:
        f.result()
    pid = os.fork()
    if pid == 0:  # the child: the inherited executor has no threads; work must still run
        signal.alarm(20)  # a hang ends the child with SIGALRM instead of hanging the suite
        ok = list(onnx_runtime.pool().map(lambda x: x * 2, range(4))) == [0, 2, 4, 6]
        os._exit(0 if ok else 1)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, status
