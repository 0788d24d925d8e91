"""The JAX backend: the suite passes on JaxAdapter (one suite run), and JAX-specific mistakes
and properties are checked directly, on small tables (fast).

The JAX mutants (JaxAdapter with one thing done the way JAX makes easy and wrong) are in
tests/helpers/mutants_jax.py; tests/test_kill_matrix.py (the slow tier) runs the whole suite on
each and checks the exact set of clauses that fail. Mistakes the suite does not reliably reach
(int64 ids that wrap into range when JAX casts them to int32, helpers.mutants_jax.Int64Wraps)
are checked here.
"""

import numpy as np
import pytest

jax = pytest.importorskip("jax")
jnp = pytest.importorskip("jax.numpy")

from gpt2_conformance.api import gpt2  # noqa: E402
from gpt2_conformance.api.adapter import AdapterConfig  # noqa: E402
from gpt2_conformance.api.errors import PositionOutOfRangeError, TokenIdOutOfRangeError  # noqa: E402
from gpt2_conformance.backends.jax import model  # noqa: E402
from gpt2_conformance.backends.jax.adapter import JaxAdapter  # noqa: E402
from gpt2_conformance.results import PASS  # noqa: E402
from gpt2_conformance.run.runner import run_in_process  # noqa: E402
from gpt2_conformance.spec import CLAUSES  # noqa: E402
from helpers.mutants_jax import CheckifyErrorDropped, Int64Wraps  # noqa: E402

# -- the suite --------------------------------------------------------------------------

CLAIMED = {c.id for c in CLAUSES if all(JaxAdapter.capabilities.claims(req) for req in c.requires)}


def test_suite_passes():
    r = run_in_process(JaxAdapter, "jax")
    assert r.error == ""
    assert r.failed() == []
    statuses = {c.clause.id: c.status for c in r.clauses}
    assert {cid for cid, s in statuses.items() if s == PASS} == CLAIMED, statuses


# -- direct checks ----------------------------------------------------------------------

D = 8  # small tables keep these fast: the functions do not depend on d


def _adapter(cls=JaxAdapter, dtype="float32"):
    adapter = cls(AdapterConfig(n_embd=D, dtype=dtype))
    rng = np.random.default_rng(0)
    adapter.load_tables(
        rng.standard_normal((gpt2.N_VOCAB, D), dtype=np.float32), rng.standard_normal((gpt2.N_CTX, D), dtype=np.float32)
    )
    return adapter


@pytest.mark.parametrize("bad", [2**32, 2**32 + 5, 2**40, -(2**32) + 7, 2**63 - 1])
def test_int64_ids_beyond_int32_raise_naming_the_value(bad):
    """With x64 off JAX holds ids as int32; these would wrap into [0, 50257) (the suite's
    hypothesis draws do not reliably reach them, so they are checked here)."""
    ids = np.array([[1, bad, 2]], np.int64)
    with pytest.raises(TokenIdOutOfRangeError, match=rf"token id {bad} at ids\[0, 1\].*\[0, 50257\)"):
        _adapter().embed(ids)
    wrapped = int(np.int64(bad).astype(np.int32))
    if 0 <= wrapped < gpt2.N_VOCAB:  # the mutant really is wrong here: a silent wrong row
        mutant = _adapter(Int64Wraps)
        wte, wpe = mutant.tables()
        assert np.array_equal(mutant.embed(ids)[0, 1], wte[wrapped] + wpe[1])


@pytest.mark.parametrize("value", [-1, gpt2.N_VOCAB, 2**31 - 1, -(2**31)])
def test_device_check_names_the_value(value):
    for dtype in (np.int32, np.int64):
        with pytest.raises(TokenIdOutOfRangeError, match=rf"^token id {value} is outside the wte table \[0, 50257\)$"):
            _adapter().embed(np.array([[3, value], [4, 5]], dtype))


def test_dropped_checkify_error_is_silent():
    """What the real adapter's err.get() is for: without it a bad id is clamped."""
    adapter = _adapter(CheckifyErrorDropped)
    h = adapter.embed(np.array([[gpt2.N_VOCAB]]))
    wte, wpe = adapter.tables()
    assert np.array_equal(h[0, 0], wte[-1] + wpe[0])
    with pytest.raises(TokenIdOutOfRangeError):
        _adapter().embed(np.array([[gpt2.N_VOCAB]]))


def test_position_error_before_the_device():
    with pytest.raises(PositionOutOfRangeError, match="position 1024 is outside the wpe table"):
        _adapter().embed(np.zeros((1, 2), np.int32), gpt2.N_CTX - 1)


def test_past_length_is_traced_not_static():
    """A decode loop compiles once per token count, not once per past_length."""
    adapter = _adapter()
    ids = np.array([[7]], np.int32)
    adapter.embed(ids, 0)
    before = model._embed_jit._cache_size()
    for past in (1, 2, 500, gpt2.N_CTX - 1):
        adapter.embed(ids, past)
    assert model._embed_jit._cache_size() == before


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_one_compilation_per_power_of_two_of_tokens(dtype):
    """The forward pads B*T tokens to a power of two, so shapes with the same bucket share one
    compilation, and the padding never shows: each row is wte[id] + wpe[past + t], bit for bit,
    up to the last position of wpe (the padding repeats the last real token and position)."""
    adapter = _adapter(dtype=dtype)
    wte, wpe = adapter.tables()
    adapter.embed(np.zeros((1, 5), np.int32))  # 5 tokens: compiled for 8
    before = model._embed_jit._cache_size()
    rng = np.random.default_rng(1)
    for shape, past in [((1, 6), 3), ((2, 3), 0), ((7, 1), 1017), ((1, 8), 9), ((3, 2), gpt2.N_CTX - 2)]:
        ids = rng.integers(0, gpt2.N_VOCAB, shape, dtype=np.int32)
        h = adapter.embed(ids, past)
        # the float32 sum of two tables' entries, rounded once to the storage dtype (exact for float32)
        expected = np.asarray(jnp.asarray(wte[ids] + wpe[past : past + shape[1]]).astype(dtype), np.float32)
        assert h.shape == (*shape, D)
        assert np.array_equal(h, expected), (
            f"embed(ids.shape={shape}, past_length={past}) differs from wte[ids] + wpe[past + t]"
        )
    assert model._embed_jit._cache_size() == before, "a shape in the same power-of-two bucket compiled again"


def test_assign_wte_row_donates_the_table():
    """The old wte buffer is handed to XLA to write the row into (whether it reuses it or
    copies is the runtime's choice), and no stale copy of wte is left behind."""
    adapter = _adapter()
    wte = adapter.params["wte"]
    adapter.assign_wte_row(3, np.full(D, 2.5, np.float32))
    assert wte.is_deleted()
    assert np.all(adapter.tables()[0][3] == 2.5)
    with pytest.raises(IndexError):
        adapter.assign_wte_row(gpt2.N_VOCAB, np.zeros(D, np.float32))


def test_bfloat16_bridge_and_float32_head():
    adapter = _adapter(dtype="bfloat16")
    wte = adapter.tables()[0]
    assert wte.dtype == np.float32 and adapter.params["wte"].dtype == jnp.bfloat16
    h = adapter.embed(np.array([[0, 1]]))
    assert h.dtype == np.float32
    logits = adapter.logits(h)
    assert logits.dtype == np.float32 and logits.shape == (1, 2, gpt2.N_VOCAB)


def test_init_is_seeded():
    a, b = JaxAdapter(AdapterConfig(n_embd=D)), JaxAdapter(AdapterConfig(n_embd=D))
    a.init_tables(5)
    b.init_tables(5)
    assert all(np.array_equal(x, y) for x, y in zip(a.tables(), b.tables(), strict=True))
    b.init_tables(6)
    assert not np.array_equal(a.tables()[0], b.tables()[0])


def test_gpu_probe_and_no_global_x64():
    available, why = JaxAdapter.device_available("gpu")
    try:
        has_gpu = bool(jax.devices("gpu"))
    except RuntimeError:
        has_gpu = False
    assert available == has_gpu
    if not has_gpu:
        assert why == "JAX sees no GPU on this machine"
        with pytest.raises(ValueError, match="not available"):
            JaxAdapter(AdapterConfig(device="gpu"))
    assert JaxAdapter.device_available("cpu") == (True, "")
    assert not jax.config.jax_enable_x64
