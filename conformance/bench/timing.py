"""Timing one callable: first call (trace, compile, allocator warm-up) apart from steady state.

The steady-state samples become pytest-benchmark's Stats fields (median, IQR, min/max, ...;
computed by conformance/bench/stats.py with its formulas), so the JSON the bench writes has
exactly the fields `pytest-benchmark compare` reads. Threads used is
measured, not read from a setting: process CPU time over wall time during the steady state
(a gather on one core reads 1.0, one on both cores of a 2-core machine about 2.0).
"""

from __future__ import annotations

import math
import os
import statistics
import time
from dataclasses import dataclass, field

MAX_CALLS_PER_SAMPLE = 1000  # a 1 us call still gets samples of a millisecond


@dataclass
class Timing:
    first_call_s: float  # the first call alone: includes tracing/compiling where there is one
    samples: list[float] = field(default_factory=list)  # steady state, one call per sample
    cpu_ratio: float = 0.0  # process CPU seconds / wall seconds over the steady state
    # minor page faults per timed call: a call that writes a fresh output faults its pages in
    # anew each time where glibc has unmapped the last one on free (see bench --malloc)
    faults_per_call: float = 0.0
    calls_per_sample: int = 1  # a sample is the mean of this many calls in a row (measure's min_sample_s)

    @property
    def median(self) -> float:
        return statistics.median(self.samples)

    def stats(self) -> dict:
        """pytest-benchmark's Stats fields, by its formulas (conformance/bench/stats.py), so
        timing never needs an optional package."""
        from gpt2_conformance.bench.stats import summary

        return summary(self.samples)


def measure(call, sync=lambda out: out, *, min_rounds: int = 5, max_rounds: int = 50, max_time: float = 2.0,
            warmup: int = 2, before=None, min_sample_s: float = 0.0) -> Timing:
    """Time call() (then sync(result), which must wait for the device): the first call alone,
    `warmup` untimed calls, then rounds until max_rounds or until max_time of timed calls has
    passed after at least min_rounds. before(), if given, runs ahead of every timed round and
    outside its time (a cache flush); max_time and the CPU ratio count only the timed calls.

    min_sample_s: a round times as many calls in a row as it takes to last that long (one call
    timed after the warm-up says how many), and its sample is their mean, as pytest-benchmark
    calibrates its iterations. A single 20 us call is mostly the timer, the scheduler's tick and
    an interrupt or not: one call per sample gave decode rows IQRs of 20-75% of their median.
    With before() every round is one call (each call must start from the flushed state)."""
    t0 = time.perf_counter()
    sync(call())
    timing = Timing(first_call_s=time.perf_counter() - t0)
    for _ in range(warmup):
        sync(call())
    if min_sample_s > 0 and before is None:
        t0 = time.perf_counter()
        sync(call())
        one = time.perf_counter() - t0
        timing.calls_per_sample = max(1, min(MAX_CALLS_PER_SAMPLE, math.ceil(min_sample_s / max(one, 1e-9))))
    calls = range(timing.calls_per_sample)
    wall = cpu = 0.0
    faults = 0
    while len(timing.samples) < max_rounds:
        if before is not None:
            before()
        faults0 = _minor_faults()  # these and process_time outside the wall-clock interval
        cpu0 = time.process_time()
        wall0 = time.perf_counter()
        for _ in calls:
            sync(call())
        wall1 = time.perf_counter()
        cpu1 = time.process_time()
        faults += _minor_faults() - faults0
        timing.samples.append((wall1 - wall0) / len(calls))
        wall, cpu = wall + wall1 - wall0, cpu + cpu1 - cpu0
        if len(timing.samples) >= min_rounds and wall > max_time:
            break
    timing.cpu_ratio = cpu / max(wall, 1e-9)
    timing.faults_per_call = faults / (len(timing.samples) * len(calls))
    return timing


def paired(call, reference, sync=lambda out: out, *, rounds: int, before=None, min_sample_s: float = 0.0
           ) -> list[tuple[float, float]]:
    """[(call's time, reference's time)] for `rounds` rounds, each a round of call() and, right
    after it, a round of reference() (the row's streaming reference, bench/child.py): the two
    meet the same machine, so their ratio holds where each alone drifts. On the idle 2-core
    machines here the bar shape's NumPy gather + add and its stream each moved 10-14% between
    fresh processes while their paired ratio moved 0.3-3.8%
    (reports/bench/cpu-2026-12-06-paired-x3.md). Each side's timed round lasts at least
    min_sample_s as in measure() and follows as many untimed calls of its own (warm: the call
    finds its own data in cache, not the other's) or before() (cold: a flush)."""
    def calibrated(fn, fn_sync):
        fn_sync()
        if min_sample_s <= 0 or before is not None:
            return fn_sync, 1
        t0 = time.perf_counter()
        fn_sync()
        one = time.perf_counter() - t0
        return fn_sync, max(1, min(MAX_CALLS_PER_SAMPLE, math.ceil(min_sample_s / max(one, 1e-9))))

    # the row's sync waits for the row's output (a decode step's is a pair); the stream is numpy
    sides = [calibrated(call, lambda: sync(call())), calibrated(reference, reference)]
    out = []
    for _ in range(rounds):
        pair = []
        for fn, n in sides:
            if before is not None:
                before()
            else:
                for _ in range(n):
                    fn()
            t0 = time.perf_counter()
            for _ in range(n):
                fn()
            pair.append((time.perf_counter() - t0) / n)
        out.append(tuple(pair))
    return out


def _minor_faults() -> int:
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def _system_busy_seconds() -> float | None:
    """CPU seconds every process on the machine has used since boot (/proc/stat), or None."""
    try:
        with open("/proc/stat") as f:
            fields = f.readline().split()[1:]
    except OSError:
        return None
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(x) for x in fields[:8])
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


def _own_cpu_seconds() -> float:
    """CPU seconds of this process and of its children that have been waited for."""
    import resource

    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


class OtherLoad:
    """How many cores *other* processes kept busy while the bench ran: the machine's busy CPU
    time minus the bench's own (its children included), over the wall time. A shared machine
    is the usual reason two runs disagree; the reports print this figure beside the results."""

    def __init__(self):
        self._start = (time.perf_counter(), _system_busy_seconds(), _own_cpu_seconds())

    def cores(self) -> float | None:
        wall0, busy0, own0 = self._start
        busy1 = _system_busy_seconds()
        if busy0 is None or busy1 is None:
            return None
        wall = max(time.perf_counter() - wall0, 1e-9)
        return max(0.0, (busy1 - busy0) - (_own_cpu_seconds() - own0)) / wall
