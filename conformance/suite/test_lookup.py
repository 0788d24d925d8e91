"""LOOKUP: h[b, t] = wte[X[b, t]] + wpe[t] at past_length 0, bit for bit in float32, with no
scaling, no extra terms, no dropout, learned positions, independent batch rows.

Only LOOKUP-EXACT compares h with the formula. The other clauses test their own property:
relations between the implementation's own answers (two calls, a row alone, int32 against
int64 ids) and, for which row is read, where h moves when one table row changes. A value defect
such as a sqrt(d) scale then fails LOOKUP-EXACT and LOOKUP-NO-SCALE, not every clause. Offsets
(past_length > 0) are the POSITIONS group's: this group runs at past_length 0, with T up to 1024
so that every position is still reached.
"""

import numpy as np
import pytest
from hypothesis import example, given

from gpt2_conformance.api import gpt2
from gpt2_conformance.api.machine import zero_table
from gpt2_conformance.runtime import oracle
from gpt2_conformance.runtime.assertions import (
    as_array,
    assert_bitwise_equal,
    assert_moves_exactly_at,
    assert_shape,
    changed_row,
    describe_call,
)
from gpt2_conformance.runtime.calls import describe_array
from gpt2_conformance.runtime.hooks import skip_unless_claimed
from gpt2_conformance.runtime.strategies import (
    EDGE_IDS,
    LAYOUTS,
    RELATION_MAX_POSITION,
    embed_inputs,
    in_layout,
    suite_settings,
)
from gpt2_conformance.runtime.tables import random_tables

D = gpt2.N_EMBD_SMALL


def _ids(rng, batch, seq_len):
    ids = rng.integers(0, gpt2.N_VOCAB, (batch, seq_len))
    ids.flat[: len(EDGE_IDS)] = EDGE_IDS[: ids.size]
    return ids


def _long(batch: int) -> tuple[np.ndarray, int]:
    return _ids(np.random.default_rng(batch), batch, gpt2.N_CTX), 0


@pytest.mark.clause("LOOKUP-EXACT")
@suite_settings(max_examples=40)
@given(inputs=embed_inputs(cached=False))
@example(inputs=_long(2))
@example(inputs=_long(3))
def test_exact_sum(adapter, tables, inputs):
    """h == wte[X] + wpe[t]: one float32 addition, so bit for bit (every position through T up
    to 1024; offsets are POSITIONS-OFFSET's, which relates them to this full forward). The fixed
    cases are the largest inputs of several rows, B = 2 and 3 at T = 1024, which an implementation
    that splits its work (threads, tiles, a batched kernel) splits by rows: the draws reach them
    only by chance (mutation testing of the reference found its row-split path unexercised,
    reports/mutation-testing.md)."""
    ids, past = inputs
    expected = oracle.embedding(*tables, ids, past)
    assert_bitwise_equal(
        adapter.embed(ids, past), expected, describe_call("embed", ids, past), note="wte[X] + wpe[past_length + t]"
    )


@pytest.mark.clause("LOOKUP-EXACT")
@pytest.mark.parametrize("layout", LAYOUTS)
def test_exact_sum_in_every_layout(adapter, tables, layout):
    """The same, for ids in each memory layout callers pass (not left to the draws): a C
    extension that reads the buffer as C-contiguous scrambles the others."""
    ids = in_layout(_ids(np.random.default_rng(14), 3, 17), layout)
    assert_bitwise_equal(
        adapter.embed(ids, 0),
        oracle.embedding(*tables, ids, 0),
        describe_call("embed", ids, 0),
        note=f"wte[X] + wpe[t], ids {layout}",
    )


TABLE_LAYOUTS = ("F", "every-other", "reversed")  # a transposed [d, V] store's .T, a strided view, negative strides


@pytest.mark.clause("LOOKUP-EXACT")
@pytest.mark.parametrize("layout", TABLE_LAYOUTS)
def test_exact_sum_with_tables_in_every_layout(make_adapter, tables, layout):
    """The same, for tables handed to load_tables in another memory layout than C order (a head
    stored [d, V] gives its table as wte.T, Fortran-ordered; a strided or reversed view): an
    implementation that copies or reads the buffer as if it were C-contiguous gathers scrambled
    rows. ids reach every part of both tables (0, 50256, positions 0..1023)."""
    adapter = make_adapter(load=False)
    wte, wpe = (in_layout(t, layout) for t in tables)
    adapter.load_tables(wte, wpe)
    ids = _ids(np.random.default_rng(16), 1, gpt2.N_CTX)
    call = describe_call("embed", ids, 0) + f" after load_tables(wte={describe_array(wte)}, wpe={describe_array(wpe)})"
    assert_bitwise_equal(adapter.embed(ids, 0), oracle.embedding(*tables, ids, 0), call, note="wte[X] + wpe[t]")


LARGEST = max(gpt2.SIZES.values())  # GPT-2 1558M's width, d = 1600


@pytest.mark.clause("LOOKUP-EXACT")
def test_exact_sum_at_the_largest_size(make_adapter):
    """The same at the largest released width, d = 1600 (B = 1, T = 1024), where it is claimed: a
    port with 768 written in somewhere (a buffer, a reshape, a tile width) fails here, and an
    implementation that splits one long sequence over threads or tiles does so only for outputs
    this large (mutation testing found the reference's sequence split unexercised at d = 768,
    reports/mutation-testing.md). One extra adapter, built only where size:1600 is claimed."""
    wte, wpe = random_tables(LARGEST)
    adapter = make_adapter(n_embd=LARGEST, load=False)
    adapter.load_tables(wte, wpe)
    ids = _ids(np.random.default_rng(LARGEST), 1, gpt2.N_CTX)
    assert_bitwise_equal(
        adapter.embed(ids, 0),
        oracle.embedding(wte, wpe, ids, 0),
        describe_call("embed", ids, 0) + f" at d={LARGEST}",
        note="wte[X] + wpe[t]",
    )


@pytest.mark.clause("LOOKUP-EXACT")
def test_default_past_length_is_zero(adapter, tables):
    """embed(ids) with no past_length (the protocol's default) is past_length 0: positions from 0."""
    ids = _ids(np.random.default_rng(15), 2, 9)
    assert_bitwise_equal(
        adapter.embed(ids), oracle.embedding(*tables, ids, 0), describe_call("embed", ids), note="wte[X] + wpe[t]"
    )


def _row_lookup(table: np.ndarray) -> dict:
    """First two elements' bits -> candidate row indices (rows are then compared whole)."""
    keys = np.ascontiguousarray(table[:, :2]).view(np.uint64)[:, 0]
    lookup: dict = {}
    for i, k in enumerate(keys.tolist()):
        lookup.setdefault(k, []).append(i)
    return lookup


def _factor(row: np.ndarray, kept_row: np.ndarray) -> float | None:
    """c != 1 with row == c * kept_row to within a low-precision multiply (2^-10 relative), or
    None: row is not a scaled copy (an added term, other rounding, another row: not a scale)."""
    nonzero = kept_row != 0
    if not nonzero.any():
        return None
    c = float(np.median(row[nonzero].astype(np.float64) / kept_row[nonzero]))
    scaled = c * kept_row.astype(np.float64)
    if abs(c - 1) <= 2.0**-10 or not np.all(np.abs(row - scaled) <= 2.0**-10 * np.abs(scaled) + 1e-30):
        return None
    return c


@pytest.mark.clause("LOOKUP-NO-SCALE")
@pytest.mark.parametrize("zeroed", ["wpe", "wte"])
def test_no_scaling(make_adapter, tables, zeroed):
    """With one table zero, no h[b, t] is the other table's row times a factor: no sqrt(d) or
    other scale (whether h is exactly the right row is LOOKUP-EXACT's question; a term added to
    it is LOOKUP-NO-EXTRA's). The rows are scaled by 64 (exact in float32) to norms near 35, so a
    data-dependent rescale such as nn.Embedding(max_norm=1) shows too."""
    wte, wpe = (
        zero_table(t.shape, np.float32) if name == zeroed else t * np.float32(64)
        for name, t in zip(("wte", "wpe"), tables, strict=False)
    )
    for table in (wte, wpe):
        table.flags.writeable = False  # the suite's own, like its tables (an adapter may keep them)
    kept, name = (wte, "wte") if zeroed == "wpe" else (wpe, "wpe")
    adapter = make_adapter(load=False)
    adapter.load_tables(wte, wpe)
    ids, past = _ids(np.random.default_rng(1), 2, 9), 0
    call = describe_call("embed", ids, past, tables=f"{zeroed} zeroed")
    h = as_array(adapter.embed(ids, past), call)
    if h.shape != ids.shape + (D,):
        raise AssertionError(f"h.shape={h.shape}, but should be {ids.shape + (D,)} [{call}]")
    for b, t in np.ndindex(ids.shape):
        row = ids[b, t] if name == "wte" else t
        c = _factor(h[b, t].astype(np.float64), kept[row])
        if c is not None:
            raise AssertionError(
                f"h[{b}, {t}] = {c:.6g} * {name}[{row}] (sqrt(d) = {np.sqrt(D):.6g}), but should be "
                f"{name}[{row}] with no factor [{call}]"
            )


@pytest.mark.clause("LOOKUP-NO-EXTRA")
def test_zero_tables_give_zero(make_adapter):
    """Both tables zero -> h exactly zero: no token-type embedding, bias or norm."""
    adapter = make_adapter(load=False)
    adapter.load_tables(zero_table((gpt2.N_VOCAB, D), np.float32), zero_table((gpt2.N_CTX, D), np.float32))
    ids = _ids(np.random.default_rng(2), 2, 7)
    assert_bitwise_equal(
        adapter.embed(ids, 0),
        np.zeros(ids.shape + (D,), np.float32),
        describe_call("embed", ids, 0, tables="both zero"),
        note="nothing is added to the sum",
    )


def _dropout_signature(h: np.ndarray, expected: np.ndarray) -> str:
    """What a dropout mask leaves, whatever its seed: elements exactly 0 where wte[x] + wpe[p] is
    not, and every other element the sum times one common factor (1/(1-p), or 1 without the
    rescale). "" when h does not look like that (any other wrong value is LOOKUP-EXACT's)."""
    h64, want = h.astype(np.float64), expected.astype(np.float64)
    dropped = (h64 == 0) & (want != 0)
    kept = ~dropped & (want != 0)
    if not dropped.any() or not kept.any():
        return ""
    factor = float(np.median(h64[kept] / want[kept]))
    if not np.all(np.abs(h64[kept] - factor * want[kept]) <= 2.0**-20 * np.abs(factor * want[kept])):
        return ""
    return (
        f"{int(dropped.sum())} of {dropped.size} elements of h are exactly 0 where wte[X] + wpe[t] is not, "
        f"and the rest are the sum times {factor:.6g}: a dropout mask (p = {dropped.mean():.3f}) applied at "
        "inference"
    )


@pytest.mark.clause("LOOKUP-NO-DROPOUT")
@pytest.mark.parametrize("batch,seq_len", [(4, 64), (64, 8)])
def test_no_dropout(adapter, tables, batch, seq_len):
    """Inference applies no dropout: the same input embedded three times gives the same bits (a
    mask drawn per call differs), and h does not carry a mask's signature (exact zeros, the rest
    rescaled: a mask from a fixed seed is the same every call, so only its values show it)."""
    ids = _ids(np.random.default_rng(3), batch, seq_len)
    call = describe_call("embed", ids, 0)
    first = assert_shape(adapter.embed(ids, 0), ids.shape + (D,), call, "h")
    for repeat in (2, 3):
        assert_bitwise_equal(adapter.embed(ids, 0), first.copy(), call + f" call {repeat} vs call 1")
    signature = _dropout_signature(first, oracle.embedding(*tables, ids, 0))
    if signature:
        raise AssertionError(f"{signature} [{call}]")


@pytest.mark.clause("LOOKUP-LEARNED-POSITIONS")
@pytest.mark.parametrize("position", [0, 5, gpt2.N_CTX - 1])
def test_positions_are_table_rows(adapter, make_adapter, tables, position):
    """Changing wpe[p] moves h exactly at position p, in every element, and nowhere else."""
    ids = _ids(np.random.default_rng(4), 2, position + 1)  # past_length 0: position p is token p
    call = describe_call("embed", ids, 0)
    before = as_array(adapter.embed(ids, 0), call)
    changed = make_adapter(load=False)
    changed.load_tables(tables[0], changed_row(tables[1], position, seed=5))
    where = np.zeros(ids.shape, bool)
    where[:, position] = True
    assert_moves_exactly_at(before, changed.embed(ids, 0), where, call, f"wpe[{position}] changed")


@pytest.mark.clause("LOOKUP-BATCH-INDEPENDENT")
@pytest.mark.parametrize("offset", ["past_length 0", "cached"])
@suite_settings()
@given(inputs=embed_inputs(min_batch=2, max_len=32, cached=None, max_position=RELATION_MAX_POSITION, max_past=64))
def test_batch_rows_independent(adapter, capabilities, offset, inputs):
    """Each batch row (B up to 64) equals that sequence embedded alone (small offsets: which
    positions a cache reaches is the POSITIONS group's question)."""
    ids, past = inputs
    if offset == "cached":
        skip_unless_claimed(capabilities, "kv_cache")
    else:
        past = 0
    batch = as_array(adapter.embed(ids, past), describe_call("embed", ids, past))  # its shape is SHAPE-H's
    for b in range(ids.shape[0]):
        alone = adapter.embed(ids[b : b + 1], past)
        assert_bitwise_equal(
            alone,
            batch[b : b + 1].copy(),
            describe_call("embed", ids[b : b + 1], past) + f" alone vs row {b} of the batch",
        )


@pytest.mark.clause("LOOKUP-ID-DTYPES")
def test_integer_id_dtypes(adapter):
    """int32 ids give the same h as int64 ids, up to id 50256 (catches a path that narrows one
    dtype, or rejects it); whether that h is right is LOOKUP-EXACT's question."""
    ids64 = np.array([list(EDGE_IDS), list(reversed(EDGE_IDS))], dtype=np.int64)
    reference = assert_shape(adapter.embed(ids64, 0), ids64.shape + (D,), describe_call("embed", ids64, 0), "h")
    ids32 = ids64.astype(np.int32)
    assert_bitwise_equal(
        adapter.embed(ids32, 0), reference.copy(), describe_call("embed", ids32, 0) + " vs the same ids as int64"
    )
