"""GOLDEN: the real GPT-2 tables. The golden tables (plugin fixture `golden_tables`) are the
--checkpoint's wte and wpe, or the shipped real wpe and a wte holding every known real value;
golden vectors come from fixtures/golden.json (fixtures/derive.py), each with its precision."""

import numpy as np
import pytest

from gpt2_conformance.api import gpt2
from gpt2_conformance.api.adapter import AdapterConfig
from gpt2_conformance.api.machine import zero_table
from gpt2_conformance.golden import digests
from gpt2_conformance.results import UNAVAILABLE_PREFIX
from gpt2_conformance.runtime import oracle
from gpt2_conformance.runtime.assertions import (
    as_array,
    as_logits,
    assert_bitwise_equal,
    assert_shape,
    assert_within,
    describe_call,
)
from gpt2_conformance.runtime.guard import SuiteError
from gpt2_conformance.runtime.hooks import skip_unless_buildable, skip_unless_claimed

H_SEQUENCES = ["wte_rows_0_4", "eot_neighbours", "printed_h", "eot"]  # ids with known wte values
OFFSETS = ["first", "second", "middle", "last"]  # index into a sequence's offsets: 0, 1, 511, 1024 - T


def _need_golden_values(golden_tables):
    if not golden_tables.has_golden_values:
        pytest.skip(f"{UNAVAILABLE_PREFIX}no golden values for GPT-2 {golden_tables.size} (only 124M)")
    return golden_tables.golden


def _offset(seq, which: str, capabilities) -> int:
    past = seq.offsets[OFFSETS.index(which)]
    if past:
        skip_unless_claimed(capabilities, "kv_cache")
    return past


@pytest.fixture(scope="module")
def golden_adapter(adapter_factory, device, capabilities, golden_tables):
    """One float32 adapter loaded with the golden tables."""
    skip_unless_buildable(capabilities, golden_tables.n_embd, "float32")
    adapter = adapter_factory(AdapterConfig(n_embd=golden_tables.n_embd, dtype="float32", device=device))
    adapter.load_tables(golden_tables.wte, golden_tables.wpe)
    return adapter


@pytest.fixture(scope="module")
def zero_wte_adapter(adapter_factory, capabilities, device, golden_tables):
    """wte all zero and the golden wpe: h is exactly the wpe row (0 + x == x; wpe has no -0.0)."""
    _need_golden_values(golden_tables)
    skip_unless_buildable(capabilities, gpt2.N_EMBD_SMALL, "float32")
    adapter = adapter_factory(AdapterConfig(n_embd=gpt2.N_EMBD_SMALL, dtype="float32", device=device))
    adapter.load_tables(zero_table((gpt2.N_VOCAB, gpt2.N_EMBD_SMALL), np.float32), golden_tables.wpe)
    return adapter


def _check_elements(h: np.ndarray, expected: list, call: str, describe) -> None:
    """h[0, t, col] against (t, col, value, abs_tol) records: bits when abs_tol == 0."""
    bad = []
    for t, col, value, tol, rec in expected:
        got = h[0, t, col]
        ok = (
            (np.float32(got).view(np.uint32) == np.float32(value).view(np.uint32))
            if tol == 0
            else abs(float(got) - value) <= tol
        )
        if not ok:
            bad.append((t, col, got, value, tol, rec))
    if bad:
        t, col, got, value, tol, rec = bad[0]
        precision = "bit for bit" if tol == 0 else f"+- {tol:.3g}"
        raise AssertionError(
            f"h[0, {t}, {col}]={float(got):.9g} but should be {value:.9g} {precision} "
            f"({describe(rec)}); {len(bad)} of {len(expected)} golden elements differ [{call}]"
        )


@pytest.mark.clause("GOLDEN-TABLES-ROUNDTRIP")
def test_tables_roundtrip(golden_adapter, golden_tables):
    """tables() returns the golden tables bit for bit; shipped wpe has the real digests."""
    wte, wpe = golden_adapter.tables()
    call = f"tables() after load_tables(golden tables: {golden_tables.origin})"
    assert_bitwise_equal(np.asarray(wpe), golden_tables.wpe, call, "wpe")
    assert_bitwise_equal(np.asarray(wte), golden_tables.wte, call, "wte")
    if golden_tables.checkpoint is None:
        ref = golden_tables.golden.reference_digests["124M"]["wpe"]
        got = (digests.sha256(np.asarray(wpe)), digests.tf_masked_crc32c(np.asarray(wpe)))
        want = (ref["sha256"]["value"], ref["tf_masked_crc32c"]["value"])
        assert got == want, f"wpe read back has sha256 {got[0]}, masked crc32c {got[1]}, but should be {want} [{call}]"


@pytest.mark.clause("GOLDEN-WPE-ROWS")
@pytest.mark.parametrize("offset", OFFSETS)
def test_wpe_rows(zero_wte_adapter, golden_tables, capabilities, offset):
    """h = the real wpe rows past_length + t, bit for bit; printed values at their precision."""
    golden = _need_golden_values(golden_tables)
    seq = golden.sequence("software")
    past = _offset(seq, offset, capabilities)
    ids = np.array([seq.ids], np.int64)
    loaded = "the checkpoint's wpe" if golden_tables.checkpoint is not None else "the real GPT-2 wpe"
    call = describe_call("embed", ids, past, tables=f"wte zero, {loaded}")
    h = as_array(zero_wte_adapter.embed(ids, past), call)
    real = golden.wpe[past : past + ids.shape[1]]
    if h.shape == (1,) + real.shape:
        diff = digests.compare(np.asarray(h[0], np.float32), real)
        if not diff.identical:
            i, j = diff.first_index
            raise AssertionError(
                f"h[0, {i}, {j}]={diff.first_value!r} but the real GPT-2 wpe[{past + i}, {j}] is "
                f"{diff.first_reference!r}; {diff.n_differ} of {diff.n_total} elements "
                f"differ, max |diff| {diff.max_abs_diff:.3g} [{call}]"
            )
    assert_bitwise_equal(h, real[None], call, note="the real GPT-2 wpe row past_length + t")
    printed = [
        (k.row - past, k.col, float(k.value) if k.exact else float(k.text), k.abs_tol, k)
        for k in golden.wpe_printed
        if past <= k.row < past + ids.shape[1]
    ]
    _check_elements(
        h, printed, call, lambda k: f"wpe[{k.row}][{k.col}] printed as {k.text} by {golden.sources[k.sources[0]][:80]}"
    )


@pytest.mark.clause("GOLDEN-H")
@pytest.mark.parametrize("sequence", H_SEQUENCES)
@pytest.mark.parametrize("offset", OFFSETS)
def test_golden_h(golden_adapter, golden_tables, capabilities, sequence, offset):
    """h at every element with a known wte value equals the golden vector at its precision."""
    golden = _need_golden_values(golden_tables)
    seq = golden.sequence(sequence)
    past = _offset(seq, offset, capabilities)
    ids = np.array([seq.ids], np.int64)
    call = describe_call("embed", ids, past, tables=golden_tables.origin.split(" (")[0])
    h = assert_shape(golden_adapter.embed(ids, past), ids.shape + (golden_tables.n_embd,), call, "h")
    records = golden.h_for(seq.name, past)
    if not records:
        raise SuiteError(f"the golden data has no h for {seq.name} at past_length {past}")
    expected = [(g.t, g.col, g.value, g.abs_tol, g) for g in records]
    known = {(k.row, k.col): k for k in golden.wte_known}
    _check_elements(
        h,
        expected,
        call,
        lambda g: (
            f"golden: wte[{g.token_id}][{g.col}] = {known[g.token_id, g.col].text} + real wpe[{g.position}][{g.col}]"
        ),
    )


@pytest.mark.clause("GOLDEN-DECODE")
@pytest.mark.parametrize("sequence", ["software"] + H_SEQUENCES)
def test_cached_decode(golden_adapter, golden_tables, sequence):
    """One token at a time at past_length = offset + t equals the full forward's row t at that
    offset (a relation on the real tables; the forward's values are GOLDEN-H's)."""
    seq = golden_tables.golden.sequence(sequence)
    ids = np.array([seq.ids], np.int64)
    for past in seq.offsets:
        call = describe_call("embed", ids, past)
        # its values are GOLDEN-H's and GOLDEN-WPE-ROWS'
        full = assert_shape(golden_adapter.embed(ids, past), ids.shape + (golden_tables.n_embd,), call, "h")
        for t in range(ids.shape[1]):
            step_call = describe_call("embed", ids[:, t : t + 1], past + t) + f" vs row {t} of {call}"
            assert_bitwise_equal(golden_adapter.embed(ids[:, t : t + 1], past + t), full[:, t : t + 1], step_call)


@pytest.mark.clause("GOLDEN-LOGITS")
def test_logits_real_h(golden_adapter, golden_tables):
    """logits(h) for real h vectors within the float32 bound of the float64 h @ wte^T."""
    seq = golden_tables.golden.sequence("wte_rows_0_4")
    ids = np.array([seq.ids], np.int64)
    rows = [0, 1, 2, gpt2.N_CTX - 2, gpt2.N_CTX - 1]
    h = np.concatenate(
        [oracle.embedding(golden_tables.wte, golden_tables.wpe, ids, 0), golden_tables.wpe[rows][None]]
    ).astype(np.float32)
    expected, bound = oracle.tied_logits(h, golden_tables.wte, inputs=oracle.STRUCTURAL_INPUTS)
    call = describe_call("logits", h_final=f"float32{list(h.shape)}: h of {list(seq.ids)} and wpe rows {rows}")
    assert_within(
        as_logits(golden_adapter.logits(h), h, call),
        expected,
        bound,
        call,
        rule=f"the head is the golden wte: {oracle.STRUCTURAL_INPUTS}-input bound",
    )
