"""Keep freed memory in the process that runs the suite, and touch fresh memory in small pages.

The suite allocates and frees arrays of 150-310 MB (wte, its gradients, float64 copies of it)
hundreds of times per run. glibc hands every block above its mmap threshold (at most 32 MB by
default) back to the kernel when it is freed, so each new one is faulted in again, page by page;
on virtual machines that return freed pages to their host, that costs more than the arithmetic
(reports/performance.md has the NumPy suite's time with and without this). Raising the
threshold keeps the blocks in the heap for the next allocation of that size.

NumPy asks the kernel for 2 MiB pages (madvise MADV_HUGEPAGE) for every array above 4 MiB.
On a virtual machine that reports free memory back to its host (Linux free page reporting, as
on Firecracker with page_reporting_order=11: the CI machines here), a huge page nearly always
comes from a reported block, which the host must back again: on such a machine a huge page
costs far more than the same memory in 4 KiB pages, and the suite does little arithmetic per byte,
so what it gains from huge pages (fewer TLB misses) is far less than that (both measured in
reports/performance.md). So the suite's processes turn them off (NUMPY_MADVISE_HUGEPAGE=0 in a child, numpy's
own switch in this process). The bench does not: it times frameworks at their best, after
warm-up, where a huge page costs nothing more per call and saves TLB misses.

Only processes this project starts get it: the suite's child processes (through CHILD_ENV) and
the project's own test processes; `bench` runs its backends with it too, unless --malloc system
(bench/command.py, the heap settings only). A user's pytest that loads the plugin is left as it is. A
value already in the environment wins.
"""

from __future__ import annotations

import ctypes
import os
import sys

THRESHOLD_BYTES = 4 << 30  # above every array the suite and the bench make (wte in float64: 309 MB)
HEAP_ENV = {"MALLOC_MMAP_THRESHOLD_": str(THRESHOLD_BYTES), "MALLOC_TRIM_THRESHOLD_": str(16 * THRESHOLD_BYTES)}
SMALL_PAGES_ENV = {"NUMPY_MADVISE_HUGEPAGE": "0"}  # read by numpy when it is imported
CHILD_ENV = {**HEAP_ENV, **SMALL_PAGES_ENV}
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3  # glibc's mallopt parameters (malloc.h)


def child_env(base: dict | None = None) -> dict:
    """`base` (default: this process's environment) with CHILD_ENV added where not already set."""
    env = dict(os.environ if base is None else base)
    for key, value in CHILD_ENV.items():
        env.setdefault(key, value)
    return env


def keep_freed_memory() -> bool:
    """The same for this process, now (numpy's switch, glibc's mallopt); False where there is no
    glibc."""
    if "NUMPY_MADVISE_HUGEPAGE" not in os.environ:
        # numpy's own switch (numpy/__init__.py); private, so numpy's stubs do not list it
        from numpy._core.multiarray import _set_madvise_hugepage  # type: ignore[attr-defined]

        _set_madvise_hugepage(False)
    if not sys.platform.startswith("linux") or any(key in os.environ for key in HEAP_ENV):
        return False
    try:
        libc = ctypes.CDLL("libc.so.6")
        most = 2**31 - 1  # mallopt takes an int
        return bool(
            libc.mallopt(_M_MMAP_THRESHOLD, ctypes.c_int(min(THRESHOLD_BYTES, most)))
            and libc.mallopt(_M_TRIM_THRESHOLD, ctypes.c_int(most))
        )
    except (OSError, AttributeError):  # musl, or no libc.so.6
        return False
