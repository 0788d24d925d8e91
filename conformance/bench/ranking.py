"""Ratios with confidence: the figures the bench ranks and gates by.

Two implementations timed in the same round (session.py) give one ratio of their block medians;
over the rounds, those ratios form a paired sample in which the machine's slow drift cancels.
A comparison is the Hodges-Lehmann estimate of the paired log-ratios (the median of their
pairwise means: as robust as the median to a block that met a burst of another process's work,
and nearly as tight as the mean on clean data), with a 95% confidence interval from
scipy.stats.bootstrap over the rounds (percentile method, a fixed seed, so the same data always
gives the same interval).

Rounds are timed by cohorts of worker processes (session.py: round r by each side's process
r % P). The estimate pools every round; the interval is the hull of the cohorts' own intervals,
so a difference is called significant only where it holds in every pair of processes: two
processes of the same code can differ by several percent (where their memory landed), and one
pair's difference is not the implementations'.

Ranking one workload: the fastest is the row with the smallest median block; every row gets its
ratio to it. A row whose interval holds 1 is a `tie` with the fastest; any other row is ranked
1 + the number of rows that are faster than it with confidence (so rows that cannot be told
apart share a rank). The gate (`bench --against`) is the same comparison, new over base.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass

import numpy as np

CONFIDENCE, RESAMPLES = 0.95, 2000
TIE = "tie"


@dataclass(frozen=True)
class Ratio:
    ratio: float  # a's time over b's (the paired rounds' ratios, module docstring)
    low: float
    high: float
    rounds: int

    @property
    def slower(self) -> bool:
        """a is slower than b with confidence."""
        return self.low > 1

    def text(self) -> str:
        return f"{self.ratio:.2f}x [{self.low:.2f}, {self.high:.2f}]"


def block_medians(blocks: list) -> list[float | None]:
    return [None if b is None else statistics.median(b["samples"]) for b in blocks]


def paired(a: list[float | None], b: list[float | None], cohort: int = 0, cohorts: int = 1) -> np.ndarray:
    """log(a / b) of the cohort's rounds (r % cohorts == cohort) in which both have a block."""
    return np.array(
        [
            np.log(x / y)
            for r, (x, y) in enumerate(zip(a, b, strict=True))
            if r % cohorts == cohort and x is not None and y is not None and x > 0 and y > 0
        ]
    )


def hodges_lehmann(x: np.ndarray, axis: int = -1) -> np.ndarray:
    """The median of the Walsh averages (x_i + x_j) / 2, i <= j, along `axis` (vectorised, as
    scipy.stats.bootstrap calls it)."""
    x = np.moveaxis(np.asarray(x), axis, -1)
    i, j = np.triu_indices(x.shape[-1])
    return np.median((x[..., i] + x[..., j]) / 2, axis=-1)


def _interval(logs: np.ndarray) -> tuple[float, float]:
    if np.ptp(logs) == 0:
        return float(logs[0]), float(logs[0])
    from scipy import stats

    ci = stats.bootstrap(
        (logs,),
        hodges_lehmann,
        confidence_level=CONFIDENCE,
        n_resamples=RESAMPLES,
        method="percentile",
        rng=np.random.default_rng(0),
    ).confidence_interval
    return float(ci.low), float(ci.high)


def compare(a: list[float | None], b: list[float | None], cohorts: int = 1) -> Ratio | None:
    """a's time over b's, round by round (module docstring); None where a cohort that has rounds
    has fewer than 3."""
    parts = [paired(a, b, c, cohorts) for c in range(cohorts)]
    parts = [p for p in parts if p.size]
    if not parts or min(p.size for p in parts) < 3:
        return None
    bounds = [_interval(p) for p in parts]
    low, high = min(lo for lo, _ in bounds), max(hi for _, hi in bounds)
    centre = float(hodges_lehmann(np.concatenate(parts)))
    return Ratio(float(np.exp(centre)), float(np.exp(low)), float(np.exp(high)), sum(p.size for p in parts))


@dataclass
class Ranked:
    name: str
    ratio: Ratio | None  # to the fastest (None for the fastest itself)
    rank: int | str  # 1 for the fastest; TIE; or 1 + rows faster with confidence


def rank(times: dict[str, list[float | None]], cohorts: int = 1) -> list[Ranked]:
    """{row name: block medians by round} -> the rows ranked (module docstring), fastest first."""
    names = [n for n, t in times.items() if sum(x is not None for x in t) >= 3]
    if not names:
        return []
    fastest = min(names, key=lambda n: statistics.median(x for x in times[n] if x is not None))
    out = []
    for name in names:
        if name == fastest:
            out.append(Ranked(name, Ratio(1.0, 1.0, 1.0, len(times[name])), 1))
            continue
        to_fastest = compare(times[name], times[fastest], cohorts)
        if to_fastest is None or not to_fastest.slower:
            out.append(Ranked(name, to_fastest, TIE))
            continue
        beaten_by = sum(
            1
            for other in names
            if other != name and (c := compare(times[name], times[other], cohorts)) is not None and c.slower
        )
        out.append(Ranked(name, to_fastest, 1 + beaten_by))
    return sorted(out, key=lambda r: (r.rank != 1, r.ratio.ratio if r.ratio else float("inf")))


def pct_of_limit(row: list[float | None], limit: list[float | None], cohorts: int = 1) -> Ratio | None:
    """The row's speed as a % of its limit's, round by round: 100 * limit time / row time (the
    limit moves exactly the row's least bytes), with its interval."""
    r = compare(limit, row, cohorts)
    return None if r is None else Ratio(100 * r.ratio, 100 * r.low, 100 * r.high, r.rounds)
