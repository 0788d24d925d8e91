"""This machine's memory bandwidth, measured in the process that times the workloads.

copy:   STREAM-like copy, np.copyto(dst, src) of `nbytes`; GB/s counts the read and the write
        (2 * nbytes per copy), as STREAM does.
gather: the same bytes read as rows of 768 float32 in a random order (np.take(mode="clip",
        out=)), written contiguously: what an embedding gather does at best with one thread.

The limit a workload is measured against is the copy's median GB/s, the faster of a copy on
one thread and one split over every core (2 cores here: about 22 vs 28 GB/s when the machine
is idle). A working set that fits in the last-level cache (wte is 154 MB at d=768, h 25 MB)
can still run above 100% of a DRAM copy of 512 MiB.

On a GPU the same two kernels run on the device through the backend's bench hooks
(bench.device_kernels), so the limit is the device's memory bandwidth.

cold_copy: a copy of a workload's own output bytes with the caches emptied before each one
(conformance/bench/cache.py): what a copy of that size reaches from a cold start, the
reference a cold-cache workload is read against besides the limit.
"""

from __future__ import annotations

import numpy as np

from conformance.bench import timing

DEFAULT_BYTES = 512 << 20
ROW = 768


def _kernels(nbytes: int, pool=None):
    n = nbytes // 4 // ROW * ROW
    src = np.ones(n, np.float32)
    dst = np.empty_like(src)
    rows = np.random.default_rng(0).permutation(n // ROW)  # intp: np.take's native index type
    src2, dst2 = src.reshape(-1, ROW), dst.reshape(-1, ROW)
    kernels = {"copy": lambda: np.copyto(dst, src),
               "gather": lambda: np.take(src2, rows, axis=0, out=dst2, mode="clip")}
    if pool is not None:  # np.copyto releases the GIL: one slice per core copies in parallel
        k = pool._max_workers
        bounds = [slice(i * n // k, (i + 1) * n // k) for i in range(k)]
        kernels["copy_all_cores"] = lambda: list(pool.map(lambda sl: np.copyto(dst[sl], src[sl]), bounds))
    return n * 4, kernels


def measure(nbytes: int = DEFAULT_BYTES, rounds: int = 7, kernels=None, sync=lambda out: out) -> dict:
    """{"copy_gbps", "gather_gbps", "bytes", ...}: medians over `rounds`, with min/max.

    On the CPU the copy runs twice: on one thread (numpy's own) and split over every core
    (threads, since np.copyto releases the GIL). The limit, "copy_gbps", is the faster of
    the two medians, so a framework that gathers on every core is measured against what
    every core can copy. The one-thread figure stays in "copy_1thread_gbps"."""
    pool = None
    if kernels:
        nbytes, copy, gather = kernels(nbytes)
        fns = {"copy": copy, "gather": gather}
        method = "device kernels"
    else:
        from concurrent.futures import ThreadPoolExecutor

        cores = timing.cores()
        pool = ThreadPoolExecutor(cores) if cores > 1 else None
        nbytes, fns = _kernels(nbytes, pool)
        method = f"numpy copyto (1 thread and {cores} threads) / take(mode='clip', out=) (1 thread)"
    out = {"bytes": nbytes, "method": method}
    try:
        for name, fn in fns.items():
            t = timing.measure(fn, sync, min_rounds=rounds, max_rounds=rounds, max_time=0, warmup=1)
            moved = 2 * nbytes
            out[f"{name}_gbps"] = moved / t.median / 1e9
            out[f"{name}_gbps_min"] = moved / max(t.samples) / 1e9
            out[f"{name}_gbps_max"] = moved / min(t.samples) / 1e9
            out[f"{name}_threads"] = round(t.cpu_ratio, 2)
    finally:
        if pool is not None:
            pool.shutdown()
    if "copy_all_cores_gbps" in out:
        for suffix in ("", "_min", "_max"):
            out[f"copy_1thread_gbps{suffix}"] = out[f"copy_gbps{suffix}"]
        if out["copy_all_cores_gbps"] > out["copy_gbps"]:
            for suffix in ("", "_min", "_max"):
                out[f"copy_gbps{suffix}"] = out[f"copy_all_cores_gbps{suffix}"]
            out["limit_from"] = "copy on all cores"
        else:
            out["limit_from"] = "copy on one thread"
    return out


def cold_copy(nbytes: int, flush, rounds: int = 7) -> dict:
    """{"bytes", "gbps", "gbps_min", "gbps_max"}: np.copyto of nbytes (read + write counted,
    as above) on one thread, flush() before each copy and outside its time."""
    src = np.ones(nbytes // 4, np.float32)
    dst = np.ones_like(src)  # written once: its pages exist before the first timed copy
    t = timing.measure(lambda: np.copyto(dst, src), min_rounds=rounds, max_rounds=rounds, max_time=0, warmup=1,
                       before=flush)
    moved = 2 * src.nbytes
    return {"bytes": src.nbytes, "gbps": moved / t.median / 1e9, "gbps_min": moved / max(t.samples) / 1e9,
            "gbps_max": moved / min(t.samples) / 1e9}
