"""The OpenVINO backend (backends/thirdparty/openvino_hf), beyond what tests/test_thirdparty.py runs
on every third-party backend: it runs the very graph onnxruntime-hf runs, the silent behaviours
its waivers describe are what h shows (Gather-8's zero rows and wrap, the Python API's cast of
float ids), and the precision pin is why the head is float32 on every host."""

from __future__ import annotations

import os

import numpy as np
import pytest

for _module in ("torch", "transformers", "onnx", "onnxscript", "openvino"):
    pytest.importorskip(_module)

import openvino as ov  # noqa: E402
import torch  # noqa: E402

from gpt2_conformance.api import gpt2  # noqa: E402
from gpt2_conformance.backends.thirdparty.onnx_hf_common import MODEL_FILE  # noqa: E402
from gpt2_conformance.backends.thirdparty.onnxruntime_hf import export  # noqa: E402
from gpt2_conformance.backends.thirdparty.openvino_hf.adapter import DEVICE, OpenVINOHFAdapter  # noqa: E402
from helpers.loaded_engines import load_random_tables  # noqa: E402

D = gpt2.N_EMBD_SMALL


@pytest.fixture(scope="module")
def loaded():
    return load_random_tables(OpenVINOHFAdapter)


def test_runs_the_onnxruntime_graph(loaded):
    """One export, several engines: the graph is onnxruntime-hf's (export.export's cached graph)."""
    adapter, _, _ = loaded
    assert adapter.graph is export.export(D, "float32")
    inputs = {name for port in adapter.compiled.inputs for name in port.get_names()}
    assert inputs == set(export.INPUTS), inputs


def test_out_of_range_rows_are_zeros_and_negative_ids_wrap(loaded):
    """BOUNDS-TOKEN / BOUNDS-POSITION as h shows them: Gather-8 wraps [-s, -1] and zero-fills past s."""
    adapter, wte, wpe = loaded
    h = adapter.embed(np.array([[-1, 50257, 2**31 - 1, -50258]]), 0)
    assert np.array_equal(h[0, 0], wte[-1] + wpe[0]), "id -1 should read wte[50256]"
    for t in (1, 2, 3):
        assert np.array_equal(h[0, t], wpe[t]), f"id at t={t} should read a zero row of wte"
    h = adapter.embed(np.array([[7, 8]]), gpt2.N_CTX - 1)
    assert np.array_equal(h[0, 0], wte[7] + wpe[-1]) and np.array_equal(h[0, 1], wte[8]), "position 1024: zero row"


def test_a_huge_cache_costs_no_memory(loaded):
    """The cache goes in with share_inputs: a past_length of 10**6 (6 GB of zeros never touched) runs."""
    adapter, wte, _ = loaded
    h = adapter.embed(np.ones((2, 3), np.int64), 10**6)
    assert np.array_equal(h, np.broadcast_to(wte[1], h.shape))


def test_float_ids_are_cast_by_the_python_api(loaded):
    """BOUNDS-INPUT: float and bool ids are cast to the graph's int64 (data_dispatcher), no error."""
    adapter, wte, wpe = loaded
    ids = np.array([[0, 3, 5]])
    for dtype in (np.float32, np.float64, np.int32):
        assert np.array_equal(adapter.embed(ids.astype(dtype), 0), wte[ids] + wpe[:3]), dtype


def test_default_precision_would_change_the_head(loaded):
    """Why COMPILE_CONFIG pins f32: where the CPU plugin's default inference precision is bf16,
    the head's MatMul runs on bfloat16 inputs and the logits differ from the f32 compile."""
    adapter, _, _ = loaded
    core = ov.Core()
    if core.get_property(DEVICE, "INFERENCE_PRECISION_HINT") != ov.Type.bf16:
        pytest.skip("this CPU's default inference precision is not bf16")
    h = np.random.default_rng(1).standard_normal((1, 2, D), dtype=np.float32)
    model = core.read_model(os.path.join(adapter._folder, MODEL_FILE))  # the adapter's own model file
    default = core.compile_model(model, DEVICE)
    feeds = {"input_ids": np.zeros((1, 0), np.int64), "past_key": np.zeros((1, 12, 0, 64), np.float32), "h_final": h}
    got = default.create_infer_request().infer(feeds)[default.output("logits")]
    assert not np.array_equal(got, adapter.logits(h))


def test_versions_recorded():
    text = OpenVINOHFAdapter.implementation()
    for part in (
        f"OpenVINO {ov.get_version()}",
        "INFERENCE_PRECISION_HINT f32",
        f"torch {torch.__version__}",
        f"opset {export.OPSET}",
    ):
        assert part in text, f"implementation()={text!r}, but should name {part!r}"
