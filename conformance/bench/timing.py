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
        timing.calls_per_sample = _calls_per_sample(lambda: sync(call()), min_sample_s)
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


def paired(call, references, sync=lambda out: out, *, rounds: int, before=None, min_sample_s: float = 0.0,
           settle=None) -> list[tuple[float, ...]]:
    """[(call's time, each reference's time)] for `rounds` rounds, each a round of call() and,
    right after it, a round of each reference (the row's streaming references, bench/child.py):
    they meet the same machine, so their ratio holds better than either alone. Each side's timed
    round lasts at least min_sample_s as in measure() and follows as many untimed calls of its
    own (warm: the call finds its own data in cache, not the other's) or before() (cold: a
    flush). A reference's side starts once the row's threads have gone idle (settle, default
    quiet()), so a reference never shares the cores with what the row left spinning."""
    settle = quiet if settle is None else settle
    # the row's sync waits for the row's output (a decode step's is a pair); the streams are numpy
    sides = [lambda: sync(call()), *references]
    for fn in sides:
        fn()
    counts = [1 if before is not None or min_sample_s <= 0 else _calls_per_sample(fn, min_sample_s)
              for fn in sides]
    out = []
    for _ in range(rounds):
        pair = []
        for k, (fn, n) in enumerate(zip(sides, counts)):
            if k > 0:
                settle()
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


def _calls_per_sample(fn, min_sample_s: float) -> int:
    """How many calls of fn in a row last min_sample_s, by one call timed now (at most
    MAX_CALLS_PER_SAMPLE)."""
    t0 = time.perf_counter()
    fn()
    one = time.perf_counter() - t0
    return max(1, min(MAX_CALLS_PER_SAMPLE, math.ceil(min_sample_s / max(one, 1e-9))))


QUIET_STEP_S = 0.002
QUIET_MAX_S = 0.1


def quiet(step: float = QUIET_STEP_S, max_wait: float = QUIET_MAX_S) -> float:
    """Sleep until no thread of this process ran for `step` seconds (at most max_wait); returns
    the seconds slept. torch's OpenMP workers keep spinning after each parallel region (9-11 ms
    of CPU over the first 8 ms after a bar-shape call on the 2-core machine here, then none): a
    reference timed in that window would share the cores with them
    (reports/bench/cpu-2026-12-06-threads.md)."""
    waited = 0.0
    while waited < max_wait:
        cpu0 = time.process_time()
        time.sleep(step)
        waited += step
        if time.process_time() - cpu0 < step / 4:
            break
    return waited


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
