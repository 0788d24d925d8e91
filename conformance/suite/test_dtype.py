"""DTYPE: float32 tables round-trip bit for bit; float16 and bfloat16 (where claimed) are
stored rounded to nearest-even, h is within 1 ulp of the exact sum of the stored values and
the head within u * |exact| + gamma_d(float32) * |h| @ |wte|^T (see conformance/numerics.py)."""

import numpy as np
import pytest

from conformance import gpt2, oracle
from conformance.assertions import as_array, assert_bitwise_equal, assert_dtype, assert_within, describe_call
from conformance.numerics import UNIT_ROUNDOFF, representable, round_to_dtype, ulp

D = gpt2.N_EMBD_SMALL


@pytest.mark.clause("DTYPE-FLOAT32-ROUNDTRIP")
def test_float32_roundtrip(adapter, tables):
    """load_tables then tables() gives the same bits; h is float32."""
    wte, wpe = adapter.tables()
    assert_bitwise_equal(wte, tables[0], "tables() after load_tables", "wte")
    assert_bitwise_equal(wpe, tables[1], "tables() after load_tables", "wpe")
    ids = np.array([[1, 2]])
    assert_dtype(as_array(adapter.embed(ids, 0), "embed"), "float32", describe_call("embed", ids, 0), "h")


def _low_precision(make_adapter, tables, dtype):
    adapter = make_adapter(dtype=dtype)
    stored = [round_to_dtype(t, dtype) for t in tables]
    for name, got, want in zip(("wte", "wpe"), adapter.tables(), stored):
        assert_bitwise_equal(np.asarray(got, np.float32), want, f"tables() of a {dtype} adapter", name,
                             note="rounded to nearest-even")
    ids = np.array([[0, 1, 32768, gpt2.N_VOCAB - 1], [7, 7, 7, 7]])
    past = 1019
    call = describe_call("embed", ids, past, dtype=dtype)
    h = as_array(adapter.embed(ids, past), call)
    if dtype == "float16":
        assert_dtype(h, "float16", call, "h")
    h32 = h.astype(np.float32)
    if not representable(h32, dtype):
        raise AssertionError(f"h holds values that are not {dtype} numbers [{call}]")
    exact = stored[0][ids].astype(np.float64) + stored[1][oracle.positions(ids.shape[1], past)][None]
    assert_within(h32, exact, ulp(exact, dtype), call, "h", rule=f"1 {dtype} ulp")

    hf = round_to_dtype(np.random.default_rng(11).standard_normal((1, 3, D), dtype=np.float32), dtype)
    expected, bound = oracle.tied_logits(hf, stored[0])
    bound = bound + UNIT_ROUNDOFF[dtype] * np.abs(expected)
    logits = as_array(adapter.logits(hf.astype(np.float16) if dtype == "float16" else hf), "logits")
    assert_within(logits.astype(np.float32), expected, bound, describe_call("logits", h_final=f"{dtype}[1, 3, 768]"),
                  rule=f"u_{dtype} * |exact| + gamma_768(float32) bound")


@pytest.mark.clause("DTYPE-FLOAT16")
def test_float16(make_adapter, tables):
    _low_precision(make_adapter, tables, "float16")


@pytest.mark.clause("DTYPE-BFLOAT16")
def test_bfloat16(make_adapter, tables):
    _low_precision(make_adapter, tables, "bfloat16")
