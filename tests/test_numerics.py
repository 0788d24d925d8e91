"""Rounding and bounds behind the DTYPE and TIED tolerances."""

import numpy as np
import pytest

from gpt2_conformance.runtime import numerics, oracle


def test_bfloat16_rounding_matches_ml_dtypes():
    ml_dtypes = pytest.importorskip("ml_dtypes")
    x = np.random.default_rng(0).standard_normal(100_000).astype(np.float32) * np.float32(3.0)
    x[:4] = [1.00390625, 1.01171875, -1.00390625, 0.0]  # exact ties: to even, down and up
    ours = numerics.round_to_dtype(x, "bfloat16")
    theirs = x.astype(ml_dtypes.bfloat16).astype(np.float32)
    assert np.array_equal(ours, theirs)


def test_bfloat16_ties_to_even_by_hand():
    # 1 + 2^-8 is halfway between 1 and 1 + 2^-7: ties to the even mantissa, 1.0
    assert numerics.round_to_dtype(np.float32(1 + 2**-8), "bfloat16") == 1.0
    assert numerics.round_to_dtype(np.float32(1 + 3 * 2**-8), "bfloat16") == np.float32(1 + 2**-6)


def test_ulp_of_known_values():
    assert numerics.ulp(np.float64(1.0), "float16") == 2**-10
    assert numerics.ulp(np.float64(1.5), "bfloat16") == 2**-7
    assert numerics.ulp(np.float64(1.0), "float32") == 2**-23
    assert numerics.ulp(np.float64(0.0), "float16") == 2**-24  # subnormal spacing


def test_gamma():
    assert numerics.gamma(768, 2**-24) == pytest.approx(768 * 2**-24, rel=1e-4)
    with pytest.raises(ValueError, match="undefined"):
        numerics.gamma(2**24, 2**-24)


def test_tied_logit_bound_holds_for_float32_and_catches_bfloat16():
    """A float32 matmul stays inside the (worst-case, any summation order) bound, and the
    bound is not vacuous: a head that silently runs in bfloat16 lands outside it."""
    rng = np.random.default_rng(1)
    h = rng.standard_normal((3, 4, 768), dtype=np.float32)
    wte = rng.standard_normal((5000, 768), dtype=np.float32) * np.float32(0.02)
    exact, bound = oracle.tied_logits(h, wte)
    assert np.all(np.abs((h @ wte.T) - exact) <= bound)
    bf16 = numerics.round_to_dtype(h, "bfloat16") @ numerics.round_to_dtype(wte, "bfloat16").T
    assert np.mean(np.abs(bf16 - exact) > bound) > 0.5
