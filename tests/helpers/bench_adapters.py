"""The numpy reference as two plug-ins the bench times through conformance/bench/adapter_hooks.py
(named by module:factory spec, as any implementation outside the registry is): one with no
native hooks, one with the README's minimal native_bench."""

from __future__ import annotations

import os
import time

import numpy as np

from gpt2_conformance.backends.numpy.adapter import NumpyAdapter

PLAIN_NUMPY_SPEC = "helpers.bench_adapters:PlainNumpyAdapter"
NATIVE_NUMPY_SPEC = "helpers.bench_adapters:NativeNumpyAdapter"
SLOWDOWN_ENV = "GPT2C_TEST_SLOWDOWN"  # a fraction: NativeNumpyAdapter's native forward that much slower


class PlainNumpyAdapter(NumpyAdapter):
    """The numpy reference as a plug-in without native hooks would be (the bench.py beside
    backends/numpy/adapter.py has no native_bench)."""


class NativeNumpyAdapter(NumpyAdapter):
    """The README's minimal adapter with its native_bench lines: the public method path."""

    SLOWDOWN = 0.0

    def native_bench(self, device):
        from gpt2_conformance.api.bench import NativeBench

        def forward(ids, p):
            return self.wte[ids] + self.wpe[p : p + ids.shape[1]]

        slowdown = self.SLOWDOWN or float(os.environ.get(SLOWDOWN_ENV, "0"))
        if slowdown:
            plain = forward

            def forward(ids, p):  # a real slowdown: each call waits out `slowdown` of its own time
                start = time.perf_counter()
                out = plain(ids, p)
                until = start + (1 + slowdown) * (time.perf_counter() - start)
                while time.perf_counter() < until:
                    pass
                return out

        return NativeBench(put=np.asarray, forward=forward, logits=lambda h: h @ self.wte.T)


SLOWER_NUMPY_SPEC = "helpers.bench_adapters:SlowerNativeNumpyAdapter"


class SlowerNativeNumpyAdapter(NativeNumpyAdapter):
    """NativeNumpyAdapter with each native forward 20% slower: a change the gate must catch at 10%."""

    SLOWDOWN = 0.2


DOUBLED_NUMPY_SPEC = "helpers.bench_adapters:DoubledNumpyAdapter"
CRASHING_NUMPY_SPEC = "helpers.bench_adapters:CrashingNumpyAdapter"


class DoubledNumpyAdapter(NumpyAdapter):
    """The numpy reference doing its work twice in embed and logits: a real 2x slowdown (the
    gate's `bench --against` must fail it)."""

    def embed(self, ids, past_length=0):
        super().embed(ids, past_length)
        return super().embed(ids, past_length)

    def logits(self, h):
        super().logits(h)
        return super().logits(h)


class CrashingNumpyAdapter(NumpyAdapter):
    """The numpy reference whose forward dies of a real segmentation fault at the decode shape
    (one token): the bench must lose that row, not the run."""

    def embed(self, ids, past_length=0):
        if np.asarray(ids).shape[1] == 1:
            import ctypes

            ctypes.string_at(0)
        return super().embed(ids, past_length)
