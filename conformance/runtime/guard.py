"""What the suite's tests hold instead of the adapter: a guard that keeps two promises.

1. The suite never calls what the adapter did not claim. Every call is checked against the
   adapter's Capabilities before it is forwarded: embed(past_length != 0) needs kv_cache,
   logits needs tied_head, init_tables needs init, gradients needs gradients (and tied_head
   when the logits' cotangent is not zero), assign_wte_row needs mutable_tables, and building
   an adapter needs its size, dtype and device claimed. A call outside the claims is the
   suite's own bug: it raises SuiteError (reported as ERROR, never against the adapter) and is
   never forwarded.
2. The suite never blames an implementation for its own failure. Every exception that leaves
   the adapter is marked as the adapter's (raised_by_adapter); the plugin reports an unmarked
   exception, one the suite's own code or data raised, as ERROR, not FAIL.
"""

from __future__ import annotations

import numbers

import numpy as np

from gpt2_conformance.api.adapter import AdapterConfig, Capabilities


class SuiteError(Exception):
    """The suite could not judge a clause: its own data, code or input failed (a missing
    fixture, an unreadable --checkpoint, a call it should not have made). Reported as ERROR."""


_ADAPTER_EXCEPTIONS: dict[int, BaseException] = {}  # for exception types that take no attribute


def mark_raised_by_adapter(exc: BaseException, method: str) -> None:
    try:
        exc.__gpt2c_adapter_method__ = method
    except (AttributeError, TypeError):
        _ADAPTER_EXCEPTIONS[id(exc)] = exc  # kept alive, so the id stays this exception's


def raised_by_adapter(exc: BaseException) -> str | None:
    """The adapter method an exception left from, or None if the suite raised it."""
    method = getattr(exc, "__gpt2c_adapter_method__", None)
    if method is None and _ADAPTER_EXCEPTIONS.get(id(exc)) is exc:
        method = "adapter"
    return method


def is_zero_offset(past_length) -> bool:
    """past_length is 0 in one of its valid forms (int, numpy integer, 0-d integer array)."""
    if isinstance(past_length, (bool, np.bool_)):
        return False
    if isinstance(past_length, np.ndarray):
        return past_length.ndim == 0 and np.issubdtype(past_length.dtype, np.integer) and int(past_length) == 0
    return isinstance(past_length, numbers.Integral) and int(past_length) == 0


class GuardedAdapter:
    """Forwards to `inner` after checking the claim each call needs (module docstring)."""

    def __init__(self, inner, capabilities: Capabilities):
        self._inner, self._caps = inner, capabilities

    def _need(self, requirement: str, call: str) -> None:
        if not self._caps.claims(requirement):
            raise SuiteError(f"the suite called {call}, which needs {requirement}, but the adapter does not "
                             "claim it (a bug in the suite: a clause must not call what is not claimed)")

    def _forward(self, method: str, *args):
        try:
            return getattr(self._inner, method)(*args)
        except Exception as exc:
            mark_raised_by_adapter(exc, method)
            raise

    # -- the protocol, each call with the claim it needs --------------------------------
    def load_tables(self, wte, wpe):
        return self._forward("load_tables", wte, wpe)

    def tables(self):
        return self._forward("tables")

    def parameters(self):
        return self._forward("parameters")

    def embed(self, ids, past_length=0):
        if not is_zero_offset(past_length):
            self._need("kv_cache", f"embed(past_length={past_length!r})")
        return self._forward("embed", ids, past_length)

    def logits(self, h_final):
        self._need("tied_head", "logits(h_final)")
        return self._forward("logits", h_final)

    def init_tables(self, seed):
        self._need("init", f"init_tables(seed={seed})")
        return self._forward("init_tables", seed)

    def assign_wte_row(self, index, values):
        self._need("mutable_tables", f"assign_wte_row({index})")
        return self._forward("assign_wte_row", index, values)

    def gradients(self, ids, past_length, cotangent_h, cotangent_logits):
        self._need("gradients", "gradients(...)")
        if np.any(cotangent_logits):
            self._need("tied_head", "gradients(cotangent_logits != 0)")
        if not is_zero_offset(past_length):
            self._need("kv_cache", f"gradients(past_length={past_length!r})")
        return self._forward("gradients", ids, past_length, cotangent_h, cotangent_logits)

    def __getattr__(self, name):  # anything else (an adapter's own switches) is the adapter's
        return getattr(self._inner, name)


class GuardedFactory:
    """Builds guarded adapters; refuses (SuiteError) a config whose size, dtype or device is
    not claimed. Attributes other than the call (capabilities, WAIVERS, ...) are the factory's."""

    def __init__(self, factory, capabilities: Capabilities):
        self._factory, self._caps = factory, capabilities

    def __call__(self, config: AdapterConfig) -> GuardedAdapter:
        for requirement in (f"size:{config.n_embd}", f"dtype:{config.dtype}", f"device:{config.device}"):
            if not self._caps.claims(requirement):
                raise SuiteError(f"the suite asked for an adapter with {requirement}, which the adapter does "
                                 "not claim (a bug in the suite)")
        try:
            instance = self._factory(config)
        except Exception as exc:
            mark_raised_by_adapter(exc, "__init__")
            raise
        return GuardedAdapter(instance, self._caps)

    def __getattr__(self, name):
        return getattr(self._factory, name)
