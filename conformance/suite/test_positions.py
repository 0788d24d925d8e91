"""POSITIONS: p_t = past_length + t. Each clause relates the implementation's answers with a
cache offset to its own full forward from past_length 0 (whose values LOOKUP-EXACT judges):
together they pin h at every offset, while a value defect that is the same with and without
a cache fails LOOKUP-EXACT alone. OFFSET, DECODE and CHUNKED always reach both sides of 127,
255, 511 and 1023 (WRAPS): a cached position held in int8, uint8 or a 9- or 10-bit field wraps
there, and only a relation with the full forward tells which position; their failing line names
the first wrong position. BATCH-SHARED stays below 1023 (strategies RELATION_MAX_POSITION).

past_length comes in every valid form real code passes: a Python int, a numpy integer (np.int64
from shape arithmetic, np.int32) and a 0-d integer array; each must act exactly as the int.
"""

import itertools

import numpy as np
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from gpt2_conformance.api import gpt2
from gpt2_conformance.runtime.assertions import as_array, assert_bitwise_equal, assert_shape, describe_call
from gpt2_conformance.runtime.strategies import (
    LAST_POSITION,
    RELATION_MAX_POSITION,
    chunk_splits,
    embed_inputs,
    in_layout,
    suite_settings,
)

LAST = LAST_POSITION  # the highest position OFFSET, DECODE and CHUNKED reach
D = gpt2.N_EMBD_SMALL
# where a narrow integer wraps: int8 after 127, uint8 after 255, a 9-bit field after 511, a 10-bit
# one after 1023 (the last valid position; 1024 is BOUNDS-POSITION's)
WRAPS = (127, 255, 511, LAST_POSITION)
# cached calls [past, past + T) across each wrap: (past_length, T)
ACROSS = ((120, 16), (250, 12), (505, 12), (LAST_POSITION - 7, 8))
DECODE_WINDOW = 8  # decode steps on each side of every wrap, the last at past_length 1023

PAST_LENGTH_FORMS = {
    "numpy.int64": np.int64,
    "numpy.int32": np.int32,
    "numpy.intp": np.intp,
    "0-d int64 array": lambda k: np.array(k, np.int64),
    "0-d int32 array": lambda k: np.array(k, np.int32),
}


def first_wrong_position(got, want: np.ndarray, first: int) -> str:
    """' (first wrong position p = past_length k + t)' for rows [B, T, d] whose positions start at
    `first`, where got and want differ in some bit; '' where the shapes differ (SHAPE-H's)."""
    got = np.asarray(got)
    if got.shape != want.shape or got.ndim != 3 or got.dtype != want.dtype:
        return ""
    bits = np.dtype(f"u{want.dtype.itemsize}")
    differ = (np.ascontiguousarray(got).view(bits) != np.ascontiguousarray(want).view(bits)).any(axis=(0, 2))
    if not differ.any():
        return ""
    t = int(np.argmax(differ))
    return f"first wrong position {first + t} = past_length {first} + t {t}"


def assert_rows(got, want: np.ndarray, first: int, call: str, note: str = "") -> None:
    """assert_bitwise_equal, its line naming the first wrong position."""
    where = first_wrong_position(got, want, first)
    assert_bitwise_equal(got, want, call, note="; ".join(filter(None, [where, note])))


def _prefixed(ids: np.ndarray, past: int, seed: int = 12) -> np.ndarray:
    """ids after `past` other tokens: the full sequence a cache of length past has seen."""
    prefix = np.random.default_rng(seed).integers(0, gpt2.N_VOCAB, (ids.shape[0], past))
    return np.concatenate([prefix, np.asarray(ids, np.int64)], axis=1)


def _across(past: int, seq_len: int) -> tuple[np.ndarray, int]:
    return np.random.default_rng(past).integers(0, gpt2.N_VOCAB, (1, seq_len)), past


@pytest.mark.clause("POSITIONS-OFFSET")
@suite_settings()
@given(inputs=embed_inputs(max_batch=1, cached=True, max_position=LAST))
@example(inputs=_across(*ACROSS[0]))
@example(inputs=_across(*ACROSS[1]))
@example(inputs=_across(*ACROSS[2]))
@example(inputs=_across(*ACROSS[3]))
@example(inputs=_across(LAST_POSITION, 1))
def test_offset_positions(adapter, inputs):
    """With past_length k, token t is embedded as position k + t: the cached call equals rows
    k.. of the full forward of the whole sequence from past_length 0, never rows 0.. The fixed
    cases cross each of WRAPS; the last is T = 1 at past_length 1023."""
    ids, past = inputs
    full_ids = _prefixed(ids, past)
    full = assert_shape(adapter.embed(full_ids, 0), full_ids.shape + (D,), describe_call("embed", full_ids, 0), "h")
    assert_rows(
        adapter.embed(ids, past),
        full[:, past:].copy(),
        past,
        describe_call("embed", ids, past) + f" vs rows {past}.. of the full forward",
    )


@pytest.mark.clause("POSITIONS-OFFSET")
@pytest.mark.parametrize("form", list(PAST_LENGTH_FORMS))
@pytest.mark.parametrize("past", [1, 517, RELATION_MAX_POSITION])
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


@pytest.fixture(scope="module")
def decode_ids():
    return np.random.default_rng(6).integers(0, gpt2.N_VOCAB, (2, LAST_POSITION + 1))


DECODE_CASES = [(0, 12)] + [(w + 1 - DECODE_WINDOW, 2 * DECODE_WINDOW) for w in WRAPS[:-1]] + [(1000, LAST - 999)]


@pytest.mark.clause("POSITIONS-DECODE")
@pytest.mark.parametrize("prefill,steps", DECODE_CASES)
@pytest.mark.parametrize("layout", ["C", "column-view"])
def test_token_by_token_decode(adapter, decode_ids, prefill, steps, layout):
    """Prefill, then one token per step with past_length = t: row t of the full forward. The
    step's ids are all_ids[:, t:t+1], a view, as a decode loop slices them. The steps cross each
    of WRAPS, the last at past_length 1023."""
    ids = decode_ids[:, : prefill + steps]
    full = assert_shape(adapter.embed(ids, 0), ids.shape + (D,), describe_call("embed", ids, 0), "h")
    if prefill:
        assert_rows(
            adapter.embed(ids[:, :prefill], 0),
            full[:, :prefill].copy(),
            0,
            describe_call("embed", ids[:, :prefill], 0) + " prefill",
        )
    viewed = in_layout(ids, layout)
    for t in range(prefill, prefill + steps):
        step_ids = viewed[:, t : t + 1]
        assert_rows(
            adapter.embed(step_ids, t),
            full[:, t : t + 1].copy(),
            t,
            describe_call("embed", step_ids, t) + f" decode step vs full forward row {t}",
        )


chunkings = st.sampled_from([2, 7, 64, 300, LAST + 1]).flatmap(lambda n: st.tuples(st.just(n), chunk_splits(n)))


@pytest.mark.clause("POSITIONS-CHUNKED")
@suite_settings()
@given(case=chunkings)
@example(case=(LAST + 1, [120, 128, 250, 256, 505, 512, 1016, LAST_POSITION]))
@example(case=(LAST + 1, [127, 255, 511, 1023]))
@example(case=(LAST + 1, [135, 261, 516]))
def test_chunked_prefill(adapter, case):
    """Any split into chunks, each embedded at past_length = its start, gives the full rows. The
    fixed cases start chunks on both sides of each of WRAPS (a last chunk of T = 1 at 1023)."""
    seq_len, splits = case
    ids = np.random.default_rng(seq_len).integers(0, gpt2.N_VOCAB, (1, seq_len))
    full = assert_shape(adapter.embed(ids, 0), ids.shape + (D,), describe_call("embed", ids, 0), "h")
    bounds = [0, *splits, seq_len]
    for start, stop in itertools.pairwise(bounds):
        assert_rows(
            adapter.embed(ids[:, start:stop], start),
            full[:, start:stop].copy(),
            start,
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
