"""The NumPy reference's threaded gather (backends/numpy/adapter.py) against the plain formula.

The spec suite checks the adapter at the shapes hypothesis draws; these pin the ways the
threaded path splits its work (several batch rows per piece, slices of one sequence, pieces
of unequal size, inputs too small to split) so that each is shown bit for bit equal to
wte[ids] + wpe[past_length + t].
"""

from __future__ import annotations

import numpy as np
import pytest

from gpt2_conformance.api.adapter import AdapterConfig
from gpt2_conformance.backends.numpy import adapter as numpy_adapter
from gpt2_conformance.backends.numpy.adapter import NumpyAdapter


@pytest.fixture(scope="module")
def reference():
    a = NumpyAdapter(AdapterConfig(n_embd=768))
    a.init_tables(seed=3)
    return a


@pytest.mark.parametrize("cores", [2, 3])  # this machine's count must not decide which splits run
@pytest.mark.parametrize(
    "batch, seq, past_length",
    [
        (8, 1024, 0),  # the bench's bar shape: batch rows split over the cores
        (3, 1000, 24),  # batch rows in pieces of unequal size, past_length > 0
        (1, 1024, 0),  # one sequence: split along time
        (1, 1023, 1),  # time pieces of unequal size, ending at position 1023
        (64, 1, 512),  # a decode step: split in batch rows of one token each
        (2, 0, 5),  # empty
    ],
)
def test_gather_add_equals_the_formula(reference, monkeypatch, cores, batch, seq, past_length):
    monkeypatch.setattr(numpy_adapter, "_cores", lambda: cores)
    monkeypatch.setattr(numpy_adapter, "_THREADED_MIN_ELEMENTS", 0)  # split even the small shapes
    rng = np.random.default_rng(batch * 1000 + seq)
    ids = rng.integers(0, 50257, (batch, seq), dtype=np.int64)
    got = reference.embed(ids, past_length)
    want = reference.wte[ids] + reference.wpe[past_length : past_length + seq][None]
    assert got.shape == want.shape and got.dtype == want.dtype, (
        f"embed(ids.shape={ids.shape}).shape={got.shape} dtype={got.dtype}, but should be {want.shape} {want.dtype}"
    )
    diff = np.flatnonzero(got.reshape(-1).view(np.uint32) != want.reshape(-1).view(np.uint32))
    assert diff.size == 0, (
        f"embed(ids.shape={ids.shape}, past_length={past_length}) differs from "
        f"wte[ids] + wpe[...] in {diff.size} elements, first at flat index {diff[:1]}"
    )


def test_threaded_path_is_taken_at_the_bar_shape(reference, monkeypatch):
    """The equality above would hold trivially if the split never happened: count the pieces."""
    calls = []
    real_take = np.take
    monkeypatch.setattr(numpy_adapter.np, "take", lambda *a, **k: calls.append(1) or real_take(*a, **k))
    monkeypatch.setattr(numpy_adapter, "_cores", lambda: 2)
    reference.embed(np.zeros((8, 1024), np.int32), 0)
    assert len(calls) == 2, f"embed(ids.shape=(8, 1024)) ran np.take {len(calls)} times, but should be 2 (one per core)"
    calls.clear()
    reference.embed(np.zeros((64, 1), np.int32), 512)
    assert len(calls) == 1, f"embed(ids.shape=(64, 1)) ran np.take {len(calls)} times, but should be 1 (too small)"


def test_read_only_tables_are_kept_without_a_copy_and_copied_on_write():
    """load_tables keeps a read-only float32 table as it is (no 154 MB copy per load) and copies
    it before the first assign_wte_row, so the caller's array, and any table tables() handed out
    earlier, keep their values; a writable table (or a view of one) is copied at load, so the
    caller's later writes never reach the adapter."""
    rng = np.random.default_rng(0)
    wte = rng.standard_normal((50257, 768), dtype=np.float32)
    wpe = rng.standard_normal((1024, 768), dtype=np.float32)
    frozen_wte, frozen_wpe = wte.copy(), wpe.copy()
    for table in (frozen_wte, frozen_wpe):
        table.flags.writeable = False
    adapter = NumpyAdapter()
    adapter.load_tables(frozen_wte, frozen_wpe)
    assert np.shares_memory(adapter.wte, frozen_wte) and np.shares_memory(adapter.wpe, frozen_wpe)
    handed_out = adapter.tables()[0]
    adapter.assign_wte_row(7, np.ones(768, np.float32))
    assert (adapter.tables()[0][7] == 1).all() and (adapter.embed(np.array([[7]]))[0, 0] == 1 + wpe[0]).all()
    assert np.array_equal(frozen_wte[7], wte[7]) and np.array_equal(handed_out[7], wte[7])
    adapter.assign_wte_row(8, np.ones(768, np.float32))  # its own copy now: written in place
    assert np.array_equal(handed_out[8], wte[8])

    writable = NumpyAdapter()
    writable.load_tables(wte, wpe)
    read_only_view = wte.view()
    read_only_view.flags.writeable = False
    viewing = NumpyAdapter()
    viewing.load_tables(read_only_view, wpe)
    wte[3] = 5.0
    for a in (writable, viewing):
        assert not np.shares_memory(a.wte, wte) and np.array_equal(a.tables()[0][3], frozen_wte[3])
