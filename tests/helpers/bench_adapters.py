"""The numpy reference as two plug-ins the bench times through conformance/bench/adapter_hooks.py
(named by module:factory spec, as any implementation outside the registry is): one with no
native hooks, one with the README's minimal native_bench."""

from __future__ import annotations

import numpy as np

from gpt2_conformance.backends.numpy.adapter import NumpyAdapter

PLAIN_NUMPY_SPEC = "helpers.bench_adapters:PlainNumpyAdapter"
NATIVE_NUMPY_SPEC = "helpers.bench_adapters:NativeNumpyAdapter"


class PlainNumpyAdapter(NumpyAdapter):
    """The numpy reference as a plug-in without native hooks would be (the bench.py beside
    backends/numpy/adapter.py has no native_bench)."""


class NativeNumpyAdapter(NumpyAdapter):
    """The README's minimal adapter with its native_bench lines: the public method path."""

    def native_bench(self, device):
        from gpt2_conformance.api.bench import NativeBench

        return NativeBench(put=np.asarray, forward=lambda ids, p: self.wte[ids] + self.wpe[p:p + ids.shape[1]],
                           logits=lambda h: h @ self.wte.T)
