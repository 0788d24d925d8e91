"""A workload's limit: a streaming reference that moves the same bytes as the workload must.

workloads.traffic says what a correct implementation must at least read (R) and write (W). The
reference copies min(R, W) bytes, then reads R - W more (a read-only pass) or writes W - R more
(a fill), with numpy, on one thread and split over every core (each with its fastest read pass):
both are timed in the same rounds as the implementations (session.py), and in each round the
faster of the two is the limit, so "% of the limit" is a ratio of things timed side by side: a
roofline column, never what ranks or gates.

A working set that fits in the last-level cache can run faster than DRAM, which is why the
reference moves the workload's own bytes, warm or with the caches emptied before each sample as
the workload was timed; and why a row above 100% says the byte model is wrong (MODEL ERROR),
never that an implementation beat memory.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from gpt2_conformance.bench import timing

GEMV_WIDTH = 4096  # BLAS sgemv over rows this wide was the fastest read pass on the machines tried
_GEMV_VECTOR = np.ones(GEMV_WIDTH, np.float32)


def _gemv_read(x: np.ndarray):
    """x read once as rows of GEMV_WIDTH by BLAS sgemv (its small output is not counted, which
    only lowers the reference's speed)."""
    n = x.size - x.size % GEMV_WIDTH
    out = x[:n].reshape(-1, GEMV_WIDTH) @ _GEMV_VECTOR
    return out if n == x.size else (out, x[n:].max())


# read-only passes over a buffer; numpy's own max, BLAS sdot, BLAS sgemv: which reads fastest
# depends on the BLAS build and the machine, so each is tried
READERS = {"max": lambda x: x.max(), "dot": lambda x: np.dot(x, x), "gemv": _gemv_read}


def _pieces(read: int, write: int, pieces: int, reader: str) -> list:
    """One callable per piece; together they copy min(R, W) bytes and read (R > W) or fill
    (W > R) the rest. Each buffer is written once here, so its pages exist before timing."""
    copy_n, read_n, fill_n = min(read, write) // 4, max(read - write, 0) // 4, max(write - read, 0) // 4
    src = np.ones(copy_n + read_n, np.float32)
    dst = np.ones(copy_n + fill_n, np.float32)
    read_pass = READERS[reader]

    def piece(k: int):
        def cut(n):
            return slice(k * n // pieces, (k + 1) * n // pieces)

        c, rd, fl = cut(copy_n), src[copy_n:][cut(read_n)], dst[copy_n:][cut(fill_n)]

        def run():
            np.copyto(dst[c], src[c])
            if rd.size:
                read_pass(rd)
            if fl.size:
                fl.fill(0.0)

        return run

    return [piece(k) for k in range(pieces)]


def stream(read: int, write: int, threads: int, reader: str, pool: ThreadPoolExecutor | None):
    """The reference as one callable: its pieces run on `pool` where threads > 1 (numpy's copy,
    max and fill release the GIL)."""
    if read < 0 or write < 0 or read + write < 8:
        raise ValueError(f"stream(read={read}, write={write}): both must be >= 0 and move at least 8 bytes")
    runs = _pieces(read, write, threads, reader)
    if threads == 1:
        return runs[0]
    if pool is None:
        raise ValueError(f"stream(threads={threads}): more than one thread needs a pool to run them on")
    return lambda: list(pool.map(lambda run: run(), runs))


def fastest_streams(read: int, write: int, cores: int, pool: ThreadPoolExecutor | None, before=None) -> dict:
    """{threads: (call, description)} for one thread and for every core, each with the read pass
    whose short block (timing.block, after before(), a flush, if given) was fastest now. Which thread count
    streams faster moves with the machine from one moment to the next, so both take their turns
    and the faster in each round is that round's limit (summary.py)."""
    readers = tuple(READERS) if read > write else ("max",)
    out = {}
    for threads in sorted({1, cores} if pool is not None else {1}):
        best: tuple[float, Callable[[], object], str] | None = None
        for reader in readers:
            call = stream(read, write, threads, reader, pool)
            t = timing.block(call, seconds=0, lead_in=0, before=before).median
            if best is None or t < best[0]:
                best = (t, call, f"numpy stream of the workload's bytes, {threads} thread(s), read pass {reader}")
        assert best is not None  # readers is never empty
        out[threads] = best[1:]
    return out
