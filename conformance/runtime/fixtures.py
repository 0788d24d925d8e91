"""The suite's fixtures: the adapter behind the guard, its claims, the device, the suite's
tables, adapters built from them, and the GOLDEN tables."""

from __future__ import annotations

import pytest

from gpt2_conformance.api import gpt2
from gpt2_conformance.api.adapter import AdapterConfig, capabilities_of
from gpt2_conformance.runtime.guard import GuardedFactory, SuiteError
from gpt2_conformance.runtime.hooks import skip_unless_buildable
from gpt2_conformance.runtime.tables import golden_standin_wte, random_tables
from gpt2_conformance.runtime.tables import rounded_tables as rounded_random_tables


@pytest.fixture(scope="session")
def adapter_factory(request):
    """The adapter's factory behind the guard (conformance/runtime/guard.py): it refuses calls outside
    the claims and marks the adapter's own exceptions."""
    factory = request.config._gpt2c_factory
    return GuardedFactory(factory, capabilities_of(factory))


@pytest.fixture(scope="session")
def capabilities(adapter_factory):
    return capabilities_of(adapter_factory)


@pytest.fixture(scope="session")
def device(request):
    return request.config.getoption("--gpt2c-device")


@pytest.fixture(scope="session")
def tables():
    """The suite's (wte, wpe) at d = 768, read-only."""
    return random_tables(gpt2.N_EMBD_SMALL)


@pytest.fixture(scope="session")
def rounded_tables():
    """rounded_tables(dtype) -> the suite's tables rounded to nearest-even in dtype, as float32,
    read-only (kept on disk, read back memory-mapped: runtime/tables.py)."""
    return lambda dtype: rounded_random_tables(gpt2.N_EMBD_SMALL, dtype)


@pytest.fixture(scope="session")
def adapter(adapter_factory, capabilities, device, tables):
    """One float32, d = 768 adapter loaded with the suite's tables, shared by every test that
    only reads it (loading 154 MB per test would dominate the run). Tests that change tables
    or need another dtype or size use make_adapter."""
    skip_unless_buildable(capabilities, gpt2.N_EMBD_SMALL, "float32")
    instance = adapter_factory(AdapterConfig(n_embd=gpt2.N_EMBD_SMALL, dtype="float32", device=device))
    instance.load_tables(*tables)
    return instance


@pytest.fixture
def make_adapter(adapter_factory, capabilities, device, tables):
    """make_adapter(n_embd=768, dtype="float32", load=True) -> a fresh adapter; load=True
    loads the suite's tables (d = 768 only). Skips as not claimed when the size or dtype is not."""

    def make(n_embd: int = gpt2.N_EMBD_SMALL, dtype: str = "float32", load: bool = True):
        skip_unless_buildable(capabilities, n_embd, dtype)
        adapter = adapter_factory(AdapterConfig(n_embd=n_embd, dtype=dtype, device=device))
        if load:
            adapter.load_tables(*tables)
        return adapter

    return make


@pytest.fixture(scope="session")
def golden_tables(request):
    """data.GoldenTables for the GOLDEN clauses: the --checkpoint's wte and wpe, or the shipped
    real wpe and a wte holding every known real value (the rest: the suite's seeded wte)."""
    from gpt2_conformance.golden import data, readers

    path = request.config.getoption("--gpt2c-checkpoint")
    if not path:
        try:
            return data.shipped_tables(request.getfixturevalue("tables")[0], standin=golden_standin_wte)
        except (OSError, ValueError) as exc:  # missing or corrupted fixtures: the suite's data, not the adapter
            raise SuiteError(f"the shipped golden data could not be read: {exc}") from None
    try:
        return data.checkpoint_tables(path)
    except readers.CheckpointError as exc:
        raise SuiteError(f"--checkpoint: {exc}") from None
