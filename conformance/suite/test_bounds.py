"""BOUNDS: positions 0..1023 are valid, a position >= 1024 or a token id outside
[0, 50257) raises a clear error (never a clamp, wrap, zero row or NaN), and so do a bad
past_length, non-integer ids and a wrong rank. After an error the adapter must answer as it did
before (a relation: an implementation whose values are wrong but raises correctly passes here)."""

import numpy as np
import pytest
from hypothesis import given

from gpt2_conformance import spec
from gpt2_conformance.api import gpt2
from gpt2_conformance.api.adapter import AdapterConfig
from gpt2_conformance.runtime.assertions import (
    as_array,
    assert_bitwise_equal,
    assert_moves_exactly_at,
    assert_raises,
    assert_shape,
    changed_row,
    describe_call,
)
from gpt2_conformance.runtime.hooks import skip_unless_buildable, skip_unless_claimed
from gpt2_conformance.runtime.observe import recorder
from gpt2_conformance.runtime.strategies import ids_with_one_bad, out_of_range_positions, suite_settings

PROBE = np.array([[0, gpt2.N_VOCAB - 1]])  # a valid call, asked before and after each error


def _answer_before(adapter):
    return assert_shape(
        adapter.embed(PROBE, 0), PROBE.shape + (gpt2.N_EMBD_SMALL,), describe_call("embed", PROBE, 0), "h"
    ).copy(order="C")


def _still_works(adapter, before, why):
    """After raising, the adapter answers a valid call as it did before (no poisoned state, as
    after a CUDA device-side assert). Whether that answer is right is LOOKUP-EXACT's question,
    and an implementation that answers the same call differently each time (dropout left on)
    is LOOKUP-NO-DROPOUT's: "as before" is judged only where two answers after the error agree."""
    call = describe_call("embed", PROBE, 0) + f" after {why}"
    after = np.ascontiguousarray(as_array(adapter.embed(PROBE, 0), call))  # any layout is an answer
    if (
        after.shape == before.shape
        and after.dtype == before.dtype
        and not np.array_equal(after.view(np.uint8), before.view(np.uint8))
    ):
        again = np.ascontiguousarray(as_array(adapter.embed(PROBE, 0), call))
        if not np.array_equal(again.view(np.uint8), after.view(np.uint8)):
            return  # not deterministic: no answer to compare with (LOOKUP-NO-DROPOUT says so)
    assert_bitwise_equal(after, before, call, note="the same call's answer before the error")


@pytest.fixture(scope="module")
def last_row_changed(adapter_factory, capabilities, device, tables):
    """An adapter with the suite's tables but wpe[1023] moved (assertions.changed_row)."""
    skip_unless_buildable(capabilities, gpt2.N_EMBD_SMALL, "float32")
    instance = adapter_factory(AdapterConfig(n_embd=gpt2.N_EMBD_SMALL, dtype="float32", device=device))
    instance.load_tables(tables[0], changed_row(tables[1], gpt2.N_CTX - 1, seed=13))
    return instance


@pytest.mark.clause("BOUNDS-LAST-POSITION")
@pytest.mark.parametrize("past,seq_len", [(0, gpt2.N_CTX), (gpt2.N_CTX - 1, 1), (1000, 24)])
def test_last_position_valid(adapter, capabilities, last_row_changed, past, seq_len):
    """Positions up to 1023 are valid (T = 1024 from 0; T = 1 at past_length 1023) and read
    wpe[1023]: changing that row moves h exactly at the last position."""
    if past:
        skip_unless_claimed(capabilities, "kv_cache")
    ids = np.random.default_rng(8).integers(0, gpt2.N_VOCAB, (1, seq_len))
    call = describe_call("embed", ids, past)
    before = as_array(adapter.embed(ids, past), call)
    where = np.zeros(ids.shape, bool)
    where[:, -1] = True
    assert_moves_exactly_at(before, last_row_changed.embed(ids, past), where, call, "wpe[1023] changed")


@pytest.mark.clause("BOUNDS-POSITION")
@suite_settings()
@given(case=out_of_range_positions(cached=False))
def test_too_long_raises(adapter, case):
    """T > 1024 raises."""
    seq_len, past = case
    ids = np.zeros((1, seq_len), np.int64)
    before = _answer_before(adapter)
    assert_raises(
        lambda: adapter.embed(ids, past), describe_call("embed", ids, past), f"position {past + seq_len - 1} >= 1024"
    )
    _still_works(adapter, before, "the error")


@pytest.mark.clause("BOUNDS-POSITION")
@suite_settings()
@given(case=out_of_range_positions(cached=True))
def test_cache_overflow_raises(adapter, capabilities, case):
    """past_length + T > 1024 raises (a cache that has run past the table)."""
    skip_unless_claimed(capabilities, "kv_cache")
    seq_len, past = case
    ids = np.ones((2, seq_len), np.int64)
    before = _answer_before(adapter)
    assert_raises(
        lambda: adapter.embed(ids, past), describe_call("embed", ids, past), f"position {past + seq_len - 1} >= 1024"
    )
    _still_works(adapter, before, "the error")


@pytest.mark.clause("BOUNDS-TOKEN")
@suite_settings(max_examples=40)
@given(case=ids_with_one_bad(np.int64))
def test_bad_token_id_raises_int64(adapter, case):
    """An id < 0 or >= 50257 anywhere raises."""
    ids, bad = case
    before = _answer_before(adapter)
    assert_raises(lambda: adapter.embed(ids, 0), describe_call("embed", ids, 0), f"token id {bad}")
    _still_works(adapter, before, "the error")


@pytest.mark.clause("BOUNDS-TOKEN")
@suite_settings()
@given(case=ids_with_one_bad(np.int32))
def test_bad_token_id_raises_int32(adapter, case):
    ids, bad = case
    assert_raises(lambda: adapter.embed(ids, 0), describe_call("embed", ids, 0), f"token id {bad}")


def _sentinel_cases():
    for name, values, _ in spec.SENTINEL_IDS:
        for dtype in (np.int64, np.int32):
            info = np.iinfo(dtype)
            if all(info.min <= v <= info.max for v in values):
                for step in ("prefill", "cached decode"):
                    yield pytest.param(
                        values, dtype, step, id=f"{name.replace(' ', '')}-{dtype.__name__}-{step.replace(' ', '-')}"
                    )


DECODE_PAST = 37  # the cached decode step's past_length


@pytest.mark.clause("BOUNDS-TOKEN")
@pytest.mark.parametrize("values,dtype,step", list(_sentinel_cases()))
def test_sentinel_ids_raise(adapter, capabilities, request, tables, values, dtype, step):
    """The markers real pipelines put into id tensors (spec.SENTINEL_IDS: -100, -1, the padded
    vocabulary 50257..50303, the int32 extremes, int64 ids that wrap to valid int32 ids) raise,
    alone and inside a valid batch: none of them is a row of wte. What the first call (the first
    value, alone) did instead is recorded (runtime/observe.py)."""
    past = 0
    if step != "prefill":
        skip_unless_claimed(capabilities, "kv_cache")
        past = DECODE_PAST
    valid = np.random.default_rng(9).integers(0, gpt2.N_VOCAB, (3, 1 if past else 5)).astype(dtype)
    before = _answer_before(adapter)
    for value in values:
        alone = np.array([[value]], dtype)
        in_batch = valid.copy()
        in_batch[1, -1] = value
        for ids in (alone, in_batch):
            assert_raises(
                lambda ids=ids: adapter.embed(ids, past),
                describe_call("embed", ids, past),
                f"token id {value} is a marker, not a row of wte [0, 50257)",
                observe=recorder(request.node, ids, past, tables),
            )
    _still_works(adapter, before, "the sentinel ids")


@pytest.mark.clause("BOUNDS-PAST-LENGTH")
@pytest.mark.parametrize("past", [-1, -gpt2.N_CTX, 1.5])
def test_bad_past_length_raises(adapter, request, tables, past):
    """past_length must be >= 0 (a negative one starts before wpe's first row) and whole (no
    position lies between two rows). An integral float or a bool is left open: it may be refused or
    read as the integer it equals, which reads the right rows."""
    ids = np.zeros((1, 3), np.int64)
    assert_raises(
        lambda: adapter.embed(ids, past),
        describe_call("embed", ids, past),
        "past_length must be an integer >= 0",
        observe=recorder(request.node, ids, past, tables) if isinstance(past, int) else None,
    )


@pytest.mark.clause("BOUNDS-INPUT")
@pytest.mark.parametrize(
    "ids",
    [
        np.zeros((1, 3), np.float32),
        np.zeros((1, 3), np.float64),
        np.zeros((1, 3), bool),
        np.zeros(3, np.int64),
        np.zeros((1, 1, 3), np.int64),
    ],
    ids=["float32", "float64", "bool", "rank1", "rank3"],
)
def test_malformed_ids_raise(adapter, request, tables, ids):
    """ids are an integer [B, T] array: float/bool dtypes and other ranks raise."""
    assert_raises(
        lambda: adapter.embed(ids, 0),
        describe_call("embed", ids, 0),
        "ids must be integer [B, T]",
        observe=recorder(request.node, ids, 0, tables) if ids.ndim == 2 else None,
    )


@pytest.mark.clause("BOUNDS-MESSAGE")
@pytest.mark.parametrize("case", ["position", "position cached", "token-high", "token-negative"])
def test_error_names_value_and_rule(adapter, capabilities, request, tables, case):
    """The error names the offending value and the table size, in any words and of any class:
    GPT-2's own tf.gather says 'indices[0,1] = 50257 is not in [0, 50257)' (InvalidArgumentError),
    torch's CPU gather 'index out of range in self' (no value: it fails here). The cached case
    (T = 30 at past_length 1000: positions 1024..1029 are out) is one whose check a framework's
    own error cannot stand in for: a slice of wpe that comes back short fails the sum with a
    broadcast error naming shapes, not the position."""
    past = 0
    if case == "position":
        ids, value, limit = np.zeros((1, gpt2.N_CTX + 1), np.int64), gpt2.N_CTX, gpt2.N_CTX
    elif case == "position cached":
        skip_unless_claimed(capabilities, "kv_cache")
        past, ids, value, limit = 1000, np.zeros((1, 30), np.int64), gpt2.N_CTX, gpt2.N_CTX
    else:
        value = gpt2.N_VOCAB if case == "token-high" else -1
        ids, limit = np.array([[5, value, 7]]), gpt2.N_VOCAB
    call = describe_call("embed", ids, past)
    exc = assert_raises(
        lambda: adapter.embed(ids, past),
        call,
        f"{case} out of range",
        observe=recorder(request.node, ids, past, tables),
    )
    text = str(exc)
    if str(value) not in text or str(limit) not in text:
        quoted = (text.strip().splitlines() or [""])[0][:200]  # frameworks put whole stack traces in messages
        raise AssertionError(
            f"raised {type(exc).__name__}({quoted!r}), but its message should name the value {value} and "
            f"the table size {limit} [{call}]"
        )
