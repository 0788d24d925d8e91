"""pytest-benchmark suite: each workload of `gpt2-conformance bench` at its standard shape, per backend and
mode, in this one process (frameworks share it; `gpt2-conformance bench` isolates them).

    pytest tests/benchmarks --run-bench --benchmark-json=out.json
    pytest tests/benchmarks --run-bench --benchmark-compare=0001 --benchmark-compare-fail=median:10%

All backends share this process and its allocator state; `gpt2-conformance bench` times each in
its own process with glibc's thresholds fixed (its --malloc retain). To match it here, run with
MALLOC_MMAP_THRESHOLD_=4294967296 MALLOC_TRIM_THRESHOLD_=68719476736 MALLOC_ARENA_MAX=1 in the
environment.

Each test's extra_info carries the least bytes the workload must move, GB/s, its own limit (a
stream of the same bytes in the same cache state, measured in this process: bandwidth.matched)
and % of it (None, with model_error, above 100%), the first call (trace/compile) time, threads
used and the check status, as the bench command does.
"""

from __future__ import annotations

import importlib

import pytest

from gpt2_conformance import registry
from gpt2_conformance.bench import worker
from gpt2_conformance.bench import workloads as wl

# the backends with bench modes of their own (registry entries)
BACKENDS = tuple(n for n, e in registry.builtin().items() if e.bench_modes)
PLAN = [wl.standard(name) for name in wl.NAMES]


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
        hooks = importlib.import_module(registry.entry(backend).bench_module)
        wte, wpe = worker.tables(d)
        _CACHE[key] = (hooks, hooks.Runner(wte, wpe, mode, "cpu"))
    return _CACHE[key]


@pytest.fixture(scope="session")
def flush():
    """Empties the CPU caches ahead of each round of a cold workload (untimed: pedantic's setup)."""
    from gpt2_conformance.bench import cache

    return cache.HostFlusher()


_LIMITS: dict = {}


@pytest.fixture(scope="session")
def limit_gbps(flush):
    """limit_gbps(w, distinct_ids): GB/s of a stream moving w's least bytes in w's cache state."""
    from concurrent.futures import ThreadPoolExecutor

    from gpt2_conformance.api import machine
    from gpt2_conformance.bench import bandwidth, timing

    def limit(w, distinct):
        read, write = wl.traffic(w, distinct)
        key = (read, write, w.cache)
        if key not in _LIMITS:
            before = flush if w.cache == "cold" else None
            with ThreadPoolExecutor(machine.cores()) as pool:
                streams = bandwidth.fastest_streams(read, write, machine.cores(), pool, before)
                fastest = min(
                    timing.block(call, seconds=0.3, lead_in=0.05, before=before).median for call, _ in streams.values()
                )
            _LIMITS[key] = (read + write) / fastest / 1e9
        return _LIMITS[key]

    return limit


def _bench(benchmark, limit_gbps, backend, mode, w, flush):
    missing = registry.missing_framework(backend)
    if missing:
        pytest.skip(f"{backend}: {missing} is not installed")
    import time

    hooks, runner = _runner(backend, mode, w.n_embd)
    ids, dh, h = worker.inputs(w)
    call = worker.make_call(
        runner,
        w,
        runner.put(ids),
        w.past_length,
        None if dh is None else runner.put(dh),
        None if h is None else runner.put(h),
    )
    if call is None:
        pytest.skip(f"{backend} {mode} does not time {w.kind}")
    t0 = time.perf_counter()
    call()
    first = time.perf_counter() - t0
    benchmark.group = f"{w.name} {w.shape_id}"
    rounds = 3 if (w.kind == "logits" and w.phase == "prefill") else 10
    cpu0, wall0 = time.process_time(), time.perf_counter()
    benchmark.pedantic(call, rounds=rounds, warmup_rounds=1, iterations=1, setup=flush if w.cache == "cold" else None)
    # with a flush between rounds the process's CPU time includes the flush: no figure then
    cpu_ratio = (time.process_time() - cpu0) / (time.perf_counter() - wall0) if w.cache == "warm" else None
    median = benchmark.stats.stats.median
    distinct = worker.distinct_ids(w)
    nbytes, limit = wl.bytes_moved(w, distinct), limit_gbps(w, distinct)
    pct = 100 * nbytes / median / 1e9 / limit
    benchmark.extra_info.update(
        bytes_moved=nbytes,
        distinct_ids=distinct,
        gbps=nbytes / median / 1e9,
        limit_gbps=limit,
        pct_of_limit=None if pct > 100 else pct,
        model_error=f"{pct:.0f}% of its limit" if pct > 100 else None,
        first_call_s=first,
        threads_used=None if cpu_ratio is None else round(cpu_ratio, 2),
        cache=w.cache,
        check=hooks.CHECK.get(mode, ""),
        fastest_mode=mode == hooks.FASTEST_MODE,
    )


def _kind_cases(kind, phase):
    return [c for c in _cases() if c.values[2].kind == kind and c.values[2].phase == phase]


def _suite_test(kind: str, phase: str):
    """test_{kind}_{phase}, parametrized over every (backend, mode, workload) of that kind and
    phase, its ids backend-mode-shape: the names `gpt2-conformance bench` gives its rows
    (conformance/bench/benchmark_json.py SUITE_FILE), so the two JSONs compare."""

    @pytest.mark.parametrize("backend,mode,w", _kind_cases(kind, phase))
    def suite_test(benchmark, limit_gbps, flush, backend, mode, w):
        _bench(benchmark, limit_gbps, backend, mode, w, flush)

    suite_test.__name__ = suite_test.__qualname__ = f"test_{kind}_{phase}"
    suite_test.__doc__ = f"{kind} {phase}: the median and its % of the limit (extra_info), per backend and mode."
    return suite_test


# one test per (kind, phase), in the order of workloads.NAMES: test_forward_prefill,
# test_forward_decode, test_backward_prefill, test_backward_decode, test_logits_prefill, ...
for _kind, _phase in dict.fromkeys((w.kind, w.phase) for w in PLAN):
    globals()[f"test_{_kind}_{_phase}"] = _suite_test(_kind, _phase)
del _kind, _phase
