"""The NumPy reference made strict about its claims: each adapter here claims less than the
reference can do, and raises StrictCallError (and logs the call) whenever the suite calls
outside what it claims. tests/test_claims.py runs the whole suite on each: a correct
implementation that claims less must pass or be NOT CLAIMED everywhere, never FAIL or ERROR,
and the log must stay empty.

The suite's own guard (conformance/runtime/guard.py) refuses such calls first; this wrapper is the
independent check that the guard and every clause keep the promise.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from gpt2_conformance.api.adapter import AdapterConfig
from gpt2_conformance.backends.numpy.adapter import NumpyAdapter

VIOLATIONS: list[str] = []  # every call outside the claims, in this process


class StrictCallError(Exception):
    """Raised by a strict adapter called outside its claims: distinctive, never a verdict."""


def _is_zero(past_length) -> bool:
    return (
        not isinstance(past_length, (bool, np.bool_))
        and np.ndim(past_length) == 0
        and np.issubdtype(np.asarray(past_length).dtype, np.integer)
        and int(past_length) == 0
    )


class _Strict(NumpyAdapter):
    def _refuse(self, requirement: str, call: str):
        if not self.capabilities.claims(requirement):
            VIOLATIONS.append(f"{type(self).__name__}.{call} needs {requirement}")
            raise StrictCallError(f"{call} needs {requirement}, which {type(self).__name__} does not claim")

    def __init__(self, config: AdapterConfig = AdapterConfig()):
        for requirement in (f"size:{config.n_embd}", f"dtype:{config.dtype}", f"device:{config.device}"):
            self._refuse(requirement, f"__init__({config})")
        super().__init__(config)

    def embed(self, ids, past_length=0):
        if not _is_zero(past_length):
            self._refuse("kv_cache", f"embed(past_length={past_length!r})")
        return super().embed(ids, past_length)

    def logits(self, h_final):
        self._refuse("tied_head", "logits")
        return super().logits(h_final)

    def init_tables(self, seed):
        self._refuse("init", "init_tables")
        return super().init_tables(seed)

    def assign_wte_row(self, index, values):
        self._refuse("mutable_tables", "assign_wte_row")
        return super().assign_wte_row(index, values)

    def gradients(self, ids, past_length, cotangent_h, cotangent_logits):
        self._refuse("gradients", "gradients")
        if np.any(cotangent_logits):
            self._refuse("tied_head", "gradients(cotangent_logits != 0)")
        if not _is_zero(past_length):
            self._refuse("kv_cache", f"gradients(past_length={past_length!r})")
        return super().gradients(ids, past_length, cotangent_h, cotangent_logits)


def strict(name: str, **claims) -> type:
    """A strict NumPy reference claiming the reference's capabilities with `claims` replaced."""
    caps = dataclasses.replace(NumpyAdapter.capabilities, **claims)
    return type(name, (_Strict,), {"capabilities": caps, "__doc__": f"NumPy reference claiming {claims}"})


# One capability switched off at a time, and combinations real implementations have
NoCache = strict("NoCache", kv_cache=False)
NoTiedHead = strict("NoTiedHead", tied_head=False)
NoInit = strict("NoInit", init=False)
NoGradients = strict("NoGradients", gradients=False)
ImmutableTables = strict("ImmutableTables", mutable_tables=False)
OnlySmall = strict("OnlySmall", sizes=(768,))
OnlyMedium = strict("OnlyMedium", sizes=(1024,))
Float32Only = strict("Float32Only", dtypes=("float32",))
Float16Only = strict("Float16Only", dtypes=("float16",))
NoDevice = strict("NoDevice", devices=())
# picoGPT-like: a forward for inference from loaded weights, nothing else
PicoGPTLike = strict("PicoGPTLike", kv_cache=False, init=False, gradients=False, mutable_tables=False)

ALL = [
    NoCache,
    NoTiedHead,
    NoInit,
    NoGradients,
    ImmutableTables,
    OnlySmall,
    OnlyMedium,
    Float32Only,
    Float16Only,
    NoDevice,
    PicoGPTLike,
]
