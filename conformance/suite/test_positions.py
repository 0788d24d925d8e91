"""POSITIONS: p_t = past_length + t. Each clause relates the implementation's answers with a
cache offset to its own full forward from past_length 0 (whose values LOOKUP-EXACT judges):
together they pin h at every offset, while a value defect that is the same with and without
a cache fails LOOKUP-EXACT alone. Positions stay below 1023 here (strategies
RELATION_MAX_POSITION): the last position is BOUNDS-LAST-POSITION's.

past_length comes in every valid form real code passes: a Python int, a numpy integer (np.int64
from shape arithmetic, np.int32) and a 0-d integer array; each must act exactly as the int.
"""

import itertools

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpt2_conformance.api import gpt2
from gpt2_conformance.runtime.assertions import as_array, assert_bitwise_equal, assert_shape, describe_call
from gpt2_conformance.runtime.strategies import (
    RELATION_MAX_POSITION,
    chunk_splits,
    embed_inputs,
    in_layout,
    suite_settings,
)

LAST = RELATION_MAX_POSITION  # the highest position these clauses use
D = gpt2.N_EMBD_SMALL

PAST_LENGTH_FORMS = {
    "numpy.int64": np.int64,
    "numpy.int32": np.int32,
    "numpy.intp": np.intp,
    "0-d int64 array": lambda k: np.array(k, np.int64),
    "0-d int32 array": lambda k: np.array(k, np.int32),
}


def _prefixed(ids: np.ndarray, past: int, seed: int = 12) -> np.ndarray:
    """ids after `past` other tokens: the full sequence a cache of length past has seen."""
    prefix = np.random.default_rng(seed).integers(0, gpt2.N_VOCAB, (ids.shape[0], past))
    return np.concatenate([prefix, np.asarray(ids, np.int64)], axis=1)


@pytest.mark.clause("POSITIONS-OFFSET")
@suite_settings()
@given(inputs=embed_inputs(max_batch=1, cached=True, max_position=LAST))
def test_offset_positions(adapter, inputs):
    """With past_length k, token t is embedded as position k + t: the cached call equals rows
    k.. of the full forward of the whole sequence from past_length 0, never rows 0.."""
    ids, past = inputs
    full_ids = _prefixed(ids, past)
    full = assert_shape(adapter.embed(full_ids, 0), full_ids.shape + (D,), describe_call("embed", full_ids, 0), "h")
    assert_bitwise_equal(
        adapter.embed(ids, past),
        full[:, past:].copy(),
        describe_call("embed", ids, past) + f" vs rows {past}.. of the full forward",
        note=f"position {past} + t",
    )


@pytest.mark.clause("POSITIONS-OFFSET")
@pytest.mark.parametrize("form", list(PAST_LENGTH_FORMS))
@pytest.mark.parametrize("past", [1, 517, LAST])
def test_past_length_forms(adapter, form, past):
    """A numpy integer or 0-d array past_length acts exactly as the same Python int."""
    ids = np.random.default_rng(past).integers(0, gpt2.N_VOCAB, (2, 1))
    as_int = assert_shape(adapter.embed(ids, past), ids.shape + (D,), describe_call("embed", ids, past), "h")
    value = PAST_LENGTH_FORMS[form](past)
    assert_bitwise_equal(
        adapter.embed(ids, value),
        as_int.copy(),
        describe_call("embed", ids, value) + f" vs past_length={past} (int)",
        note=f"past_length as {form}",
    )


@pytest.mark.clause("POSITIONS-DECODE")
@pytest.mark.parametrize("prefill,steps", [(0, 12), (1000, LAST - 999)])
@pytest.mark.parametrize("layout", ["C", "column-view"])
def test_token_by_token_decode(adapter, prefill, steps, layout):
    """Prefill, then one token per step with past_length = t: row t of the full forward. The
    step's ids are all_ids[:, t:t+1], a view, as a decode loop slices them."""
    ids = np.random.default_rng(6).integers(0, gpt2.N_VOCAB, (2, prefill + steps))
    full = assert_shape(adapter.embed(ids, 0), ids.shape + (D,), describe_call("embed", ids, 0), "h")
    if prefill:
        assert_bitwise_equal(
            adapter.embed(ids[:, :prefill], 0),
            full[:, :prefill].copy(),
            describe_call("embed", ids[:, :prefill], 0) + " prefill",
        )
    viewed = in_layout(ids, layout)
    for t in range(prefill, prefill + steps):
        step_ids = viewed[:, t : t + 1]
        assert_bitwise_equal(
            adapter.embed(step_ids, t),
            full[:, t : t + 1].copy(),
            describe_call("embed", step_ids, t) + f" decode step vs full forward row {t}",
        )


@pytest.mark.clause("POSITIONS-CHUNKED")
@suite_settings()
@given(data=st.data(), seq_len=st.sampled_from([2, 7, 64, LAST + 1]))
def test_chunked_prefill(adapter, data, seq_len):
    """Any split into chunks, each embedded at past_length = its start, gives the full rows."""
    ids = np.random.default_rng(seq_len).integers(0, gpt2.N_VOCAB, (1, seq_len))
    splits = data.draw(chunk_splits(seq_len), label="splits")
    full = assert_shape(adapter.embed(ids, 0), ids.shape + (D,), describe_call("embed", ids, 0), "h")
    bounds = [0, *splits, seq_len]
    for start, stop in itertools.pairwise(bounds):
        chunk = adapter.embed(ids[:, start:stop], start)
        assert_bitwise_equal(
            chunk,
            full[:, start:stop].copy(),
            describe_call("embed", ids[:, start:stop], start) + f" chunk {start}:{stop} of splits {splits}",
        )


@pytest.mark.clause("POSITIONS-BATCH-SHARED")
@pytest.mark.parametrize("batch", [4, 64])
@pytest.mark.parametrize("past", [1, 64, 300])  # the offsets' reach is POSITIONS-OFFSET's
def test_past_length_shared_by_batch(adapter, batch, past):
    """Every batch row uses positions past_length + t: B rows of the same token give B times the
    h of that row embedded alone at the same past_length (one token id, so that only positions
    can tell the rows apart)."""
    token = int(np.random.default_rng(past).integers(0, gpt2.N_VOCAB))
    ids = np.full((batch, 3), token)
    call = describe_call("embed", ids, past)
    h = as_array(adapter.embed(ids, past), call)
    alone = as_array(adapter.embed(ids[:1], past), describe_call("embed", ids[:1], past))  # its shape is SHAPE-H's
    assert_bitwise_equal(
        h,
        np.repeat(alone, batch, axis=0),
        call + " vs its first row embedded alone",
        note="the same positions in every row",
    )
