"""SHAPE: table shapes for the four released sizes, h [B, T, d], T = 0, parameter counts,
logits [B, T, V]."""

import numpy as np
import pytest
from hypothesis import given

from gpt2_conformance.api import gpt2
from gpt2_conformance.api.machine import zero_table
from gpt2_conformance.runtime.assertions import assert_shape, describe_call
from gpt2_conformance.runtime.hooks import skip_unless_claimed
from gpt2_conformance.runtime.strategies import embed_inputs, suite_settings

D = gpt2.N_EMBD_SMALL


@pytest.mark.clause("SHAPE-TABLES")
@pytest.mark.parametrize("size", list(gpt2.SIZES))
def test_table_shapes(make_adapter, capabilities, size):
    """wte is [50257, d] and wpe is [1024, d] for d = 768 / 1024 / 1280 / 1600."""
    n_embd = gpt2.SIZES[size]
    skip_unless_claimed(capabilities, f"size:{n_embd}")
    adapter = make_adapter(n_embd=n_embd, load=False)
    # read-only zeros that take no memory (an adapter may keep them without a copy)
    wte, wpe = zero_table((gpt2.N_VOCAB, n_embd), np.float32), zero_table((gpt2.N_CTX, n_embd), np.float32)
    call = f"load_tables then tables() at GPT-2 {size} (d={n_embd})"
    adapter.load_tables(wte, wpe)
    got_wte, got_wpe = adapter.tables()
    assert_shape(got_wte, (gpt2.N_VOCAB, n_embd), call, "wte")
    assert_shape(got_wpe, (gpt2.N_CTX, n_embd), call, "wpe")


@pytest.mark.clause("SHAPE-PARAMS")
def test_parameter_count(make_adapter):
    """Exactly wte [50257, 768] and wpe [1024, 768]: 39,383,808 parameters; the head adds 0."""
    params = make_adapter(load=False).parameters()
    shapes = sorted(tuple(int(n) for n in s) for s in params.values())
    expected = sorted([(gpt2.N_VOCAB, D), (gpt2.N_CTX, D)])
    total = sum(int(np.prod(s)) for s in shapes)
    want = sum(gpt2.parameter_count(D).values())
    if shapes != expected or total != want:
        raise AssertionError(
            f"parameters()={dict(params)} ({total:,} values), but should be exactly "
            f"wte {expected[1]} and wpe {expected[0]} ({want:,} values) [parameters() at d={D}]"
        )


@pytest.mark.clause("SHAPE-H")
@pytest.mark.parametrize("offset", ["past_length 0", "cached"])
@suite_settings()
@given(inputs=embed_inputs(max_len=64, max_past=64))
def test_h_shape(adapter, capabilities, offset, inputs):
    """embed(ids [B, T], past_length) is [B, T, d], also with a cache (an implementation that
    returns the cached tokens too gives [B, past_length + T, d]). Offsets stay small: which
    positions a cache reaches is the POSITIONS group's question; the dtype is DTYPE-OUTPUT's."""
    ids, past = inputs
    if offset == "cached":
        skip_unless_claimed(capabilities, "kv_cache")
    else:
        past = 0
    call = describe_call("embed", ids, past)
    assert_shape(adapter.embed(ids, past), ids.shape + (D,), call, "h")


@pytest.mark.clause("SHAPE-EMPTY")
@pytest.mark.parametrize("batch", [1, 3])
def test_empty_sequence(adapter, batch):
    """T = 0 gives [B, 0, d]."""
    ids = np.zeros((batch, 0), np.int64)
    call = describe_call("embed", ids, 0)
    assert_shape(adapter.embed(ids, 0), (batch, 0, D), call, "h")


@pytest.mark.clause("SHAPE-LOGITS")
@pytest.mark.parametrize("batch,seq_len", [(1, 1), (2, 5)])
def test_logits_shape(adapter, batch, seq_len):
    """logits(h_final [B, T, d]) is [B, T, 50257]."""
    h = np.random.default_rng(0).standard_normal((batch, seq_len, D), dtype=np.float32)
    call = describe_call("logits", h_final=f"float32{[batch, seq_len, D]}")
    assert_shape(adapter.logits(h), (batch, seq_len, gpt2.N_VOCAB), call, "logits")
