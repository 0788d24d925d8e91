"""ranking.py: paired ratios with bootstrap intervals, ranks and ties, on made-up rounds whose
answer is known."""

from __future__ import annotations

import numpy as np
import pytest

from gpt2_conformance.bench import ranking


def rounds(base: float, factor: float = 1.0, n: int = 12, noise: float = 0.05, seed: int = 0):
    """Block medians of n rounds: a drifting machine (each round's speed moves +-30%) times the
    implementation's own cost, with a little noise of its own."""
    drift = 1 + 0.3 * np.sin(np.arange(n))
    own = 1 + noise * np.random.default_rng(seed).standard_normal(n)
    return list(base * factor * drift * own)


def test_the_same_work_is_a_tie_however_much_the_machine_drifts():
    r = ranking.compare(rounds(1e-3, seed=1), rounds(1e-3, seed=2))
    assert r.low < 1 < r.high and 0.9 < r.ratio < 1.1, r.text()
    assert r.high - r.low < 0.2, f"{r.text()}: the drift cancels in the pairs, so the interval is narrow"


def test_twice_the_work_is_slower_with_confidence():
    r = ranking.compare(rounds(1e-3, 2.0, seed=1), rounds(1e-3, seed=2))
    assert r.slower and 1.8 < r.ratio < 2.2 and r.low > 1.5, r.text()


def test_drift_alone_would_hide_a_10_percent_difference_that_the_pairs_find():
    """Unpaired, the +-30% drift swamps 10%: the pairs see it."""
    a, b = rounds(1e-3, 1.1, noise=0.01, seed=1), rounds(1e-3, noise=0.01, seed=2)
    assert max(b) > min(a) and ranking.compare(a, b).slower


def test_fewer_than_three_paired_rounds_give_no_ratio():
    assert ranking.compare([1.0, 2.0, None, None], [1.0, 2.0, 3.0, 4.0]) is None
    assert ranking.compare([1.0, None, 3.0, 4.0], [1.0, 2.0, 3.0, None]) is None


def test_the_interval_is_the_same_for_the_same_data():
    a, b = rounds(1e-3, 1.05, seed=3), rounds(1e-3, seed=4)
    assert ranking.compare(a, b) == ranking.compare(a, b)


def test_rank_gives_ties_with_the_fastest_and_ranks_by_how_many_are_faster():
    times = {
        "fast": rounds(1e-3, seed=1),
        "same": rounds(1e-3, seed=2),
        "slower": rounds(1e-3, 1.5, seed=3),
        "slower-too": rounds(1e-3, 1.5, seed=4),
        "slowest": rounds(1e-3, 3.0, seed=5),
    }
    ranked = {r.name: r for r in ranking.rank(times)}
    got = {n: ranked[n].rank for n in times}
    fastest = next(n for n in ("fast", "same") if got[n] == 1)
    assert got[{"fast": "same", "same": "fast"}[fastest]] == ranking.TIE, got
    assert got["slower"] == got["slower-too"] == 3, f"{got}: two ahead of each, and the two cannot be told apart"
    assert got["slowest"] == 5, got
    assert [r.name for r in ranking.rank(times)][0] == fastest


def test_a_row_with_too_few_rounds_is_left_out_of_the_ranking():
    ranked = ranking.rank({"a": rounds(1e-3), "b": [1e-3, None, None, None]})
    assert [r.name for r in ranked] == ["a"]


@pytest.mark.parametrize("factor,pct", [(1.0, 100), (2.0, 50), (4.0, 25)])
def test_pct_of_limit_is_the_limits_time_over_the_rows(factor, pct):
    r = ranking.pct_of_limit(rounds(1e-3, factor, noise=0, seed=1), rounds(1e-3, noise=0, seed=1))
    assert r.ratio == pytest.approx(pct) and r.low == pytest.approx(pct) and r.high == pytest.approx(pct)


def test_a_difference_in_one_pair_of_processes_only_is_not_significant():
    """Rounds alternate between two cohorts of processes; cohort 1's pair differs by 15% (one
    process landed badly), cohort 0's does not: not a significant difference. In both: it is."""
    same = rounds(1e-3, noise=0.01, n=20, seed=1)
    one_cohort = [x * (1.15 if r % 2 else 1.0) for r, x in enumerate(same)]
    base = rounds(1e-3, noise=0.01, n=20, seed=2)
    assert ranking.compare(one_cohort, base, cohorts=1).slower, "pooled as one process pair, it looks significant"
    r = ranking.compare(one_cohort, base, cohorts=2)
    assert r.low < 1 < r.high, r.text()
    assert ranking.compare([x * 1.15 for x in same], base, cohorts=2).slower


def test_a_cohort_with_fewer_than_three_rounds_gives_no_ratio():
    a, b = rounds(1e-3, n=5), rounds(1e-3, n=5, seed=3)
    assert ranking.compare(a, b, cohorts=2) is None and ranking.compare(a, b, cohorts=1) is not None
