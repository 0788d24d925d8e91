"""The statistics and the timing: summary() is pytest-benchmark's own formulas, a before() hook
(the cold flush) runs every round outside the timed call, page faults per call tell a fresh
output from a reused one, and the load of other processes leaves out the bench's own CPU time."""

from __future__ import annotations

import sys

import numpy as np
import pytest


def test_stats_are_pytest_benchmarks_own_formulas():
    from pytest_benchmark.stats import Stats

    from gpt2_conformance.bench.stats import summary

    rng = np.random.default_rng(3)
    for n in (1, 2, 3, 4, 5, 6, 7, 11, 60):
        samples = list(rng.random(n))
        st = Stats()
        for x in samples:
            st.update(x)
        assert summary(samples) == st.as_dict(), f"summary(n={n}) differs from pytest_benchmark.stats.Stats"


def test_before_hook_runs_every_round_outside_the_timed_call():
    import time

    from gpt2_conformance.bench import timing

    flushes = []
    t = timing.measure(lambda: None, before=lambda: (flushes.append(1), time.sleep(0.02)),
                       min_rounds=5, max_rounds=5, max_time=0, warmup=1)
    assert len(flushes) == len(t.samples) == 5
    assert t.median < 0.005, f"median={t.median * 1e3:.1f} ms, but the 20 ms before() must not be timed"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="page-fault counts and glibc's malloc are Linux's")
def test_faults_per_call_tells_a_fresh_output_from_a_reused_one():
    from gpt2_conformance.bench import timing

    import mmap

    buffer = np.empty(64 << 18, np.float32)  # 64 MiB
    reused = timing.measure(lambda: buffer.fill(1.0), min_rounds=3, max_rounds=3, max_time=0, warmup=1)
    # a fresh anonymous mapping per call, whatever the allocator keeps (this process keeps freed
    # blocks in its heap: run/memory.py), as glibc's default serves a 64 MiB array
    fresh = timing.measure(lambda: np.frombuffer(mmap.mmap(-1, 64 << 20), np.float32).fill(1.0),
                           min_rounds=3, max_rounds=3, max_time=0, warmup=1)
    # 64 MiB is 32 huge pages or 16384 small ones: either way far above a reused buffer's 0
    assert reused.faults_per_call < 2 <= 16 <= fresh.faults_per_call, (reused.faults_per_call, fresh.faults_per_call)


def test_other_load_subtracts_the_bench_own_cpu_time(monkeypatch):
    from gpt2_conformance.bench import timing

    clock = {"busy": 100.0, "own": 10.0, "wall": 50.0}
    monkeypatch.setattr(timing, "_system_busy_seconds", lambda: clock["busy"])
    monkeypatch.setattr(timing, "_own_cpu_seconds", lambda: clock["own"])
    monkeypatch.setattr(timing.time, "perf_counter", lambda: clock["wall"])
    load = timing.OtherLoad()
    clock.update(busy=100.0 + 30.0, own=10.0 + 20.0, wall=50.0 + 10.0)  # 30 s busy in 10 s, 20 of them ours
    assert load.cores() == pytest.approx(1.0)
    monkeypatch.setattr(timing, "_system_busy_seconds", lambda: None)
    assert load.cores() is None


def test_a_short_call_is_timed_in_samples_of_several_calls():
    """min_sample_s: a ~20 us call is timed as the mean of enough calls in a row to last 2 ms (as
    pytest-benchmark calibrates its iterations), each sample still the time of one call; with a
    before() hook (the cold flush) every sample stays one call."""
    import time

    from gpt2_conformance.bench import timing

    def short():
        end = time.perf_counter() + 20e-6
        while time.perf_counter() < end:
            pass

    t = timing.measure(short, min_rounds=5, max_rounds=5, max_time=0, warmup=1, min_sample_s=2e-3)
    assert 2 <= t.calls_per_sample <= 100, f"calls_per_sample={t.calls_per_sample}, but 2 ms / ~20 us is ~100"
    assert len(t.samples) == 5 and 15e-6 <= t.median <= 200e-6, f"median={t.median * 1e6:.0f} us per call"
    flushed = timing.measure(short, min_rounds=3, max_rounds=3, max_time=0, warmup=1, min_sample_s=2e-3,
                             before=lambda: None)
    assert flushed.calls_per_sample == 1
    assert timing.measure(short, min_rounds=3, max_rounds=3, max_time=0, warmup=1).calls_per_sample == 1


def test_paired_rounds_time_the_call_then_its_reference_each_after_its_own_warm_up(monkeypatch):
    """timing.paired: each round is a round of the call, then one of the reference, each timed
    after an untimed block of its own (warm) or before() (cold); a reference twice as slow as the
    call reads as a ratio of 2 in every pair (a clock the calls advance: no real time is read)."""
    import types

    from gpt2_conformance.bench import timing

    now, order = [0.0], []
    monkeypatch.setattr(timing, "time", types.SimpleNamespace(perf_counter=lambda: now[0]))

    def takes(seconds, name):
        def run():
            order.append(name)
            now[0] += seconds
        return run

    settle = lambda: order.append("settle")  # noqa: E731
    pairs = timing.paired(takes(1e-3, "call"), [takes(2e-3, "stream")], rounds=4, settle=settle)
    assert pairs == [(pytest.approx(1e-3), pytest.approx(2e-3))] * 4, pairs
    # each side's calibration call first, then per round: call warm-up, call timed, the row's
    # threads left to go idle, stream warm-up, stream timed
    assert order == ["call", "stream"] + ["call", "call", "settle", "stream", "stream"] * 4, order
    order.clear()
    flushed = timing.paired(takes(1e-3, "call"), [takes(2e-3, "stream")], rounds=2, before=lambda: order.append("flush"),
                            settle=settle)
    assert order == ["call", "stream"] + ["flush", "call", "settle", "flush", "stream"] * 2 and len(flushed) == 2, order
    order.clear()
    timing.paired(takes(1e-3, "call"), [takes(2e-3, "stream")], rounds=1, min_sample_s=4e-3, settle=lambda: None)
    assert order.count("call") == 1 + 1 + 2 * 4 and order.count("stream") == 1 + 1 + 2 * 2, order  # 4 ms blocks
    order.clear()
    two = timing.paired(takes(1e-3, "call"), [takes(2e-3, "one thread"), takes(1.5e-3, "all cores")], rounds=2,
                        settle=settle)
    assert two == [(pytest.approx(1e-3), pytest.approx(2e-3), pytest.approx(1.5e-3))] * 2, two
    assert order == ["call", "one thread", "all cores"] + ["call", "call", "settle", "one thread", "one thread",
                                                           "settle", "all cores", "all cores"] * 2, order


def test_paired_rounds_sync_the_call_never_the_stream():
    """A decode step's sync waits for each part of its output (a pair); the stream returns None
    (one thread) or a list of None: the row's sync must never be applied to it."""
    from gpt2_conformance.bench import timing

    synced = []

    def step_sync(out):
        synced.extend(out)  # raises on None, as a decode step's sync did on the stream's output
        return out

    pairs = timing.paired(lambda: ("h", "logits"), [lambda: None], step_sync, rounds=2)
    assert len(pairs) == 2 and set(synced) == {"h", "logits"}


def test_quiet_sleeps_until_no_thread_of_the_process_ran_for_a_step(monkeypatch):
    """timing.quiet: a thread left spinning (here: CPU time that grows through the first three
    2 ms sleeps, as torch's OpenMP workers after a call) is waited out, one step at a time,
    and never for longer than max_wait (a clock the sleeps advance: no real time passes)."""
    import types

    from gpt2_conformance.bench import timing

    clock = {"wall": 0.0, "cpu": 0.0, "spin_until": 0.006}

    def sleep(seconds):
        spinning = max(0.0, min(seconds, clock["spin_until"] - clock["wall"]))
        clock["wall"] += seconds
        clock["cpu"] += spinning

    monkeypatch.setattr(timing, "time", types.SimpleNamespace(sleep=sleep, process_time=lambda: clock["cpu"]))
    assert timing.quiet(step=0.002, max_wait=0.1) == pytest.approx(0.008)  # 3 spinning steps, then a quiet one
    clock.update(wall=0.0, spin_until=1.0)
    assert timing.quiet(step=0.002, max_wait=0.01) == pytest.approx(0.01)  # never quiet: gives up at max_wait
    clock.update(wall=0.0, spin_until=0.0)
    assert timing.quiet(step=0.002, max_wait=0.1) == pytest.approx(0.002)
