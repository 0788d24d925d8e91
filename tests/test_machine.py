"""api/machine.py's `immutable`: which arrays an adapter may keep without a copy."""

from __future__ import annotations

import mmap

import numpy as np

from gpt2_conformance.api.machine import immutable, zero_table


def _frozen(array: np.ndarray) -> np.ndarray:
    array.flags.writeable = False
    return array


def test_memory_nothing_can_write_through_is_immutable():
    """The suite's zero tables (a read-only mapping; numpy 2's frombuffer views it through a
    memoryview), arrays over bytes and read-only numpy-owned arrays may be kept as they are."""
    assert immutable(zero_table((50257, 768), np.float32))
    assert immutable(zero_table((1024, 768), np.float32)[3:5])
    assert immutable(np.frombuffer(b"\0" * 16, np.float32))
    assert immutable(_frozen(np.ones(4, np.float32)))


def test_memory_that_can_still_change_is_not():
    """A read-only view of a writable array, of a bytearray or of a writable mapping can change
    under the adapter: it must copy."""
    owner = np.ones(4, np.float32)
    assert not immutable(owner)
    assert not immutable(_frozen(owner.view()))
    assert not immutable(_frozen(np.frombuffer(bytearray(16), np.float32)))
    assert not immutable(_frozen(np.frombuffer(memoryview(bytearray(16)).toreadonly(), np.float32)))
    assert not immutable(_frozen(np.frombuffer(mmap.mmap(-1, 16), np.float32)))


def test_the_numpy_reference_keeps_the_suite_zero_tables_without_a_copy():
    """What `immutable` is for: load_tables of the suite's zero tables costs no 154 MB copy."""
    from gpt2_conformance.backends.numpy.adapter import NumpyAdapter

    wte, wpe = zero_table((50257, 768), np.float32), zero_table((1024, 768), np.float32)
    adapter = NumpyAdapter()
    adapter.load_tables(wte, wpe)
    assert np.shares_memory(adapter.wte, wte) and np.shares_memory(adapter.wpe, wpe)
