"""The fused copies of the shipped int8 models: built once, close to the shipped model, and any
failure falls back to the shipped file without leaving debris."""

from __future__ import annotations

import logging

import numpy as np
import pytest

from graphmem.providers import local, local_fuse, onnx_runtime
from graphmem.providers.local_colbert import ColbertEncoder

TEXTS = ["The staging proxy strips Authorization headers on redirects.",
         "why does the login token disappear after a forward?",
         "Run the migrations before starting the server."]


def _tokens(enc: ColbertEncoder) -> list[np.ndarray]:
    return [enc._run(t, 2, 256, skip_punct=True) for t in TEXTS]


@pytest.fixture
def cache(tmp_path, monkeypatch):
    path = tmp_path / "model-cache"
    monkeypatch.setenv("GRAPHMEM_MODEL_CACHE", str(path))
    return path


def test_fused_model_is_built_once_and_computes_what_the_shipped_one_does(cache, monkeypatch):
    source = onnx_runtime.model_dir("colbert") / "model.onnx"
    assert local_fuse.status({"ColBERT": source}) == ("ok", f"{cache}: ColBERT built on first use")
    built = local_fuse.fused(source)
    assert local_fuse.status({"ColBERT": source}) == ("ok", f"{cache}: ColBERT ready")
    assert built is not None and built.parent == cache and built.stat().st_size > 1_000_000
    assert [p.name for p in cache.iterdir()] == [built.name]  # no work files left behind
    stamp = built.stat().st_mtime_ns
    assert local_fuse.fused(source) == built and built.stat().st_mtime_ns == stamp  # reused

    fast = _tokens(ColbertEncoder())
    monkeypatch.setenv("GRAPHMEM_FUSE_MODELS", "off")
    shipped = _tokens(ColbertEncoder())
    for a, b in zip(fast, shipped):
        assert a.shape == b.shape
        cos = (a * b).sum(axis=1)  # unit token vectors
        assert cos.min() > 0.97 and cos.mean() > 0.99


def test_the_switch_turns_fusing_off(cache, monkeypatch):
    monkeypatch.setenv("GRAPHMEM_FUSE_MODELS", "off")
    source = onnx_runtime.model_dir("colbert") / "model.onnx"
    assert local_fuse.fused(source) is None
    assert not cache.exists()
    assert local_fuse.status({"ColBERT": source})[1].startswith("off (GRAPHMEM_FUSE_MODELS)")


def test_doctor_warns_when_the_cache_cannot_be_written(tmp_path, monkeypatch):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    monkeypatch.setenv("GRAPHMEM_MODEL_CACHE", str(blocker / "cache"))
    source = onnx_runtime.model_dir("colbert") / "model.onnx"
    status, detail = local_fuse.status({"ColBERT": source})
    assert status == "warn" and "cannot be written" in detail and "GRAPHMEM_MODEL_CACHE" in detail


def test_a_model_that_cannot_be_fused_runs_as_shipped_and_leaves_nothing(cache, tmp_path, caplog):
    garbage = tmp_path / "broken" / "model.onnx"
    garbage.parent.mkdir()
    garbage.write_bytes(b"this is not an onnx model")
    with caplog.at_level(logging.WARNING, logger="graphmem.providers"):
        assert local_fuse.fused(garbage) is None
    assert "unfused" in caplog.text
    assert not any(cache.iterdir())  # no half-built model, no work folder
    missing = tmp_path / "gone" / "model.onnx"
    status, detail = local_fuse.status({"ColBERT": missing})
    assert status == "warn" and "cannot fuse" in detail and "gone" in detail


def test_a_damaged_fused_model_is_replaced_by_the_shipped_one(cache, caplog):
    source = onnx_runtime.model_dir("reranker_en") / "model.onnx"
    pairs = [("why is the login token lost?", TEXTS[0]), ("why is the login token lost?", TEXTS[2])]
    good = local.CrossEncoderReranker().score_sync(pairs)
    built = local_fuse.fused(source)
    built.write_bytes(b"truncated")
    with caplog.at_level(logging.WARNING, logger="graphmem.providers"):
        ce = local.CrossEncoderReranker()  # loads the shipped model instead, and drops the bad copy
    assert "unusable" in caplog.text and not built.exists()
    got = ce.score_sync(pairs)
    assert got[0] > got[1] and got == pytest.approx(good, abs=0.05)
    assert local_fuse.fused(source) == built and built.stat().st_size > 1_000_000  # rebuilt


def test_bge_runs_as_shipped(cache):
    local.BgeEmbedder().embed_sync(TEXTS)
    assert not cache.exists()  # its fused copy moved its vectors too far (local_fuse.py)
