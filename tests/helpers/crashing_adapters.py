"""Adapters that die of a real segmentation fault -- a read of an unmapped address in native
code, the way a gather without bounds checks (MLX's, see backends/thirdparty/mlx_lm) kills the
interpreter -- in exactly one clause's tests. Not os.abort (SIGABRT) and not os.kill: the
kernel delivers SIGSEGV for the bad read itself. tests/test_crash_isolation.py runs them
through the runner's child processes; imported there by name through PYTHONPATH."""

from __future__ import annotations

import ctypes
import os
import tempfile

import numpy as np

from gpt2_conformance.api import machine
from gpt2_conformance.backends.numpy.adapter import NumpyAdapter

# ids this far outside the table make MLX's CPU gather read unmapped memory (10**7 already
# did, measured with mlx 0.32.4); only BOUNDS-TOKEN's hypothesis tests draw them
FAR = 2**24


def segfault() -> None:
    """Read address 0 from C (ctypes.string_at calls strlen on the pointer): SIGSEGV."""
    ctypes.string_at(0)


class SegfaultInAssignRow(NumpyAdapter):
    """The NumPy reference whose in-place row update dies in native code. Only TIED-STORAGE and
    the STATE clauses write a row, so only their (parametrised, not hypothesis) tests crash."""

    def assign_wte_row(self, index, values):
        segfault()


class SegfaultOnFarIds(NumpyAdapter):
    """The NumPy reference fronted by an unchecked gather, as in MLX: an id at least FAR
    outside the table reads unmapped memory before any check runs. Only BOUNDS-TOKEN's
    hypothesis-driven tests draw such ids (e.g. 2**31 - 1), so the crash lands in the middle
    of a hypothesis run; every other input gets the reference's answer or its clear error."""

    def embed(self, ids, past_length=0):
        arr = np.asarray(ids)
        if arr.dtype.kind in "iu" and arr.size and (arr.max() >= FAR or arr.min() <= -FAR):
            segfault()
        return super().embed(ids, past_length)


class PoisonsItsDeviceOnBadIds(NumpyAdapter):
    """What torch does on CUDA without a host-side check: a bad id trips a device-side assert,
    and from then on every call in that process fails ("CUDA error: device-side assert
    triggered"), valid ones included. Simulated on the CPU with a process-wide flag, as a CUDA
    context is process-wide."""

    poisoned = False  # the "CUDA context" of this process

    def embed(self, ids, past_length=0):
        arr = np.asarray(ids)
        if type(self).poisoned:
            raise RuntimeError("CUDA error: device-side assert triggered (an earlier kernel failed)")
        if arr.dtype.kind in "iu" and arr.size and (arr.max() >= 50257 or arr.min() < 0):
            type(self).poisoned = True
            raise RuntimeError("CUDA error: device-side assert triggered")
        return super().embed(ids, past_length)


class SegfaultInLogits(NumpyAdapter):
    """The NumPy reference whose head dies in native code on every call: every clause that reads
    logits crashes its test process, the last test of the suite (GOLDEN-LOGITS) among them."""

    def logits(self, h_final):
        segfault()


FOLDERS_RECORD = "GPT2C_TEST_FOLDERS_RECORD"  # the variable naming LeavesItsFolderAndSegfaults' record file


class LeavesItsFolderAndSegfaults(SegfaultInAssignRow):
    """SegfaultInAssignRow with a temporary folder of its own, as the engines' adapters keep one
    (a compiled model, its external data) until their finalizer removes it: a child that dies
    runs no finalizer. Each folder's path, and the cache root its process sees, is appended as one
    line to the file named by FOLDERS_RECORD."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        folder = tempfile.mkdtemp(prefix="gpt2c-test-leaves-")
        with open(os.environ[FOLDERS_RECORD], "a") as record:
            record.write(f"{folder} {machine.private_cache_root()}\n")
