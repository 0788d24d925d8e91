"""Cache state of a timed call: warm (the same call repeated, as a microbenchmark sees it) or
cold (the last-level cache emptied before each timed call, untimed).

Why both: the forward's working set at B=8, T=1024, d=768 (the 8192 wte rows it reads, 25 MB,
plus h, 25 MB) is smaller than many server L3 caches, so repeated with the same ids the gather
reads cache, not DRAM. In a model the layers between two embedding calls read hundreds of MB of
weights, so the cold figure is the one a forward pass sees. (Host caches only: a GPU run times
no cold workload.)

The flush *reads* a buffer twice the LLC (np.max over it): reading leaves clean lines, so the
timed call does not pay to write back the flush's own dirty lines.
"""

from __future__ import annotations

import numpy as np

from gpt2_conformance.api.machine import llc_bytes

FLUSH_MIN_BYTES, FLUSH_MAX_BYTES = 256 << 20, 2 << 30


def flush_bytes(llc: int | None) -> int:
    """Twice the LLC, within [256 MiB, 2 GiB] (an unknown LLC gets 512 MiB)."""
    if llc is None:
        return 512 << 20
    return min(max(2 * llc, FLUSH_MIN_BYTES), FLUSH_MAX_BYTES)


class HostFlusher:
    """flush() evicts the CPU caches by reading a buffer twice the LLC."""

    def __init__(self, nbytes: int | None = None):
        self.nbytes = nbytes or flush_bytes(llc_bytes())
        self._buffer = np.ones(self.nbytes // 4, np.float32)  # written once here, so its pages exist

    def __call__(self) -> None:
        self._buffer.max()
