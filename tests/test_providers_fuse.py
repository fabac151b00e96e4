"""The fused copies of the shipped int8 models: built once, close to the shipped model, and any
failure falls back to the shipped file without leaving debris."""

from __future__ import annotations

import logging

import numpy as np
import pytest

from graphmem.providers import local, local_fuse, onnx_runtime
from graphmem.providers.local_colbert import ColbertEncoder
from graphmem.settings import Settings

TEXTS = ["The staging proxy strips Authorization headers on redirects.",
         "why does the login token disappear after a forward?",
         "Run the migrations before starting the server."]


def _tokens(enc: ColbertEncoder) -> list[np.ndarray]:
    return [enc._run(t, 2, 256, skip_punct=True) for t in TEXTS]


def _cache(monkeypatch, **env: str) -> onnx_runtime.ModelCache:
    """The model cache the settings name after ``env`` (GRAPHMEM_MODEL_CACHE, ...) is set."""
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return onnx_runtime.model_cache(Settings.load())


@pytest.fixture
def cache(tmp_path, monkeypatch):
    path = tmp_path / "model-cache"
    made = _cache(monkeypatch, GRAPHMEM_MODEL_CACHE=str(path))
    assert made == onnx_runtime.ModelCache(path, fuse=True)
    return path


def test_fused_model_is_built_once_and_computes_what_the_shipped_one_does(cache, monkeypatch):
    source = onnx_runtime.model_dir("colbert") / "model.onnx"
    on = onnx_runtime.ModelCache(cache)
    assert local_fuse.status({"ColBERT": source}, on) == ("ok", f"{cache}: ColBERT built on first use")
    built = local_fuse.fused(source, on)
    assert local_fuse.status({"ColBERT": source}, on) == ("ok", f"{cache}: ColBERT ready")
    assert built is not None and built.parent == cache and built.stat().st_size > 1_000_000
    assert [p.name for p in cache.iterdir()] == [built.name]  # no work files left behind
    stamp = built.stat().st_mtime_ns
    assert local_fuse.fused(source, on) == built and built.stat().st_mtime_ns == stamp  # reused

    fast = _tokens(ColbertEncoder(on))
    shipped = _tokens(ColbertEncoder(_cache(monkeypatch, GRAPHMEM_FUSE_MODELS="off")))
    for a, b in zip(fast, shipped):
        assert a.shape == b.shape
        cos = (a * b).sum(axis=1)  # unit token vectors
        assert cos.min() > 0.97 and cos.mean() > 0.99


def test_the_switch_turns_fusing_off(cache, monkeypatch):
    off = _cache(monkeypatch, GRAPHMEM_FUSE_MODELS="off")
    assert off == onnx_runtime.ModelCache(cache, fuse=False)
    source = onnx_runtime.model_dir("colbert") / "model.onnx"
    assert local_fuse.fused(source, off) is None
    assert not cache.exists()
    assert local_fuse.status({"ColBERT": source}, off)[1].startswith("off (GRAPHMEM_FUSE_MODELS)")


def test_doctor_warns_when_the_cache_cannot_be_written(tmp_path, monkeypatch):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    blocked = _cache(monkeypatch, GRAPHMEM_MODEL_CACHE=str(blocker / "cache"))
    source = onnx_runtime.model_dir("colbert") / "model.onnx"
    status, detail = local_fuse.status({"ColBERT": source}, blocked)
    assert status == "warn" and "cannot be written" in detail and "GRAPHMEM_MODEL_CACHE" in detail


def test_a_model_that_cannot_be_fused_runs_as_shipped_and_leaves_nothing(cache, tmp_path, caplog):
    garbage = tmp_path / "broken" / "model.onnx"
    garbage.parent.mkdir()
    garbage.write_bytes(b"this is not an onnx model")
    with caplog.at_level(logging.WARNING, logger="graphmem.providers"):
        assert local_fuse.fused(garbage, onnx_runtime.ModelCache(cache)) is None
    assert "unfused" in caplog.text
    assert not any(cache.iterdir())  # no half-built model, no work folder
    missing = tmp_path / "gone" / "model.onnx"
    status, detail = local_fuse.status({"ColBERT": missing}, onnx_runtime.ModelCache(cache))
    assert status == "warn" and "cannot fuse" in detail and "gone" in detail


def test_a_damaged_fused_model_is_replaced_by_the_shipped_one(cache, caplog):
    source = onnx_runtime.model_dir("reranker_en") / "model.onnx"
    pairs = [("why is the login token lost?", TEXTS[0]), ("why is the login token lost?", TEXTS[2])]
    on = onnx_runtime.ModelCache(cache)
    good = local.CrossEncoderReranker(on).score_sync(pairs)
    built = local_fuse.fused(source, on)
    built.write_bytes(b"truncated")
    with caplog.at_level(logging.WARNING, logger="graphmem.providers"):
        ce = local.CrossEncoderReranker(on)  # loads the shipped model instead, and drops the bad copy
    assert "unusable" in caplog.text and not built.exists()
    got = ce.score_sync(pairs)
    assert got[0] > got[1] and got == pytest.approx(good, abs=0.05)
    assert local_fuse.fused(source, on) == built and built.stat().st_size > 1_000_000  # rebuilt


def test_bge_runs_as_shipped(cache):
    local.BgeEmbedder(onnx_runtime.ModelCache(cache)).embed_sync(TEXTS)
    assert not list(cache.glob("*fused*"))  # its fused copy moved its vectors too far (local_fuse.py)
