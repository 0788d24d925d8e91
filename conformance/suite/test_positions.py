"""POSITIONS: p_t = past_length + t; decoding with the cache offset, and any chunked prefill,
equal the full forward; past_length is shared by the batch."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from conformance import gpt2, oracle
from conformance.assertions import assert_bitwise_equal, describe_call
from conformance.strategies import chunk_splits, embed_inputs, suite_settings


@pytest.mark.clause("POSITIONS-OFFSET")
@suite_settings()
@given(inputs=embed_inputs(cached=True))
def test_offset_positions(adapter, tables, inputs):
    """With past_length k, token t uses wpe[k + t], never wpe[t]."""
    ids, past = inputs
    assert_bitwise_equal(adapter.embed(ids, past), oracle.embedding(*tables, ids, past),
                         describe_call("embed", ids, past), note=f"wpe[{past} + t]")


@pytest.mark.clause("POSITIONS-DECODE")
@pytest.mark.parametrize("prefill,steps", [(0, 12), (1000, 24)])
def test_token_by_token_decode(adapter, prefill, steps):
    """Prefill, then one token per step with past_length = t: row t of the full forward."""
    rng = np.random.default_rng(6)
    ids = rng.integers(0, gpt2.N_VOCAB, (2, prefill + steps))
    full = np.asarray(adapter.embed(ids, 0))
    if prefill:
        assert_bitwise_equal(adapter.embed(ids[:, :prefill], 0), full[:, :prefill],
                             describe_call("embed", ids[:, :prefill], 0) + " prefill")
    for t in range(prefill, prefill + steps):
        step = adapter.embed(ids[:, t : t + 1], t)
        assert_bitwise_equal(step, full[:, t : t + 1], describe_call("embed", ids[:, t : t + 1], t) +
                             f" decode step vs full forward row {t}")


@pytest.mark.clause("POSITIONS-CHUNKED")
@suite_settings()
@given(data=st.data(), seq_len=st.sampled_from([2, 7, 64, gpt2.N_CTX]))
def test_chunked_prefill(adapter, data, seq_len):
    """Any split into chunks, each embedded at past_length = its start, gives the full rows."""
    ids = np.random.default_rng(seq_len).integers(0, gpt2.N_VOCAB, (2, seq_len))
    splits = data.draw(chunk_splits(seq_len), label="splits")
    full = np.asarray(adapter.embed(ids, 0))
    bounds = [0, *splits, seq_len]
    for start, stop in zip(bounds, bounds[1:]):
        chunk = adapter.embed(ids[:, start:stop], start)
        assert_bitwise_equal(chunk, full[:, start:stop], describe_call("embed", ids[:, start:stop], start) +
                             f" chunk {start}:{stop} of splits {splits}")


@pytest.mark.clause("POSITIONS-BATCH-SHARED")
@pytest.mark.parametrize("past", [1, 517, gpt2.N_CTX - 3])
def test_past_length_shared_by_batch(adapter, tables, past):
    """Every batch row uses positions past_length + t: identical rows give identical h."""
    row = np.random.default_rng(7).integers(0, gpt2.N_VOCAB, 3)
    ids = np.tile(row, (4, 1))
    h = np.asarray(adapter.embed(ids, past))
    call = describe_call("embed", ids, past)
    expected = oracle.embedding(*tables, ids, past)
    assert_bitwise_equal(h, expected, call, note="the same positions in every row")
