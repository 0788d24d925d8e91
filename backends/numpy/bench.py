"""Bench hooks for the NumPy reference (same names in every backends/<fw>/bench.py).

Modes:
  suite     NumpyAdapter.embed as the suite calls it: check_embed_inputs (a vectorised host
            range check), then np.take(mode="clip") with the position rows added in place,
            split over the cores in contiguous pieces when the output has >= 2**20 elements
            (np.take releases the GIL). mode="clip" is safe only because the ids were checked
            just before. Exact: the same values as wte[ids] + wpe[...].
  take-out  one thread, into a preallocated output (np.take(out=), np.add(out=)): what numpy's
            gather does on one core with no allocation; an adapter that returns fresh arrays
            cannot reuse the buffer.
  fancy     wte[ids] + wpe[...] (fancy indexing, two fresh arrays, one thread), for comparison.
  nocheck   forward only: the suite mode's gather + add with no range check (mode="clip" then
            clamps a bad id silently): what the check costs. Comparison only.
The head uses BLAS threads in every mode.
"""

from __future__ import annotations

import numpy as np

from gpt2_conformance.api import gpt2
from gpt2_conformance.api.adapter import AdapterConfig
from gpt2_conformance.api.validation import check_embed_inputs
from gpt2_conformance.backends.numpy import BACKEND

MODES, CHECK = BACKEND.mode_table()  # declared once, in the registry entry (__init__.py)
SUITE_MODE = "suite"
FASTEST_MODE = "suite"  # threaded; take-out shows one core with no allocation


def available(device: str) -> tuple[bool, str]:
    return (True, "") if device == "cpu" else (False, "numpy has no GPU: the reference runs on the CPU only")


def threads_setting() -> str:
    from gpt2_conformance.api.machine import cores

    return f"gather: suite {cores()} threads (one piece per core), take-out/fancy 1; head: BLAS default"


class Runner:
    def __init__(self, wte: np.ndarray, wpe: np.ndarray, mode: str, device: str):
        from gpt2_conformance.backends.numpy.adapter import NumpyAdapter

        self.mode = mode
        self.adapter = NumpyAdapter(AdapterConfig(n_embd=wte.shape[1], device=device))
        self.adapter.load_tables(wte, wpe)
        self.wte, self.wpe = self.adapter.wte, self.adapter.wpe

    def put(self, array):
        return array

    def sync(self, out):
        return out

    def make(self, w, ids, past_length, dh=None, h=None):
        """A zero-argument callable for workload w, or None where this mode does not do w."""
        if w.kind == "forward":
            if self.mode == "suite":
                return lambda: self.adapter.embed(ids, past_length)
            if self.mode == "take-out":
                out = np.empty((*ids.shape, self.wte.shape[1]), self.wte.dtype)
                pos = self.wpe[past_length : past_length + ids.shape[1]][None]

                def take_out():
                    check_embed_inputs(ids, past_length)
                    np.take(self.wte, ids, axis=0, out=out, mode="clip")
                    return np.add(out, pos, out=out)

                return take_out
            if self.mode == "nocheck":
                from gpt2_conformance.backends.numpy.adapter import gather_add

                rows = self.wpe[past_length : past_length + ids.shape[1]]
                return lambda: gather_add(self.wte, rows, ids)
            if self.mode == "fancy":

                def fancy():
                    check_embed_inputs(ids, past_length)
                    return self.wte[ids] + self.wpe[past_length : past_length + ids.shape[1]][None]

                return fancy
        if self.mode != "suite":
            return None
        if w.kind == "backward":
            d = self.wte.shape[1]

            def backward():
                check_embed_inputs(ids, past_length)
                d_wte = np.zeros((gpt2.N_VOCAB, d), np.float32)
                np.add.at(d_wte, ids.reshape(-1), dh.reshape(-1, d))
                d_wpe = np.zeros((gpt2.N_CTX, d), np.float32)
                d_wpe[past_length : past_length + ids.shape[1]] = dh.sum(axis=0)
                return d_wte, d_wpe

            return backward
        if w.kind == "logits":
            return lambda: self.adapter.logits(h)
        return None
