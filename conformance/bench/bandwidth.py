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

matched: each workload's own limit. A 512 MiB copy is a DRAM figure, but a warm workload's
working set may sit in cache (32 MiB to 480 MiB of L3 on the machines measured so far, against
51-54 MB at the bar shape), and a copy moves as many bytes as it reads while a head reads 700
times what it writes. So every row is divided by a streaming reference that moves the same
bytes as that workload must (workloads.traffic: R read, W written): a copy of min(R, W), plus a
read-only pass over R - W (np.max, BLAS sdot of x with itself or BLAS sgemv of x as rows of
4096, the fastest counts: sdot read 150 MB 5-10% faster than max here, and sgemv 8-11% faster
than sdot on another machine) or a write-only pass (fill) over W - R, each on one thread and split
over every core (the faster counts), repeated warm or with the caches emptied before each round
(cold), as the workload was timed.
"""

from __future__ import annotations

import numpy as np

from gpt2_conformance.api import machine
from gpt2_conformance.bench import timing

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

        cores = machine.cores()
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


# Rows of 4096 measured fastest: OpenBLAS's sgemv read 154 MB at 32-37 GB/s that way on an idle
# 2-core machine, 22-24 as rows of 256, np.max 19-27 (widths 256 to 16384 tried, at 3, 60 and
# 154 MB; 16384 no faster). A reference slower than the machine's best read is a limit a framework's
# head beats: JAX's decode head read wte at 102-117% of rows of 256, a MODEL ERROR.
GEMV_WIDTH = 4096
_GEMV_VECTOR = np.ones(GEMV_WIDTH, np.float32)


def _gemv_read(x: np.ndarray):
    """x read once as rows of GEMV_WIDTH by a BLAS sgemv (it writes 1/GEMV_WIDTH of what it
    reads, uncounted, which only lowers the reference's GB/s)."""
    n = x.size - x.size % GEMV_WIDTH
    out = x[:n].reshape(-1, GEMV_WIDTH) @ _GEMV_VECTOR
    return out if n == x.size else (out, x[n:].max())


# read-only passes over a buffer, the fastest counts: numpy's max, BLAS sdot of x with itself,
# BLAS sgemv (each reads x once)
READERS = {"max": lambda x: x.max(), "dot": lambda x: np.dot(x, x), "gemv": _gemv_read}


def streams(read: int, write: int, pieces: int, reader: str = "max"):
    """One callable per piece that, together, copy min(R, W) bytes and read (R > W) or fill
    (W > R) the rest: R read and W written in all, each buffer written once here first so its
    pages exist before the first timed round."""
    copy_n, read_n, fill_n = min(read, write) // 4, max(read - write, 0) // 4, max(write - read, 0) // 4
    src = np.ones(copy_n + read_n, np.float32)
    dst = np.ones(copy_n + fill_n, np.float32)

    def piece(k: int):
        def cut(n):
            return slice(k * n // pieces, (k + 1) * n // pieces)
        c, r, f = cut(copy_n), cut(read_n), cut(fill_n)
        rd = src[copy_n:][r]
        fl = dst[copy_n:][f]
        read_pass = READERS[reader]

        def run():
            np.copyto(dst[c], src[c])
            if rd.size:
                read_pass(rd)
            if fl.size:
                fl.fill(0.0)
        return run
    return [piece(k) for k in range(pieces)], 4 * (2 * copy_n + read_n + fill_n)


def stream_call(read: int, write: int, threads: int, reader: str, pool=None):
    """(call, bytes it moves): the streaming reference for R read and W written (streams) as one
    callable, its pieces run on `pool` (a ThreadPoolExecutor of `threads` workers) where
    threads > 1."""
    runs, moved = streams(read, write, threads, reader)
    if threads == 1:
        return runs[0], moved
    return (lambda: list(pool.map(lambda run: run(), runs))), moved


def matched(read: int, write: int, flush=None, rounds: int = 7, max_time: float = 0.3,
            only: tuple[int, str] | None = None) -> dict:
    """The limit of a workload that must read `read` and write `write` bytes: GB/s of the
    streaming reference in the module docstring ((R + W) / median time), the fastest of one
    thread and every core (and of the two readers). flush (cold), if given, runs before each
    round, outside its time. only=(threads, reader): that configuration alone (a measurement
    again of one that already won). {"read", "write", "gbps", "gbps_min", "gbps_max", "threads",
    "reader", "one_thread_gbps", "all_cores_gbps", "cache"}."""
    if read < 0 or write < 0 or read + write < 8:
        raise ValueError(f"matched(read={read}, write={write}): both must be >= 0 and move at least 8 bytes")
    cores = machine.cores()
    out = {"read": read, "write": write, "cache": "warm" if flush is None else "cold"}
    best = None
    pool = None
    readers = tuple(READERS) if read > write else ("max",)  # a read pass: the faster reader counts
    try:
        configs = [only] if only is not None else [(t, r) for t in sorted({1, cores}) for r in readers]
        for threads, reader in configs:
            if threads > 1 and pool is None:
                from concurrent.futures import ThreadPoolExecutor

                pool = ThreadPoolExecutor(threads)  # numpy's copy, max and fill release the GIL
            call, moved = stream_call(read, write, threads, reader, pool)
            t = timing.measure(call, min_rounds=rounds, max_rounds=max(rounds, 50), max_time=max_time, warmup=1,
                               before=flush)
            gbps = moved / t.median / 1e9
            key = "one_thread_gbps" if threads == 1 else "all_cores_gbps"
            out[key] = max(out.get(key, 0.0), gbps)
            if best is None or gbps > best[0]:
                best = (gbps, moved / max(t.samples) / 1e9, moved / min(t.samples) / 1e9, threads, reader)
            del call
    finally:
        if pool is not None:
            pool.shutdown()
    out["gbps"], out["gbps_min"], out["gbps_max"], out["threads"], out["reader"] = best
    return out
