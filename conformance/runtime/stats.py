"""Statistical tests for the INIT clauses, each with a stated false-alarm rate.

A clause runs four tests (mean, variance, Kolmogorov-Smirnov, tail mass) on one table at each
of the four released widths it is claimed at, at ALPHA_PER_TEST = 6.25e-8 each, so a correct
initialiser fails the clause with probability at most 1e-6 (Bonferroni) over seeds; with the
suite's fixed seed the outcome is deterministic.
Power is shown in tests/test_stats.py: swapped stds, wpe at 0.02, a truncated normal (plain
and rescaled to the right std), a uniform of the same std and a std off by 5% all fail.

Thresholds use large-sample normal approximations, accurate here: n >= 786,432 (wpe at
d = 768). The KS threshold uses the Kolmogorov tail P(sqrt(n) D > t) <= 2 exp(-2 t^2)
(Dvoretzky-Kiefer-Wolfowitz, with Massart's constant), which holds for every n.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np

from gpt2_conformance.runtime.numerics import float64_chunks

CLAUSE_FALSE_ALARM = 1e-6
TESTS_PER_TABLE = 4
WIDTHS = 4  # the released sizes' n_embd (gpt2.SIZES): a clause tests each it is claimed at
ALPHA_PER_TEST = CLAUSE_FALSE_ALARM / (TESTS_PER_TABLE * WIDTHS)
Z_TWO_SIDED = NormalDist().inv_cdf(1 - ALPHA_PER_TEST / 2)  # about 5.41
KS_SAMPLE = 1 << 20  # KS on an evenly strided sample of at most this many values
TAIL_Z = 3.0
TAIL_P = 2 * (1 - NormalDist().cdf(TAIL_Z))  # P(|X| > 3 sigma) = 0.0026998


@dataclass(frozen=True)
class StatResult:
    test: str
    statistic: float
    threshold: float
    detail: str

    @property
    def passed(self) -> bool:
        return abs(self.statistic) <= self.threshold

    def __str__(self) -> str:
        verdict = "ok" if self.passed else "FAIL"
        return f"{self.test}: {self.detail} (|stat| {abs(self.statistic):.3g} vs limit {self.threshold:.3g}) {verdict}"


@functools.cache
def _cdf_grid() -> tuple[np.ndarray, np.ndarray]:
    """Phi at 2^16 + 1 evenly spaced points of [-8, 8] (math.erf: exact to float64)."""
    x = np.linspace(-8.0, 8.0, (1 << 16) + 1)
    return x, np.array([0.5 * (1.0 + math.erf(v / math.sqrt(2.0))) for v in x])


def _normal_cdf(x: np.ndarray) -> np.ndarray:
    """Phi(x), linearly interpolated on _cdf_grid: within h^2/8 max|Phi''| < 1.9e-9 of the exact
    value (h = 16 / 2^16, |Phi''| = |x| phi(x) <= phi(1)), beyond the grid 0 or 1 within 7e-16;
    a million times below the KS thresholds (2.7e-3 and more). math.erf per value was a tenth
    of a second per table."""
    grid, cdf = _cdf_grid()
    return np.interp(x, grid, cdf)


def _sums(flat: np.ndarray, limit: float) -> tuple[float, float, int]:
    """(sum, sum of squares, count of |x| > limit) in float64, a chunk at a time (not a 309 MB
    float64 copy of wte and two temporaries its size)."""
    total = squares = 0.0
    beyond = 0
    for (chunk,) in float64_chunks(flat):
        total += float(chunk.sum())
        squares += float(np.dot(chunk, chunk))
        beyond += int(np.count_nonzero(np.abs(chunk) > limit))
    return total, squares, beyond


def normal_tests(values: np.ndarray, std: float) -> list[StatResult]:
    """Is `values` a sample of N(0, std^2)? Four tests, each at ALPHA_PER_TEST."""
    flat = np.asarray(values).reshape(-1)
    n = flat.size
    total, squares, tail = _sums(flat, TAIL_Z * std)
    mean = total / n
    var = squares / n  # mean is known to be 0: E[x^2] = std^2, Var[x^2] = 2 std^4
    z_mean = mean / (std / math.sqrt(n))
    z_var = (var / std**2 - 1) / math.sqrt(2 / n)

    sample = np.sort(flat[:: max(1, n // KS_SAMPLE)].astype(np.float64))
    m = sample.size
    cdf = _normal_cdf(sample / std)
    ks = max(np.max(np.arange(1, m + 1) / m - cdf), np.max(cdf - np.arange(m) / m))
    ks_limit = math.sqrt(math.log(2 / ALPHA_PER_TEST) / (2 * m))

    z_tail = (tail - n * TAIL_P) / math.sqrt(n * TAIL_P * (1 - TAIL_P))
    return [
        StatResult("mean", z_mean, Z_TWO_SIDED, f"mean {mean:.3g}, z {z_mean:.2f}"),
        StatResult("std", z_var, Z_TWO_SIDED, f"std {math.sqrt(var):.5g} vs {std}, z {z_var:.2f}"),
        StatResult("normality (KS)", ks, ks_limit, f"KS distance {ks:.4g} on {m} values"),
        StatResult(
            "tail mass > 3 std",
            z_tail,
            Z_TWO_SIDED,
            f"{tail} of {n} beyond 3 std, expected {n * TAIL_P:.0f}, z {z_tail:.2f}",
        ),
    ]
