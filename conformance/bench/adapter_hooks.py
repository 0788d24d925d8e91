"""Bench hooks for any adapter, through the Adapter API as the suite calls it (numpy in, numpy
out): the third-party implementations, plug-ins and `--adapter package.module:factory`.

A backend with its own backends/<fw>/bench.py (numpy, torch, tensorflow, jax) is timed there,
in the framework's own tensors; every other backend is timed here, so the conversions to and
from numpy are inside each call. Between two implementations timed here that is the same work
through the same bridge; against a framework's own hooks the difference is the bridge's cost.

One mode, "adapter". Its bounds check is whatever the implementation does (third-party
implementations are judged as they are, see their scorecards), so these rows never count for
the bar. Backward is not timed: Adapter.gradients also takes a logits cotangent of B*T*50257
floats (1.6 GB at the prefill shape), which would swamp the scatter-add being measured.
"""

from __future__ import annotations

import numpy as np

from conformance.adapter import AdapterConfig, capabilities_of

MODES = {"adapter": "the Adapter API (numpy in, numpy out, conversions included) as the suite calls it"}
SUITE_MODE = FASTEST_MODE = "adapter"
CHECK = {"adapter": "the implementation's own (see its scorecard)"}

_spec: str | None = None


def configure(name_or_spec: str) -> None:
    """Which adapter the hooks time: a registered backend name or a module:factory spec."""
    global _spec
    _spec = name_or_spec


def _factory():
    from conformance import registry

    if _spec is None:
        raise RuntimeError("adapter_hooks.configure(name) was not called")
    return registry.resolve(_spec)


def available(device: str) -> tuple[bool, str]:
    if device != "cpu":
        return False, (f"{_spec}: the generic adapter hooks time the numpy Adapter API on the host; GPU timings "
                       "need a backend's own bench hooks (backends/<fw>/bench.py)")
    devices = capabilities_of(_factory()).devices
    return (True, "") if device in devices else (False, f"{_spec} does not claim device {device!r} ({devices})")


def threads_setting() -> str:
    return "the implementation's defaults"


def device_kernels(nbytes: int, device: str):
    return None  # CPU only: conformance.bench.bandwidth measures it


class Runner:
    def __init__(self, wte: np.ndarray, wpe: np.ndarray, mode: str, device: str):
        self.adapter = _factory()(AdapterConfig(n_embd=wte.shape[1], device=device))
        self.adapter.load_tables(wte, wpe)

    def put(self, array):
        return array

    def sync(self, out):
        return out  # the Adapter API returns numpy: the work is done when the call returns

    def make(self, w, ids, past_length, dh=None, h=None):
        if w.kind == "forward":
            return lambda: self.adapter.embed(ids, past_length)
        if w.kind == "logits":
            return lambda: self.adapter.logits(h)
        return None  # backward: see the module docstring
