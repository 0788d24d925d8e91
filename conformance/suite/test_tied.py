"""TIED: logits = h_final @ wte^T through the same wte (0 new parameters): within the
derived float32 bound, sharing storage, with both gradient roles and no output bias."""

import numpy as np
import pytest

from conformance import gpt2, oracle
from conformance.assertions import assert_bitwise_equal, assert_within, describe_call

D = gpt2.N_EMBD_SMALL


def _h(batch, seq_len, seed=9):
    """Stand-in for the final LayerNorm's output: unit-scale values."""
    return np.random.default_rng(seed).standard_normal((batch, seq_len, D), dtype=np.float32)


@pytest.mark.clause("TIED-LOGITS")
@pytest.mark.parametrize("batch,seq_len", [(1, 1), (2, 6)])
def test_tied_logits(adapter, tables, batch, seq_len):
    """logits == h_final @ wte^T within gamma_d(float32) * |h| @ |wte|^T."""
    h = _h(batch, seq_len)
    expected, bound = oracle.tied_logits(h, tables[0])
    assert_within(adapter.logits(h), expected, bound, describe_call("logits", h_final=f"float32{list(h.shape)}"),
                  rule="gamma_768(float32) bound")


@pytest.mark.clause("TIED-STORAGE")
@pytest.mark.parametrize("row", [0, 12345, gpt2.N_VOCAB - 1])
def test_head_shares_wte_storage(make_adapter, tables, row):
    """Write wte[row] in place; logit column `row` must follow (no copy held by the head)."""
    adapter = make_adapter()
    new_row = np.random.default_rng(row).standard_normal(D, dtype=np.float32)
    adapter.assign_wte_row(row, new_row)
    wte = tables[0].copy()
    wte[row] = new_row
    assert_bitwise_equal(np.asarray(adapter.tables()[0][row]), new_row, f"tables() after assign_wte_row({row})", "wte_row")
    h = _h(1, 3)
    expected, bound = oracle.tied_logits(h, wte)
    assert_within(np.asarray(adapter.logits(h))[..., row : row + 1], expected[..., row : row + 1],
                  bound[..., row : row + 1], describe_call("logits", h_final="float32[1, 3, 768]") +
                  f" after assign_wte_row({row})", what=f"logits[..., {row}]", rule="the head must read the new row")


@pytest.mark.clause("TIED-GRAD")
@pytest.mark.parametrize("roles", ["gather", "both"])
def test_gradient_roles(adapter, tables, roles):
    """dL/dwte = scatter(G_h + G_l @ wte, X) + G_l^T h; dL/dwpe = batch sum at positions."""
    rng = np.random.default_rng(10)
    ids, past = np.array([[3, 50256, 3, 17], [17, 0, 9, 3]]), 5
    cot_h = rng.standard_normal(ids.shape + (D,), dtype=np.float32)
    cot_logits = rng.standard_normal(ids.shape + (gpt2.N_VOCAB,), dtype=np.float32) * np.float32(0.01)
    if roles == "gather":
        cot_logits[:] = 0
    else:
        cot_h[:] = 0
    d_wte, d_wpe, b_wte, b_wpe = oracle.gradients(*tables, ids, past, cot_h, cot_logits)
    got_wte, got_wpe = adapter.gradients(ids, past, cot_h, cot_logits)
    call = describe_call("gradients", ids, past, cotangents="h only" if roles == "gather" else "logits only")
    assert_within(got_wte, d_wte, b_wte, call, "dwte", rule="gather" + (" + projection" if roles == "both" else "") + " role")
    assert_within(got_wpe, d_wpe, b_wpe, call, "dwpe", rule="batch sum at each position")


@pytest.mark.clause("TIED-NO-BIAS")
def test_no_output_bias(adapter):
    """logits(0) is exactly 0."""
    h = np.zeros((1, 2, D), np.float32)
    assert_bitwise_equal(adapter.logits(h), np.zeros((1, 2, gpt2.N_VOCAB), np.float32),
                         describe_call("logits", h_final="zeros[1, 2, 768]"), "logits", note="no bias")
