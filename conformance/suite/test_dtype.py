"""DTYPE: float32 tables round-trip bit for bit; float16 and bfloat16 (where claimed) are
stored rounded to nearest-even, and h and the head are within their derived bounds of the
implementation's own float32 answers on the rounded tables (conformance/runtime/numerics.py): the
precision of the low-precision path, not the formula, which LOOKUP-EXACT and TIED judge."""

import numpy as np
import pytest

from gpt2_conformance.api import gpt2
from gpt2_conformance.runtime import oracle
from gpt2_conformance.runtime.assertions import (
    as_array,
    assert_bitwise_equal,
    assert_dtype,
    assert_within,
    describe_call,
)
from gpt2_conformance.runtime.calls import describe_array
from gpt2_conformance.runtime.numerics import UNIT_ROUNDOFF, representable, round_to_dtype, ulp
from gpt2_conformance.runtime.strategies import in_layout

D = gpt2.N_EMBD_SMALL


@pytest.mark.clause("DTYPE-FLOAT32-ROUNDTRIP")
def test_float32_roundtrip(adapter, tables):
    """load_tables then tables() gives the same bits; h is float32."""
    wte, wpe = adapter.tables()
    assert_bitwise_equal(wte, tables[0], "tables() after load_tables", "wte")
    assert_bitwise_equal(wpe, tables[1], "tables() after load_tables", "wpe")
    ids = np.array([[1, 2]])
    assert_dtype(as_array(adapter.embed(ids, 0), "embed"), "float32", describe_call("embed", ids, 0), "h")


@pytest.mark.clause("DTYPE-FLOAT32-ROUNDTRIP")
@pytest.mark.parametrize("layout", ("F", "every-other", "reversed"))
def test_float32_roundtrip_in_every_layout(make_adapter, tables, layout):
    """Tables handed over in another memory layout than C order (Fortran order, a strided or a
    reversed view) read back bit for bit: a copy made as if the buffer were C-contiguous does not."""
    adapter = make_adapter(load=False)
    wte, wpe = (in_layout(t, layout) for t in tables)
    adapter.load_tables(wte, wpe)
    call = f"tables() after load_tables(wte={describe_array(wte)}, wpe={describe_array(wpe)})"
    got_wte, got_wpe = adapter.tables()
    assert_bitwise_equal(got_wte, tables[0], call, "wte")
    assert_bitwise_equal(got_wpe, tables[1], call, "wpe")


def _float32_reference(float32_adapter, capabilities, stored, ids, past, h_final):
    """(h, logits) of the implementation's own float32 path on the dtype-rounded tables, with the
    bound of that path against the exact values; the formula when float32 is not claimed."""
    if capabilities.claims("dtype:float32"):
        float32_adapter.load_tables(*stored)
        h32 = as_array(float32_adapter.embed(ids, past), describe_call("embed", ids, past, dtype="float32"))
        logits32 = as_array(float32_adapter.logits(h_final), "logits(float32)") if capabilities.tied_head else None
        return h32.astype(np.float64), None if logits32 is None else logits32.astype(np.float64), "own float32"
    exact = stored[0][ids].astype(np.float64) + stored[1][oracle.positions(ids.shape[1], past)][None]
    expected = oracle.tied_logits(h_final, stored[0])[0] if capabilities.tied_head else None
    return exact, expected, "exact"


def _low_precision(make_adapter, capabilities, rounded_tables, dtype, past):
    """Stored tables are the float32 ones rounded to nearest-even; h is within 1 ulp (and the
    head within its bound) of the implementation's OWN float32 answer on those rounded tables:
    a value defect shared by every dtype is LOOKUP-EXACT's (and TIED's) to judge, not this
    clause's. |h - h32| <= ulp(exact) + u32 |exact|, |exact| <= |h32| (1 + u32)."""
    from gpt2_conformance.runtime.hooks import skip_unless_claimed

    if past:
        skip_unless_claimed(capabilities, "kv_cache")
    adapter = make_adapter(dtype=dtype)
    stored = rounded_tables(dtype)
    for name, got, want in zip(("wte", "wpe"), adapter.tables(), stored, strict=False):
        assert_bitwise_equal(
            np.asarray(got),
            want,
            f"tables() of a {dtype} adapter",
            name,
            note="rounded to nearest-even",
            converted=True,
        )
    ids = np.array([[0, 1, 32768, gpt2.N_VOCAB - 1], [7, 7, 7, 7]])
    hf = round_to_dtype(np.random.default_rng(11).standard_normal((1, 3, D), dtype=np.float32), dtype)
    ref_h, ref_logits, against = _float32_reference(
        make_adapter(load=False) if capabilities.claims("dtype:float32") else None, capabilities, stored, ids, past, hf
    )
    call = describe_call("embed", ids, past, dtype=dtype)
    h = as_array(adapter.embed(ids, past), call)
    if dtype == "float16":
        assert_dtype(h, "float16", call, "h")
    h32 = h.astype(np.float32)
    if h32.shape == ref_h.shape and not representable(h32, dtype):
        raise AssertionError(f"h holds values that are not {dtype} numbers [{call}]")
    u32 = UNIT_ROUNDOFF["float32"]
    top = np.abs(ref_h) * (1 + u32)
    assert_within(h32, ref_h, ulp(top, dtype) + u32 * top, call, "h", rule=f"1 {dtype} ulp of the {against} h")
    if ref_logits is None:
        return
    logits_call = describe_call("logits", h_final=f"{dtype}[1, 3, 768]")
    logits = as_array(adapter.logits(hf.astype(np.float16) if dtype == "float16" else hf), logits_call)
    if logits.size == ref_logits.size:
        logits = logits.reshape(ref_logits.shape)  # another shape is SHAPE-LOGITS' to judge
    _, bound32 = oracle.tied_logits(hf, stored[0])
    bound = UNIT_ROUNDOFF[dtype] * (np.abs(ref_logits) + bound32) + 2 * bound32
    assert_within(
        logits.astype(np.float32),
        ref_logits,
        bound,
        logits_call,
        rule=f"u_{dtype} * |logits| + 2 gamma_768(float32) bound of the {against} logits",
    )


@pytest.mark.clause("DTYPE-FLOAT16")
@pytest.mark.parametrize("past", [0, 7])
def test_float16(make_adapter, capabilities, rounded_tables, past):
    _low_precision(make_adapter, capabilities, rounded_tables, "float16", past)


@pytest.mark.clause("DTYPE-BFLOAT16")
@pytest.mark.parametrize("past", [0, 7])
def test_bfloat16(make_adapter, capabilities, rounded_tables, past):
    _low_precision(make_adapter, capabilities, rounded_tables, "bfloat16", past)


# What h and the logits come back as, per claimed dtype (the adapter protocol, api/adapter.py
# Adapter: float16 outputs are float16 arrays; numpy has no bfloat16, so a bfloat16 adapter hands
# back float32 arrays holding its bfloat16 values, exactly)
OUTPUT_DTYPES = {"float32": "float32", "float16": "float16", "bfloat16": "float32"}


@pytest.mark.clause("DTYPE-OUTPUT")
@pytest.mark.parametrize("dtype", list(OUTPUT_DTYPES))
def test_output_dtype(make_adapter, capabilities, dtype):
    """h (at past_length 0 and with a cache) and the logits come back as OUTPUT_DTYPES[dtype]
    arrays: a float32 model whose head returns float64, or a float16 model that widens h, answers
    in a dtype the caller did not ask for (twice the memory, and later ops silently run in it).
    One adapter per dtype answers the three calls; the line lists every wrong one."""
    adapter = make_adapter(dtype=dtype)
    ids = np.array([[0, 255, gpt2.N_VOCAB - 1]])
    calls = [("h", describe_call("embed", ids, 0, dtype=dtype), lambda: adapter.embed(ids, 0))]
    if capabilities.kv_cache:
        calls.append(("h", describe_call("embed", ids, 5, dtype=dtype), lambda: adapter.embed(ids, 5)))
    if capabilities.tied_head:
        h = round_to_dtype(np.random.default_rng(12).standard_normal((1, 2, D), dtype=np.float32), dtype)
        h_in = h.astype(np.float16) if dtype == "float16" else h
        call = describe_call("logits", h_final=f"{h_in.dtype.name}[1, 2, 768]", dtype=dtype)
        calls.append(("logits", call, lambda: adapter.logits(h_in)))
    want = OUTPUT_DTYPES[dtype]
    carrier = ", the float32 carrier of its bfloat16 values" if dtype == "bfloat16" else ""
    wrong = []
    for what, call, answer in calls:
        got = as_array(answer(), call).dtype.name
        if got != want:
            wrong.append(f"{what}.dtype={got}, but a {dtype} adapter returns {want}{carrier} [{call}]")
    if wrong:
        raise AssertionError("; ".join(wrong))
