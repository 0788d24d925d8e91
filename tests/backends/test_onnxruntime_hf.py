"""The ONNX Runtime backend (backends/thirdparty/onnxruntime_hf), beyond what tests/test_thirdparty.py
runs on every third-party backend: the exported graph keeps GPT-2's tie, the report names the
exporter, opset and runtime, and the two runtime facts behind the adapter's claims hold (ORT's
optimizer gives the head its own transposed copy of wte, so mutable_tables is not claimed; ORT's
CPU provider has no bfloat16 Add, so bfloat16 is not claimed)."""

from __future__ import annotations

import dataclasses
import tempfile

import numpy as np
import pytest

for _module in ("torch", "transformers", "onnx", "onnxscript", "onnxruntime"):
    pytest.importorskip(_module)

import onnx  # noqa: E402
import onnxruntime as ort  # noqa: E402
import torch  # noqa: E402

from gpt2_conformance.api import gpt2  # noqa: E402
from gpt2_conformance.backends.thirdparty.hf_transformers.adapter import gpt2_config  # noqa: E402
from gpt2_conformance.backends.thirdparty.onnxruntime_hf import export  # noqa: E402
from gpt2_conformance.backends.thirdparty.onnxruntime_hf.adapter import (  # noqa: E402
    PROVIDER,
    OnnxRuntimeHFAdapter,
    OnnxRuntimeHFPositionIdsAdapter,
)

D = gpt2.N_EMBD_SMALL


@pytest.fixture(scope="module")
def graph():
    return export.export(D, "float32")


def _consumers(model: onnx.ModelProto, name: str) -> list[onnx.NodeProto]:
    return [node for node in model.graph.node if name in node.input]


def test_exported_graph_keeps_the_tie(graph):
    """One [V, d] initializer feeds the token Gather and, through one Transpose, the head's MatMul;
    the graph holds no other table (block 0 was pruned: no output depends on it)."""
    model = onnx.load_from_string(graph.model_bytes)
    tables = {i.name: tuple(i.dims) for i in model.graph.initializer if len(i.dims) == 2}
    assert tables == {graph.wte_name: (gpt2.N_VOCAB, D), graph.wpe_name: (gpt2.N_CTX, D)}, tables
    ops = sorted(node.op_type for node in _consumers(model, graph.wte_name))
    assert ops == ["Gather", "Transpose"], f"wte is read by {ops}, but should be read by one Gather and one Transpose"
    transpose = next(n for n in _consumers(model, graph.wte_name) if n.op_type == "Transpose")
    head = _consumers(model, transpose.output[0])
    assert [(n.op_type, list(n.output)) for n in head] == [("MatMul", ["logits"])], head
    assert graph.head_uses_wte
    assert sorted(n.op_type for n in model.graph.node if n.op_type in ("Gather", "MatMul")) == [
        "Gather",
        "Gather",
        "MatMul",
    ]


def test_offset_is_the_cache_length_in_the_graph(graph):
    """wpe's Gather reads Range(0, T) + Shape(past_key)[2]: the graph computes the offset itself."""
    model = onnx.load_from_string(graph.model_bytes)
    producers = {out: node for node in model.graph.node for out in node.output}
    seen, todo = set(), [n.input[1] for n in _consumers(model, graph.wpe_name) if n.op_type == "Gather"]
    while todo:
        name = todo.pop()
        if name in producers and name not in seen:
            seen.add(name)
            todo += list(producers[name].input)
    assert "past_key" in {i for n in seen for i in producers[n].input}, "wpe's indices do not depend on past_key"
    assert "Range" in {producers[n].op_type for n in seen}


def test_versions_recorded(graph):
    text = OnnxRuntimeHFAdapter.implementation()
    for part in (
        f"onnxruntime {ort.__version__}",
        PROVIDER,
        f"torch {torch.__version__}",
        "dynamo=True",
        f"opset {export.OPSET}",
        f"onnx {onnx.__version__}",
        "transformers",
    ):
        assert part in text, f"implementation()={text!r}, but should name {part!r}"
    opsets = {o.domain or "ai.onnx": o.version for o in onnx.load_from_string(graph.model_bytes).opset_import}
    assert opsets.get("ai.onnx") == export.OPSET == graph.opset, opsets


def test_session_gives_the_head_its_own_copy_of_wte(graph, tmp_path):
    """Why mutable_tables is not claimed: with ORT's default optimizations the session folds
    Transpose(wte) into a second, [d, V] initializer, so the running head holds a copy."""
    rng = np.random.default_rng(0)
    wte = rng.standard_normal((gpt2.N_VOCAB, D), dtype=np.float32)
    wpe = rng.standard_normal((gpt2.N_CTX, D), dtype=np.float32)
    options = ort.SessionOptions()
    options.optimized_model_filepath = str(tmp_path / "optimized.onnx")
    options.add_external_initializers(
        [graph.wte_name, graph.wpe_name], [ort.OrtValue.ortvalue_from_numpy(t) for t in (wte, wpe)]
    )
    ort.InferenceSession(graph.model_bytes, options, providers=[PROVIDER])
    optimized = onnx.load(options.optimized_model_filepath)
    copies = [i for i in optimized.graph.initializer if tuple(i.dims) == (D, gpt2.N_VOCAB)]
    assert len(copies) == 1, [(i.name, tuple(i.dims)) for i in optimized.graph.initializer]
    assert np.array_equal(onnx.numpy_helper.to_array(copies[0]), wte.T)


def test_bfloat16_has_no_cpu_kernel():
    """Why bfloat16 is not claimed: the graph exports, but the CPU provider has no bfloat16 Add."""
    graph = export.export(D, "bfloat16")
    tables = [np.zeros((gpt2.N_VOCAB, D), np.uint16), np.zeros((gpt2.N_CTX, D), np.uint16)]
    options = ort.SessionOptions()
    options.add_external_initializers(
        [graph.wte_name, graph.wpe_name],
        [ort.OrtValue.ortvalue_from_numpy_with_onnx_type(t, onnx.TensorProto.BFLOAT16) for t in tables],
    )
    with pytest.raises(Exception, match=r"NOT_IMPLEMENTED.*Add"):
        ort.InferenceSession(graph.model_bytes, options, providers=[PROVIDER])
    assert "bfloat16" not in OnnxRuntimeHFAdapter.capabilities.dtypes


def test_torchscript_exporter_unties_the_head(tmp_path):
    """Why the backend uses the dynamo exporter: torch's TorchScript exporter (dynamo=False), with
    its default do_constant_folding=True (torch/onnx/__init__.py L98 in torch 2.13), folds
    lm_head's Transpose(wte) into a second [d, V] initializer, so its ONNX file stores the table
    twice and the head no longer reads wte (a graph that loads only wte would give stale logits)."""
    import io
    import warnings
    from contextlib import redirect_stdout

    from transformers import GPT2LMHeadModel

    config = gpt2_config(D)
    model = GPT2LMHeadModel(config).eval()
    n_head, head_dim = config.n_head, D // config.n_head
    example = (
        torch.zeros(2, 5, dtype=torch.int64),
        torch.zeros(2, n_head, 3, head_dim),
        torch.zeros(2, n_head, 3, head_dim),
        torch.zeros(2, 5, D),
    )
    path = tmp_path / "torchscript.onnx"
    with warnings.catch_warnings(), redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")
        torch.onnx.export(
            export.module(model),
            example,
            str(path),
            dynamo=False,
            input_names=list(export.INPUTS),
            output_names=list(export.OUTPUTS),
        )
    exported = onnx.load(str(path))
    tables = {i.name: tuple(i.dims) for i in exported.graph.initializer if len(i.dims) == 2}
    assert sorted(tables.values()) == [(D, gpt2.N_VOCAB), (gpt2.N_CTX, D), (gpt2.N_VOCAB, D)], tables
    head_copy = next(i for i in exported.graph.initializer if tuple(i.dims) == (D, gpt2.N_VOCAB))
    assert np.array_equal(onnx.numpy_helper.to_array(head_copy), model.lm_head.weight.detach().numpy().T)


def test_position_ids_graph_same_bits_and_negative_positions_wrap():
    """The Optimum-style graph (positions from the host) gives the cache graph's bits, and what it
    adds: a host position of -1 reads wpe[1023] with no error (ONNX Gather's [-s, s-1] range),
    which is why a negative past_length fails BOUNDS-PAST-LENGTH there and not in onnxruntime-hf."""
    rng = np.random.default_rng(1)
    wte = rng.standard_normal((gpt2.N_VOCAB, D), dtype=np.float32)
    wpe = rng.standard_normal((gpt2.N_CTX, D), dtype=np.float32)
    cached, positioned = OnnxRuntimeHFAdapter(), OnnxRuntimeHFPositionIdsAdapter()
    for adapter in (cached, positioned):
        adapter.load_tables(wte, wpe)
    ids = rng.integers(0, gpt2.N_VOCAB, (2, 4))
    for past in (0, 7, gpt2.N_CTX - 4):
        assert np.array_equal(positioned.embed(ids, past), cached.embed(ids, past)), past
    h = positioned.embed(ids[:, :1], -1)
    assert np.array_equal(h, wte[ids[:, :1]] + wpe[-1]), "position -1 should read wpe[1023] (ONNX Gather)"
    with pytest.raises(ValueError, match="negative dimensions"):  # the cache graph: numpy refuses the length
        cached.embed(ids[:, :1], -1)


def test_export_is_kept_on_disk_for_the_next_process_and_only_for_its_setup(graph, tmp_path, monkeypatch):
    """A second process (an empty in-process cache) reads the graph back instead of exporting;
    another setup (here another offset input) is not served from it, and a folder other users
    can write into is not read at all."""
    monkeypatch.setattr(tempfile, "gettempdir", lambda: str(tmp_path))
    monkeypatch.setattr(export, "_CACHE", {})
    calls = []
    made = {"cache": graph, "position_ids": dataclasses.replace(graph, model_bytes=b"another graph")}
    monkeypatch.setattr(export, "_export", lambda *a: calls.append(a[2]) or made[a[2]])
    first = export.export(D, "float32")
    monkeypatch.setattr(export, "_CACHE", {})
    again = export.export(D, "float32")
    assert calls == ["cache"] and again == first == graph
    monkeypatch.setattr(export, "_CACHE", {})
    other = export.export(D, "float32", offset="position_ids")
    assert calls == ["cache", "position_ids"] and other.model_bytes != graph.model_bytes
    (tmp_path / f"gpt2-conformance-{__import__('os').getuid()}").chmod(0o777)
    monkeypatch.setattr(export, "_CACHE", {})
    export.export(D, "float32")
    assert calls == ["cache", "position_ids", "cache"]
