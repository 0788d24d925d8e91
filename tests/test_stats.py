"""The INIT clauses' statistics: calibrated (no false alarm on correct draws, statistics
distributed as claimed) and powerful (each wrong initialiser named in the issue fails), at
the size of wpe at d = 768 (786,432 values), the smaller and so weaker of the two tables."""

import math

import numpy as np
import pytest

from gpt2_conformance.api import gpt2
from gpt2_conformance.runtime import stats

N = 1024 * 768


def _fails(values, std):
    return [r.test for r in stats.normal_tests(values, std) if not r.passed]


def test_thresholds_match_the_stated_false_alarm_rate():
    assert stats.ALPHA_PER_TEST * stats.TESTS_PER_TABLE * len(gpt2.SIZES) == pytest.approx(1e-6)
    assert stats.WIDTHS == len(gpt2.SIZES)
    # two-sided normal quantile for 6.25e-8: erfc(z / sqrt 2) = alpha
    assert math.erfc(stats.Z_TWO_SIDED / math.sqrt(2)) == pytest.approx(stats.ALPHA_PER_TEST, rel=1e-6)
    assert stats.TAIL_P == pytest.approx(0.0026998, abs=1e-7)


def test_correct_draws_pass_and_statistics_are_calibrated():
    """40 independent correct tables: none fails (P(any) < 4e-5), and the mean and variance
    z-statistics look standard normal (their sample std within a loose band)."""
    z_mean, z_var = [], []
    for seed in range(40):
        x = np.random.default_rng(seed).standard_normal(N // 8, dtype=np.float32) * np.float32(0.02)
        results = stats.normal_tests(x, 0.02)
        assert all(r.passed for r in results), [str(r) for r in results]
        z_mean.append(results[0].statistic)
        z_var.append(results[1].statistic)
    assert 0.6 < np.std(z_mean) < 1.4 and abs(np.mean(z_mean)) < 0.6
    assert 0.6 < np.std(z_var) < 1.4 and abs(np.mean(z_var)) < 0.6


def _truncated(rng, n, cut=2.0):
    x = rng.standard_normal(n)
    while (bad := np.abs(x) > cut).any():
        x[bad] = rng.standard_normal(int(bad.sum()))
    return x


WRONG = {
    # name: (values drawn for a table whose claimed std is 0.01, i.e. wpe)
    "stds swapped (wpe at 0.02)": lambda rng: rng.standard_normal(N) * 0.02,
    "wte's std swapped in (wte at 0.01, checked against 0.02)": lambda rng: rng.standard_normal(N) * 0.005,
    "truncated normal at 2 std": lambda rng: _truncated(rng, N) * 0.01,
    "truncated normal rescaled to the right std": lambda rng: _truncated(rng, N) * 0.01 / 0.8796256610342398,
    "truncated normal at 3 std, rescaled": lambda rng: _truncated(rng, N, 3.0) * 0.01 / 0.9866317,
    "uniform with the same std": lambda rng: rng.uniform(-math.sqrt(3) * 0.01, math.sqrt(3) * 0.01, N),
    "std 5% too large": lambda rng: rng.standard_normal(N) * 0.0105,
    "std 5% too small": lambda rng: rng.standard_normal(N) * 0.0095,
    "mean shifted by 0.01 std": lambda rng: rng.standard_normal(N) * 0.01 + 0.0001,
}


@pytest.mark.parametrize("name", list(WRONG))
def test_power_against_wrong_initialisers(name):
    failed = _fails(WRONG[name](np.random.default_rng(7)).astype(np.float32), 0.01)
    assert failed, f"{name}: no test failed"


def test_the_normal_cdf_is_within_its_stated_error_of_math_erf():
    """The KS test's Phi (interpolated on a grid) against math.erf, value by value: within 1.9e-9
    on [-9, 9], the grid's ends and points between its nodes included."""
    x = np.concatenate([np.linspace(-9.0, 9.0, 20_001), [-8.0, 8.0, 1.0 + 16 / 2**17, -1.0 - 16 / 2**17]])
    exact = np.array([0.5 * (1.0 + math.erf(v / math.sqrt(2.0))) for v in x])
    err = np.abs(stats._normal_cdf(np.sort(x)) - exact[np.argsort(x)])
    assert err.max() < 1.9e-9, (err.max(), np.sort(x)[err.argmax()])
