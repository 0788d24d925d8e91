"""LOOKUP: h[b, t] = wte[X[b, t]] + wpe[past_length + t], bit for bit in float32, with no
scaling, no extra terms, no dropout, learned positions, independent batch rows."""

import numpy as np
import pytest
from hypothesis import given

from conformance import gpt2, oracle
from conformance.assertions import assert_bitwise_equal, describe_call
from conformance.strategies import EDGE_IDS, embed_inputs, suite_settings


def _ids(rng, batch, seq_len):
    ids = rng.integers(0, gpt2.N_VOCAB, (batch, seq_len))
    ids.flat[: len(EDGE_IDS)] = EDGE_IDS[: ids.size]
    return ids


@pytest.mark.clause("LOOKUP-EXACT")
@suite_settings(max_examples=40)
@given(inputs=embed_inputs())
def test_exact_sum(adapter, tables, inputs):
    """h == wte[X] + wpe[p]: one float32 addition, so bit for bit."""
    ids, past = inputs
    expected = oracle.embedding(*tables, ids, past)
    assert_bitwise_equal(adapter.embed(ids, past), expected, describe_call("embed", ids, past),
                         note="wte[X] + wpe[past_length + t]")


@pytest.mark.clause("LOOKUP-NO-SCALE")
@pytest.mark.parametrize("zeroed", ["wpe", "wte"])
def test_no_scaling(make_adapter, tables, zeroed):
    """With one table zero, h is exactly a row of the other: no sqrt(d) or other factor.
    The rows are scaled by 64 (exact in float32) to norms near 35, so a data-dependent
    rescale such as nn.Embedding(max_norm=1) shows too."""
    wte, wpe = (t * np.float32(64) for t in tables)
    (wpe if zeroed == "wpe" else wte)[:] = 0
    adapter = make_adapter(load=False)
    adapter.load_tables(wte, wpe)
    ids, past = _ids(np.random.default_rng(1), 2, 9), 0
    expected = wte[ids] if zeroed == "wpe" else np.broadcast_to(wpe[: ids.shape[1]], ids.shape + (wpe.shape[1],))
    kept = "wte[X]" if zeroed == "wpe" else "wpe[p]"
    assert_bitwise_equal(adapter.embed(ids, past), np.ascontiguousarray(expected),
                         describe_call("embed", ids, past, tables=f"{zeroed} zeroed"), note=f"exactly {kept}")


@pytest.mark.clause("LOOKUP-NO-EXTRA")
def test_zero_tables_give_zero(make_adapter):
    """Both tables zero -> h exactly zero: no token-type embedding, bias or norm."""
    adapter = make_adapter(load=False)
    adapter.load_tables(np.zeros((gpt2.N_VOCAB, gpt2.N_EMBD_SMALL), np.float32),
                        np.zeros((gpt2.N_CTX, gpt2.N_EMBD_SMALL), np.float32))
    ids = _ids(np.random.default_rng(2), 2, 7)
    assert_bitwise_equal(adapter.embed(ids, 0), np.zeros(ids.shape + (gpt2.N_EMBD_SMALL,), np.float32),
                         describe_call("embed", ids, 0, tables="both zero"), note="nothing is added to the sum")


@pytest.mark.clause("LOOKUP-NO-DROPOUT")
def test_no_dropout(adapter, tables):
    """Inference is deterministic and equals the formula: no dropout mask, no 1/(1-p)."""
    ids = _ids(np.random.default_rng(3), 4, 64)
    call = describe_call("embed", ids, 0)
    first = adapter.embed(ids, 0)
    second = adapter.embed(ids, 0)
    assert_bitwise_equal(second, np.asarray(first), call + " called twice")
    assert_bitwise_equal(first, oracle.embedding(*tables, ids, 0), call)


@pytest.mark.clause("LOOKUP-LEARNED-POSITIONS")
@pytest.mark.parametrize("position", [0, 5, gpt2.N_CTX - 1])
def test_positions_are_table_rows(make_adapter, tables, position):
    """Changing wpe[p] changes h at position p by exactly that, and nowhere else."""
    wte, wpe = (t.copy() for t in tables)
    ids = _ids(np.random.default_rng(4), 2, 8)
    past = min(position, gpt2.N_CTX - ids.shape[1]) if position else 0
    wpe[position] = np.random.default_rng(5).standard_normal(wpe.shape[1], dtype=np.float32)
    adapter = make_adapter(load=False)
    adapter.load_tables(wte, wpe)
    call = describe_call("embed", ids, past, tables=f"wpe[{position}] replaced")
    assert_bitwise_equal(adapter.embed(ids, past), oracle.embedding(wte, wpe, ids, past), call,
                         note="h must follow the new wpe row")


@pytest.mark.clause("LOOKUP-BATCH-INDEPENDENT")
@suite_settings()
@given(inputs=embed_inputs(min_batch=2, max_batch=4, max_len=32, cached=None))
def test_batch_rows_independent(adapter, inputs):
    """Each batch row equals that sequence embedded alone."""
    ids, past = inputs
    batch = adapter.embed(ids, past)
    for b in range(ids.shape[0]):
        alone = adapter.embed(ids[b : b + 1], past)
        assert_bitwise_equal(np.asarray(batch)[b : b + 1], np.asarray(alone),
                             describe_call("embed", ids, past) + f" row {b} vs row alone")


@pytest.mark.clause("LOOKUP-ID-DTYPES")
@pytest.mark.parametrize("dtype", ["int32", "int64"])
def test_integer_id_dtypes(adapter, tables, dtype):
    """int32 and int64 ids both work, up to id 50256 (catches casts to narrower types)."""
    ids = np.array([list(EDGE_IDS), list(reversed(EDGE_IDS))], dtype=dtype)
    call = describe_call("embed", ids, 3)
    assert_bitwise_equal(adapter.embed(ids, 3), oracle.embedding(*tables, ids.astype(np.int64), 3), call)
