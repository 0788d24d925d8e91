"""Timing one callable: first call (trace, compile, allocator warm-up) apart from steady state.

The steady-state samples become pytest-benchmark Stats (median, IQR, min/max, ...), so the
JSON the bench writes has exactly the fields `pytest-benchmark compare` reads. Threads used is
measured, not read from a setting: process CPU time over wall time during the steady state
(a gather on one core reads 1.0, one on both cores of a 2-core machine about 2.0).
"""

from __future__ import annotations

import os
import statistics
import time
from dataclasses import dataclass, field


@dataclass
class Timing:
    first_call_s: float  # the first call alone: includes tracing/compiling where there is one
    samples: list[float] = field(default_factory=list)  # steady state, one call per sample
    cpu_ratio: float = 0.0  # process CPU seconds / wall seconds over the steady state

    @property
    def median(self) -> float:
        return statistics.median(self.samples)

    def stats(self) -> dict:
        """pytest-benchmark's Stats fields (its own class, so the names and formulas match)."""
        from pytest_benchmark.stats import Stats

        st = Stats()
        for s in self.samples:
            st.update(s)
        return st.as_dict()


def _now():
    return time.perf_counter(), time.process_time()


def measure(call, sync=lambda out: out, *, min_rounds: int = 5, max_rounds: int = 50, max_time: float = 2.0,
            warmup: int = 2) -> Timing:
    """Time call() (then sync(result), which must wait for the device): the first call alone,
    `warmup` untimed calls, then rounds until max_rounds or until max_time has passed after
    at least min_rounds."""
    t0 = time.perf_counter()
    sync(call())
    timing = Timing(first_call_s=time.perf_counter() - t0)
    for _ in range(warmup):
        sync(call())
    wall0, cpu0 = _now()
    while len(timing.samples) < max_rounds:
        t = time.perf_counter()
        sync(call())
        timing.samples.append(time.perf_counter() - t)
        if len(timing.samples) >= min_rounds and time.perf_counter() - wall0 > max_time:
            break
    wall1, cpu1 = _now()
    timing.cpu_ratio = (cpu1 - cpu0) / max(wall1 - wall0, 1e-9)
    return timing


def cores() -> int:
    """CPUs this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1
