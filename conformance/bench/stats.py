"""pytest-benchmark's Stats fields, computed here so that timing needs no optional package.

The bench measures first and writes its outputs last; if the statistics needed
pytest_benchmark, a missing or broken install would cost every figure already measured. The
formulas are pytest-benchmark 5.x's own (pytest_benchmark/stats.py: quartiles by Wikipedia's
methods 2 and 3, Tukey fences), so `pytest-benchmark compare` reads the JSON as its own;
tests/bench/test_stats_and_timing.py checks every field against pytest_benchmark.stats.Stats where it is
installed.
"""

from __future__ import annotations

import statistics
from bisect import bisect_left, bisect_right

FIELDS = ("min", "max", "mean", "stddev", "rounds", "median", "iqr", "q1", "q3", "iqr_outliers",
          "stddev_outliers", "outliers", "ld15iqr", "hd15iqr", "ops", "total")


def _quartiles(data: list[float]) -> tuple[float, float]:
    n = len(data)
    if n == 1:
        return data[0], data[0]
    if n % 2:  # method 3
        k, q = n // 4, n % 4
        if q == 1:
            return 0.25 * data[k - 1] + 0.75 * data[k], 0.75 * data[3 * k] + 0.25 * data[3 * k + 1]
        return 0.75 * data[k] + 0.25 * data[k + 1], 0.25 * data[3 * k + 1] + 0.75 * data[3 * k + 2]
    return statistics.median(data[: n // 2]), statistics.median(data[n // 2:])  # method 2


def summary(samples: list[float]) -> dict:
    """{field: value} for the FIELDS above, from one sample per timed round (seconds)."""
    if not samples:
        raise ValueError("summary(samples): no samples; a timed workload has at least one round")
    data = sorted(samples)
    mean = statistics.mean(data)
    stddev = statistics.stdev(data) if len(data) > 1 else 0
    q1, q3 = _quartiles(data)
    iqr = q3 - q1
    if len(data) == 1:
        ld, hd = data[0], data[0]
    else:
        ld = data[bisect_left(data, q1 - 1.5 * iqr)]
        hd = data[bisect_right(data, q3 + 1.5 * iqr) - 1]
    sd_out = sum(1 for v in data if v < mean - stddev or v > mean + stddev)
    iqr_out = sum(1 for v in data if v < q1 - 1.5 * iqr or v > q3 + 1.5 * iqr)
    total = sum(samples)
    return {"min": data[0], "max": data[-1], "mean": mean, "stddev": stddev, "rounds": len(data),
            "median": statistics.median(data), "iqr": iqr, "q1": q1, "q3": q3, "iqr_outliers": iqr_out,
            "stddev_outliers": sd_out, "outliers": f"{sd_out};{iqr_out}", "ld15iqr": ld, "hd15iqr": hd,
            "ops": len(data) / total if total else 0, "total": total}
