"""The executorch-hf backend (backends/thirdparty/executorch_hf), beyond what tests/test_thirdparty.py
runs on every third-party backend: h comes out of ExecuTorch's runtime running the exported program
(bit for bit the sum), the shape buckets a call is run on, the host-side conversions the adapter makes
(lossless int widening only; floats and bools reach the runtime, which rejects them), the layout fix
that keeps the binding from aborting on an empty array, and what the BOUNDS-MESSAGE waiver says the
runtime raises."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("executorch", reason="executorch is not installed (pip install -e '.[executorch]')")
pytest.importorskip("transformers", reason="transformers is not installed (pip install -e '.[executorch]')")

from gpt2_conformance.api import gpt2  # noqa: E402
from gpt2_conformance.api.adapter import AdapterConfig  # noqa: E402
from gpt2_conformance.api.errors import TableShapeError  # noqa: E402
from gpt2_conformance.backends.thirdparty.executorch_hf import adapter as et  # noqa: E402
from helpers.loaded_engines import load_random_tables  # noqa: E402


@pytest.fixture(scope="module")
def loaded():
    return load_random_tables(et.ExecuTorchHFAdapter)


def test_h_is_the_runtimes_answer_bit_for_bit(loaded):
    adapter, wte, wpe = loaded
    ids = np.array([[3, 50256, 0], [7, 7, 1]])
    assert np.array_equal(adapter.embed(ids, 0), wte[ids] + wpe[0:3])
    assert np.array_equal(adapter.embed(ids[:, :1], 37), wte[ids[:, :1]] + wpe[37:38])
    path = et.program_path("h", gpt2.N_EMBD_SMALL, "float32", et.bucket(2, 3, et.H_BUCKETS))
    assert path in et._METHODS  # the call ran the loaded .pte, not the model
    with open(path, "rb") as f:
        assert f.read(8)[4:8] == b"ET12"  # an ExecuTorch flatbuffer program (the .pte's file identifier)


def test_logits_are_the_tied_head(loaded):
    adapter, wte, _ = loaded
    h = np.random.default_rng(1).standard_normal((1, 2, gpt2.N_EMBD_SMALL), dtype=np.float32)
    np.testing.assert_allclose(adapter.logits(h), h @ wte.T, rtol=1e-4, atol=1e-3)


def test_a_call_runs_on_the_smallest_bucket_holding_it():
    assert et.bucket(1, 1, et.H_BUCKETS) == (64, 8)
    assert et.bucket(10, 50, et.H_BUCKETS) == (16, 64)
    assert et.bucket(2, gpt2.N_CTX, et.H_BUCKETS) == (3, 2 * gpt2.N_CTX)
    assert et.bucket(5, 100, et.H_BUCKETS) == (8, 128)  # outside every bucket: the next powers of two
    assert et.bucket(65, 8, et.H_BUCKETS) == (128, 8)
    for batch, length in ((1, 1), (3, 2048), (64, 8), (200, 3), (4, 3000)):
        b, t = et.bucket(batch, length, et.H_BUCKETS)
        assert batch <= b and length <= t


def test_signed_ints_are_widened_and_nothing_else_is_converted(loaded):
    adapter, wte, wpe = loaded
    ids = np.array([[5, 6]], np.int32)
    assert np.array_equal(adapter.embed(ids, np.array(3, np.int32)), wte[ids] + wpe[3:5])
    for bad_ids in (np.array([[5.0]]), np.array([[True]]), np.array([[5]], np.uint8)):
        with pytest.raises(RuntimeError, match="set_inputs"):  # the runtime's dtype check, not ours
            adapter.embed(bad_ids, 0)
    for past in (1.5, 2.0, True):
        with pytest.raises(RuntimeError, match="set_inputs"):
            adapter.embed(np.array([[5]]), past)


def test_an_empty_array_reaches_the_runtime_in_torchs_layout():
    """numpy gives np.zeros((3, 0)) strides (0, 0), on which the binding aborts the process; the
    adapter hands torch's contiguous strides, so the runtime answers (here with its view error)."""
    empty = np.zeros((3, 0), np.int64)
    assert empty.strides == (0, 0)
    assert et._tensor(empty).stride() == (1, 1)
    assert et._tensor(np.array([[1, 2, 3]])[:, ::-1]).tolist() == [[3, 2, 1]]


def test_a_bad_index_raises_the_error_code_the_waiver_names(loaded):
    adapter, _, _ = loaded
    for ids, past in ((np.array([[gpt2.N_VOCAB]]), 0), (np.array([[-1]]), 0), (np.array([[1]]), gpt2.N_CTX)):
        with pytest.raises(RuntimeError, match=r"execute\(\) failed with error 0x12"):
            adapter.embed(ids, past)


def test_parameters_are_the_programs_table_inputs():
    adapter = et.ExecuTorchHFAdapter()  # no tables loaded: read from the program's metadata
    assert adapter.parameters() == {
        "transformer.wte.weight": (gpt2.N_VOCAB, gpt2.N_EMBD_SMALL),
        "transformer.wpe.weight": (gpt2.N_CTX, gpt2.N_EMBD_SMALL),
    }


def test_unclaimed_configs_and_calls_are_refused():
    with pytest.raises(ValueError, match="float64"):
        et.ExecuTorchHFAdapter(AdapterConfig(dtype="float64"))
    with pytest.raises(ValueError, match="gpu"):
        et.ExecuTorchHFAdapter(AdapterConfig(device="gpu"))
    with pytest.raises(NotImplementedError, match="mutable_tables"):
        et.ExecuTorchHFAdapter().assign_wte_row(0, np.zeros(gpt2.N_EMBD_SMALL, np.float32))


def test_malformed_tables_are_refused_by_our_load_tables():
    """The protocol takes float32 [V, d] and [C, d] only: the adapter's check_tables refuses the rest
    (a wrong shape would otherwise reach the runtime as a program input, a float16 table be rounded)."""
    d = gpt2.N_EMBD_SMALL
    adapter = et.ExecuTorchHFAdapter()
    with pytest.raises(TableShapeError, match=rf"wte.shape=\(50257, {d - 1}\)"):
        adapter.load_tables(np.zeros((gpt2.N_VOCAB, d - 1), np.float32), np.zeros((gpt2.N_CTX, d), np.float32))
    with pytest.raises(TableShapeError, match="wpe.dtype=float16, but should be float32"):
        adapter.load_tables(np.zeros((gpt2.N_VOCAB, d), np.float32), np.zeros((gpt2.N_CTX, d), np.float16))
