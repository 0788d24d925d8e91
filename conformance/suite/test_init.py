"""INIT: the implementation's own initialiser draws wte ~ N(0, 0.02^2) and
wpe ~ N(0, 0.01^2), plain normals; the tables are not zero and not copies."""

import numpy as np
import pytest

from gpt2_conformance.api import gpt2
from gpt2_conformance.api.adapter import AdapterConfig
from gpt2_conformance.runtime import stats
from gpt2_conformance.runtime.hooks import skip_unless_buildable

SEED, OTHER_SEED = 1234, 4321


@pytest.fixture(scope="module")
def initialised(adapter_factory, capabilities, device):
    """(wte, wpe) after init_tables(SEED), once for the module (the init is the slow part)."""
    skip_unless_buildable(capabilities, gpt2.N_EMBD_SMALL, "float32")
    adapter = adapter_factory(AdapterConfig(n_embd=gpt2.N_EMBD_SMALL, device=device))
    adapter.init_tables(SEED)
    return tuple(np.asarray(t) for t in adapter.tables())


def _distinct_rows(table: np.ndarray) -> int:
    """Number of distinct rows (hash each row by a random projection, then compare rows that
    share a hash exactly, so the count is exact)."""
    keys = table @ np.random.default_rng(0).standard_normal(int(table.shape[1])).astype(table.dtype)
    order = np.argsort(keys, kind="stable")
    same_key = np.flatnonzero(keys[order][1:] == keys[order][:-1])
    duplicates = sum(np.array_equal(table[order[i]], table[order[i + 1]]) for i in same_key)
    return table.shape[0] - duplicates


def _check(table, std, name):
    results = stats.normal_tests(np.asarray(table), std)
    failed = [r for r in results if not r.passed]
    if failed:
        raise AssertionError(
            f"{name} is not N(0, {std}^2): "
            + "; ".join(map(str, failed))
            + f" (false-alarm rate {stats.ALPHA_PER_TEST:.1e} each) [init_tables(seed={SEED})]"
        )


@pytest.mark.clause("INIT-WTE")
def test_wte_init(initialised):
    """wte ~ N(0, 0.02^2): mean, std, KS and tail mass."""
    _check(initialised[0], gpt2.WTE_INIT_STD, "wte")


@pytest.mark.clause("INIT-WPE")
def test_wpe_init(initialised):
    """wpe ~ N(0, 0.01^2): mean, std, KS and tail mass."""
    _check(initialised[1], gpt2.WPE_INIT_STD, "wpe")


@pytest.mark.clause("INIT-DISTINCT")
def test_tables_distinct(make_adapter, initialised):
    """Not zero, no repeated rows, wpe not a multiple of wte[:1024], seeds differ."""
    # float32 tables stay float32 (exact comparisons either way; a float64 copy of wte was most of
    # this test's second); other dtypes are compared in float64
    wte, wpe = (t if t.dtype == np.float32 else np.asarray(t, np.float64) for t in map(np.asarray, initialised))
    call = f"init_tables(seed={SEED})"
    for name, table in (("wte", wte), ("wpe", wpe)):
        if not table.any():
            raise AssertionError(f"{name} is all zero, but should be random [{call}]")
        rows = _distinct_rows(table)
        if rows != table.shape[0]:
            raise AssertionError(f"{name} has {rows} distinct rows, but should have {table.shape[0]} [{call}]")
    head, wpe64 = np.asarray(wte[: gpt2.N_CTX], np.float64), np.asarray(wpe, np.float64)
    scale = float((wpe64 * head).sum() / max((head * head).sum(), 1e-300))
    if np.allclose(wpe64, scale * head, rtol=0, atol=1e-7):
        raise AssertionError(f"wpe == {scale:.3g} * wte[:1024], but should be drawn independently [{call}]")
    other = make_adapter(load=False)
    other.init_tables(OTHER_SEED)
    if np.array_equal(np.asarray(other.tables()[0]), initialised[0]):
        raise AssertionError(
            f"wte is the same as after init_tables(seed={SEED}), but two seeds should give different "
            f"tables [init_tables(seed={OTHER_SEED})]"
        )
