"""Timing one callable in blocks: the unit the bench alternates between implementations.

A block is one implementation's turn on the machine (session.py gives the turns). It opens with
a lead-in of the implementation's own untimed calls, so its data is back in the caches and its
thread pools are awake after the other implementations' turns; then come its samples, each the
mean of as many calls in a row as last MIN_SAMPLE_S (a single short call is mostly the timer
and the scheduler's tick), or, for a cold workload, one call after a cache flush. The block's
median sample is its figure; the ratio of two implementations' figures in the same round is
what the ranking is built from (ranking.py).

Also here: how busy other processes kept the machine while the bench ran (OtherLoad).
"""

from __future__ import annotations

import math
import os
import resource
import statistics
import time
from contextlib import contextmanager
from dataclasses import dataclass

MIN_SAMPLE_S = 2e-3
MAX_CALLS_PER_SAMPLE = 1000
MIN_SAMPLES = 3  # a block's median needs a few samples, however slow the call


@dataclass
class Block:
    samples: list[float]  # seconds per call, one per sample
    calls_per_sample: int
    cpu_ratio: float  # process CPU seconds / wall seconds over the samples: threads in use
    faults_per_call: float  # minor page faults: a fresh output faulted in on every call shows here

    @property
    def median(self) -> float:
        return statistics.median(self.samples)


def calls_per_sample(fn, min_sample_s: float = MIN_SAMPLE_S) -> int:
    """How many calls of fn in a row last min_sample_s, by one call timed now."""
    t0 = time.perf_counter()
    fn()
    one = time.perf_counter() - t0
    return max(1, min(MAX_CALLS_PER_SAMPLE, math.ceil(min_sample_s / max(one, 1e-9))))


def block(fn, *, seconds: float, lead_in: float, before=None, calls: int | None = None) -> Block:
    """Time fn() (which must return only once its work is done: the worker wraps the backend's
    sync into it) for at least `seconds` of samples, after `lead_in` seconds of untimed calls.
    before(), if given, runs ahead of every sample, untimed (a cache flush), and each sample is
    one call so that every call starts from the flushed state."""
    if before is None:
        end = time.perf_counter() + lead_in
        fn()
        while time.perf_counter() < end:
            fn()
    n = 1 if before is not None else (calls or calls_per_sample(fn))
    samples: list[float] = []
    wall = cpu = 0.0
    faults = 0
    while wall < seconds or len(samples) < MIN_SAMPLES:
        if before is not None:
            before()
        faults0 = _minor_faults()
        cpu0 = time.process_time()
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        t1 = time.perf_counter()
        cpu += time.process_time() - cpu0
        faults += _minor_faults() - faults0
        samples.append((t1 - t0) / n)
        wall += t1 - t0
    return Block(samples, n, cpu / max(wall, 1e-9), faults / (n * len(samples)))


def _minor_faults() -> int:
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


class OtherLoad:
    """How many cores *other* processes kept busy while blocks were timed: the machine's busy CPU
    time minus the bench's own (the parent's and its workers', `own()`), over the wall time of
    the timing windows (setup, compiling included, is not a window). A ranking made while
    something else ran is labelled NOT A VERDICT."""

    BUSY_CORES = 0.25

    def __init__(self, own):
        self.own = own
        self.wall = self.other = 0.0
        self.known = True

    @contextmanager
    def window(self):
        wall0, busy0, own0 = time.perf_counter(), _system_busy_seconds(), self.own()
        yield
        busy1 = _system_busy_seconds()
        if busy0 is None or busy1 is None:
            self.known = False
            return
        self.wall += time.perf_counter() - wall0
        self.other += max(0.0, (busy1 - busy0) - (self.own() - own0))

    def cores(self) -> float | None:
        return self.other / self.wall if self.known and self.wall > 0 else None
