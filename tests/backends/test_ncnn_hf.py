"""The ncnn backend (backends/thirdparty/ncnn_hf), beyond what tests/test_thirdparty.py runs on every
third-party backend: the adapter's own logic (locating the tables in pnnx's .bin, reading the
layers' weights from the .param, refusing what ncnn's untyped int32 input cannot carry) and the
engine facts the waivers rest on (ncnn's Embed clamps; the net computes in float32)."""

from __future__ import annotations

import numpy as np
import pytest

for _module in ("torch", "transformers", "pnnx", "ncnn"):
    pytest.importorskip(_module, reason=f"{_module} is not installed (the ncnn extra)")

from gpt2_conformance.api import gpt2  # noqa: E402
from gpt2_conformance.backends.thirdparty.ncnn_hf import adapter as ncnn_hf  # noqa: E402

D = gpt2.N_EMBD_SMALL


def test_pieces_split_the_bin_at_each_table():
    wte, wpe = b"W" * 64, b"P" * 32
    blob = b"\0\0\0\0" + wte + b"\0\0\0\0" + wpe + b"\1\1\1\1" + wte
    pieces = ncnn_hf._pieces(blob, {"wte": wte, "wpe": wpe})
    assert pieces == (b"\0\0\0\0", "wte", b"\0\0\0\0", "wpe", b"\1\1\1\1", "wte", b"")
    tables = {"wte": wte, "wpe": wpe}
    assert b"".join(tables[p] if isinstance(p, str) else p for p in pieces) == blob


def test_pieces_refuse_a_bin_without_both_copies_of_wte():
    wte, wpe = b"W" * 64, b"P" * 32
    with pytest.raises(RuntimeError, match="expected wte twice"):
        ncnn_hf._pieces(b"\0\0\0\0" + wte + wpe, {"wte": wte, "wpe": wpe})


def test_pieces_refuse_a_bin_holding_more_than_the_tables():
    wte, wpe = b"W" * 64, b"P" * 32
    with pytest.raises(RuntimeError, match="more than the two tables"):
        ncnn_hf._pieces(wte + wpe + wte + b"\0" * 1000, {"wte": wte, "wpe": wpe})


def test_weights_read_from_the_param():
    param = (
        "7767517\n4 4\nInput in0 0 1 in0\n"
        "Embed embed_1 1 1 in0 5 0=768 1=50257 2=0 3=38597376\n"
        "Embed embed_2 1 1 in1 6 0=768 1=1024 2=0 3=786432\n"
        "Gemm gemm_0 1 1 8 9 10=-1 2=0 3=1 4=0 5=1 6=1 7=0 8=50257 9=768\n"
    )
    assert ncnn_hf._weights(param) == {"embed_1": (50257, 768), "embed_2": (1024, 768), "gemm_0": (50257, 768)}


@pytest.fixture(scope="module")
def tables():
    rng = np.random.default_rng(0)
    return (rng.standard_normal((gpt2.N_VOCAB, D), np.float32), rng.standard_normal((gpt2.N_CTX, D), np.float32))


@pytest.fixture(scope="module")
def adapter(tables):
    a = ncnn_hf.NcnnHFAdapter()  # converts once (cached on disk for the next process)
    a.load_tables(*tables)
    return a


def test_the_net_computes_in_float32(adapter):
    opt = adapter.net.opt
    assert not (opt.use_fp16_storage or opt.use_fp16_packed or opt.use_fp16_arithmetic or opt.use_bf16_storage)


def test_h_and_logits_are_the_nets_outputs(adapter, tables):
    wte, wpe = tables
    ids = np.array([[0, 5, 50256], [7, 8, 9]], np.int64)
    h = adapter.embed(ids, past_length=2)
    assert h.shape == (2, 3, D) and h.dtype == np.float32
    np.testing.assert_allclose(h, wte[ids] + wpe[2:5], rtol=0, atol=1e-6)
    for offset in (np.int32(2), np.array(2, np.int64)):  # a numpy integer or 0-d integer array is an int
        np.testing.assert_array_equal(adapter.embed(ids, past_length=offset), h)
    h_final = np.random.default_rng(1).standard_normal((2, 3, D), np.float32)
    np.testing.assert_allclose(adapter.logits(h_final), h_final @ wte.T, rtol=1e-4, atol=1e-3)
    assert adapter.parameters() == {
        "embed_1": (gpt2.N_VOCAB, D),
        "embed_2": (gpt2.N_CTX, D),
        "gemm_0": (gpt2.N_VOCAB, D),
    }


def test_ncnn_embed_clamps_out_of_range_ids_and_positions(adapter, tables):
    """The engine fact behind the BOUNDS waivers (ncnn src/layer/embed.cpp): no error, the nearest row."""
    wte, wpe = tables
    h = adapter.embed(np.array([[gpt2.N_VOCAB, -1, 2**31 - 1]], np.int64))
    np.testing.assert_allclose(h[0], wte[[-1, 0, -1]] + wpe[:3], rtol=0, atol=1e-6)
    h = adapter.embed(np.array([[3, 3]], np.int64), past_length=gpt2.N_CTX - 1)  # positions 1023, 1024
    np.testing.assert_allclose(h[0], wte[[3, 3]] + wpe[[-1, -1]], rtol=0, atol=1e-6)
    h = adapter.embed(np.array([[3]], np.int64), past_length=-1)  # position -1
    np.testing.assert_allclose(h[0], wte[[3]] + wpe[[0]], rtol=0, atol=1e-6)


@pytest.mark.parametrize(
    ("ids", "past_length", "error", "match"),
    [
        (np.array([[1.0, 2.0]], np.float32), 0, TypeError, "ids must be integers.*raw bits"),
        (np.array([[True]]), 0, TypeError, "ids must be integers"),
        (np.array([1, 2], np.int64), 0, ValueError, r"ids must be \[B, T\]"),
        ([[1, 2]], 0, TypeError, "ids must be an array"),
        (np.array([[2**31]], np.int64), 0, ValueError, "ids must fit ncnn's int32 input"),
        (np.array([[1]], np.int64), 2**31, ValueError, "positions past_length \\+ t must fit"),
        (np.array([[1]], np.int64), 1.5, TypeError, "past_length must be an int"),
        (np.array([[1]], np.int64), True, TypeError, "past_length must be an int"),
        (np.array([[1]], np.int64), np.array(True), TypeError, "past_length must be an int"),
        (np.array([[1]], np.int64), np.array([1]), TypeError, "past_length must be an int"),
    ],
)
def test_bad_input_is_refused_naming_the_rule(adapter, ids, past_length, error, match):
    with pytest.raises(error, match=match):
        adapter.embed(ids, past_length)


def test_only_float32_on_cpu_is_served():
    with pytest.raises(ValueError, match="dtype 'float16'"):
        ncnn_hf.NcnnHFAdapter(ncnn_hf.AdapterConfig(dtype="float16"))
