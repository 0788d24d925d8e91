"""pytest-benchmark suite: the --quick workloads of `gpt2-conformance bench`, per backend and
mode, in this one process (frameworks share it; `gpt2-conformance bench` isolates them).

    pytest tests/benchmarks --run-bench --benchmark-json=out.json
    pytest tests/benchmarks --run-bench --benchmark-compare=0001 --benchmark-compare-fail=median:10%

All backends share this process and its allocator state; `gpt2-conformance bench` times each in
its own process with glibc's thresholds fixed (its --malloc retain). To match it here, run with
MALLOC_MMAP_THRESHOLD_=4294967296 MALLOC_TRIM_THRESHOLD_=68719476736 in the environment.

Each test's extra_info carries GB/s, % of the copy bandwidth measured in this process, the
first call (trace/compile) time, threads used and the check status, as the bench command does.
"""

from __future__ import annotations

import importlib
import importlib.util

import pytest

from conformance.bench import workloads as wl

BACKENDS = ("numpy", "torch", "tensorflow", "jax")
PLAN = wl.plan(quick=True)


def _cases():
    for backend in BACKENDS:
        for mode in wl.modes_of(backend):
            for w in PLAN:
                if wl.applies(backend, mode, w):
                    yield pytest.param(backend, mode, w, id=f"{backend}-{mode}-{w.shape_id}")


_CACHE: dict = {}


def _runner(backend: str, mode: str, d: int):
    key = (backend, mode, d)
    if key not in _CACHE:
        _CACHE.clear()  # one set of tables in memory at a time
        from conformance.bench import child

        hooks = importlib.import_module(f"backends.{backend}.bench")
        wte, wpe = child._tables(d)
        _CACHE[key] = (hooks, hooks.Runner(wte, wpe, mode, "cpu"))
    return _CACHE[key]


@pytest.fixture(scope="session")
def flush():
    """Empties the CPU caches ahead of each round of a cold workload (untimed: pedantic's setup)."""
    from conformance.bench import cache

    return cache.HostFlusher()


@pytest.fixture(scope="session")
def limit_gbps():
    from conformance.bench import bandwidth

    return bandwidth.measure(256 << 20, rounds=5)["copy_gbps"]


def _bench(benchmark, limit_gbps, backend, mode, w, flush):
    if importlib.util.find_spec(backend) is None:
        pytest.skip(f"{backend} is not installed")
    import time

    from conformance.bench import child

    hooks, runner = _runner(backend, mode, w.n_embd)
    ids, dh, h = child._inputs(w)
    call = runner.make(w, runner.put(ids), w.past_length, dh=None if dh is None else runner.put(dh),
                       h=None if h is None else runner.put(h))
    if call is None:
        pytest.skip(f"{backend} {mode} does not time {w.kind}")
    t0 = time.perf_counter()
    runner.sync(call())
    first = time.perf_counter() - t0
    benchmark.group = f"{w.name} {w.shape_id}"
    rounds = 3 if (w.kind == "logits" and w.phase == "prefill") else 10
    cpu0, wall0 = time.process_time(), time.perf_counter()
    benchmark.pedantic(lambda: runner.sync(call()), rounds=rounds, warmup_rounds=1, iterations=1,
                       setup=flush if w.cache == "cold" else None)
    # with a flush between rounds the process's CPU time includes the flush: no figure then
    cpu_ratio = (time.process_time() - cpu0) / (time.perf_counter() - wall0) if w.cache == "warm" else None
    median = benchmark.stats.stats.median
    nbytes = wl.bytes_moved(w)
    benchmark.extra_info.update(bytes_moved=nbytes, gbps=nbytes / median / 1e9, limit_gbps=limit_gbps,
                                pct_of_limit=100 * nbytes / median / 1e9 / limit_gbps, first_call_s=first,
                                threads_used=None if cpu_ratio is None else round(cpu_ratio, 2),
                                cache=w.cache, check=hooks.CHECK.get(mode, ""),
                                fastest_mode=mode == hooks.FASTEST_MODE)


def _kind_cases(kind, phase):
    return [c for c in _cases() if c.values[2].kind == kind and c.values[2].phase == phase]


@pytest.mark.parametrize("backend,mode,w", _kind_cases("forward", "prefill"))
def test_forward_prefill(benchmark, limit_gbps, flush, backend, mode, w):
    _bench(benchmark, limit_gbps, backend, mode, w, flush)


@pytest.mark.parametrize("backend,mode,w", _kind_cases("forward", "decode"))
def test_forward_decode(benchmark, limit_gbps, flush, backend, mode, w):
    _bench(benchmark, limit_gbps, backend, mode, w, flush)


@pytest.mark.parametrize("backend,mode,w", _kind_cases("backward", "prefill"))
def test_backward_prefill(benchmark, limit_gbps, flush, backend, mode, w):
    _bench(benchmark, limit_gbps, backend, mode, w, flush)


@pytest.mark.parametrize("backend,mode,w", _kind_cases("logits", "decode"))
def test_logits_decode(benchmark, limit_gbps, flush, backend, mode, w):
    _bench(benchmark, limit_gbps, backend, mode, w, flush)


@pytest.mark.parametrize("backend,mode,w", _kind_cases("logits", "prefill"))
def test_logits_prefill(benchmark, limit_gbps, flush, backend, mode, w):
    _bench(benchmark, limit_gbps, backend, mode, w, flush)
