"""TIED: logits = h_final @ wte^T through the same wte (0 new parameters).

Two questions are kept apart. Structure (TIED-LOGITS, TIED-STORAGE, TIED-NO-BIAS): the head is
wte itself, with no bias and no scale, judged within a bound loose enough for a matmul whose
inputs were rounded to bfloat16 or TF32 (oracle.STRUCTURAL_INPUTS) and still tight enough to
tell another matrix, a scale or a bias apart. Accuracy (TIED-LOGITS-FLOAT32): within the float32
bound, a clause a GPU run in TF32 can waive, whose message names the precision the errors fit.
"""

import numpy as np
import pytest

from gpt2_conformance.api import gpt2
from gpt2_conformance.runtime import oracle
from gpt2_conformance.runtime.assertions import as_array, as_logits, assert_bitwise_equal, assert_within, describe_call
from gpt2_conformance.runtime.tables import final_h

D = gpt2.N_EMBD_SMALL
STRUCTURE = f"the head is wte: {oracle.STRUCTURAL_INPUTS}-input bound"


def _h(batch, seq_len, seed=9):
    return final_h(batch, seq_len, seed)


@pytest.mark.clause("TIED-LOGITS")
@pytest.mark.parametrize("batch,seq_len", [(1, 1), (2, 6)])
def test_tied_logits(adapter, tables, batch, seq_len):
    """logits == h_final @ wte^T within the bound of bfloat16-rounded inputs: the head is wte."""
    h = _h(batch, seq_len)
    call = describe_call("logits", h_final=f"float32{list(h.shape)}")
    expected, bound = oracle.tied_logits(h, tables[0], inputs=oracle.STRUCTURAL_INPUTS)
    assert_within(as_logits(adapter.logits(h), h, call), expected, bound, call, rule=STRUCTURE)


@pytest.mark.clause("TIED-LOGITS-FLOAT32")
@pytest.mark.parametrize("batch,seq_len", [(1, 1), (2, 6)])
def test_tied_logits_float32(adapter, tables, batch, seq_len):
    """logits == h_final @ wte^T within gamma_d(float32) * |h| @ |wte|^T."""
    h = _h(batch, seq_len)
    call = describe_call("logits", h_final=f"float32{list(h.shape)}")
    logits = as_logits(adapter.logits(h), h, call)
    expected, bound = oracle.tied_logits(h, tables[0])
    try:
        assert_within(logits, expected, bound, call, rule="gamma_768(float32) bound")
    except AssertionError as exc:  # which input precision the errors fit, before the call that ends the line
        text, _, call_part = str(exc).rpartition(" [")
        raise AssertionError(f"{text}{oracle.likely_head_precision(h, tables[0], logits)} [{call_part}") from None


@pytest.mark.clause("TIED-STORAGE")
@pytest.mark.parametrize("row", [0, 12345, gpt2.N_VOCAB - 1])
def test_head_shares_wte_storage(make_adapter, tables, row):
    """Write wte[row] in place; logit column `row` must move by h @ (new - old) (the head reads
    the new row, it holds no copy). The change is sign(h[0, 0]): logit [0, 0, row] moves by
    |h[0, 0]|_1, about 600, against a structural bound near 5."""
    adapter = make_adapter()
    h = _h(1, 3)
    call = describe_call("logits", h_final="float32[1, 3, 768]")
    before = as_logits(adapter.logits(h), h, call)[..., row].astype(np.float64)
    old = tables[0][row]
    new_row = (old + np.sign(h[0, 0])).astype(np.float32)
    adapter.assign_wte_row(row, new_row)
    assert_bitwise_equal(
        np.asarray(adapter.tables()[0][row]), new_row, f"tables() after assign_wte_row({row})", "wte_row"
    )
    after = as_logits(adapter.logits(h), h, call + f" after assign_wte_row({row})")[..., row].astype(np.float64)
    h64 = h.astype(np.float64)
    expected = h64 @ (new_row.astype(np.float64) - old)
    magnitude = np.abs(h64) @ (np.abs(new_row.astype(np.float64)) + np.abs(old))
    bound = oracle.rounded_inputs_factor(D, oracle.STRUCTURAL_INPUTS) * magnitude
    assert_within(
        after - before,
        expected,
        bound,
        call + f" after assign_wte_row({row}) minus before",
        what=f"change of logits[..., {row}]",
        rule="the head must read the new row",
    )


@pytest.mark.clause("TIED-GRAD")
@pytest.mark.parametrize("roles", ["gather", "both"])
@pytest.mark.parametrize("past", [0, 5])
def test_gradient_roles(adapter, capabilities, tables, roles, past):
    """dL/dwte = scatter(G_h + G_l @ wte, X) + G_l^T h; dL/dwpe = batch sum at positions. h is the
    implementation's own (its values are LOOKUP-EXACT's to judge): this checks the two roles."""
    from gpt2_conformance.runtime.hooks import skip_unless_claimed

    if past:
        skip_unless_claimed(capabilities, "kv_cache")
    rng = np.random.default_rng(10)
    ids = np.array([[3, 50256, 3, 17], [17, 0, 9, 3]])
    cot_h = rng.standard_normal(ids.shape + (D,), dtype=np.float32)
    cot_logits = rng.standard_normal(ids.shape + (gpt2.N_VOCAB,), dtype=np.float32) * np.float32(0.01)
    if roles == "gather":
        cot_logits[:] = 0
    else:
        cot_h[:] = 0
    h = as_array(adapter.embed(ids, past), describe_call("embed", ids, past)) if roles == "both" else None
    if h is not None and h.shape != ids.shape + (D,):
        h = None  # an h of another shape is SHAPE-H's to judge: the roles are checked with the formula's h
    got_wte, got_wpe = adapter.gradients(ids, past, cot_h, cot_logits)
    if oracle.gradients_within(*tables, ids, past, cot_h, cot_logits, got_wte, got_wpe, h=h):
        return  # within the bounds; the dense float64 oracle below is for the message only
    d_wte, d_wpe, b_wte, b_wpe = oracle.gradients(*tables, ids, past, cot_h, cot_logits, h=h)
    call = describe_call("gradients", ids, past, cotangents="h only" if roles == "gather" else "logits only")
    assert_within(
        got_wte, d_wte, b_wte, call, "dwte", rule="gather" + (" + projection" if roles == "both" else "") + " role"
    )
    assert_within(got_wpe, d_wpe, b_wpe, call, "dwpe", rule="batch sum at each position")


@pytest.mark.clause("TIED-NO-BIAS")
def test_no_output_bias(adapter):
    """logits(0) is exactly 0."""
    h = np.zeros((1, 2, D), np.float32)
    call = describe_call("logits", h_final="zeros[1, 2, 768]")
    assert_bitwise_equal(
        as_logits(adapter.logits(h), h, call),
        np.zeros((1, 2, gpt2.N_VOCAB), np.float32),
        call,
        "logits",
        note="no bias",
    )
