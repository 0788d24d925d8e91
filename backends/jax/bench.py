"""Bench hooks for the JAX backend (same names in every backends/<fw>/bench.py).

Modes:
  suite    what JaxAdapter runs: backends/jax/model.py's embed_tokens, jax.jit(checkify(...))
           with the token-id check (min/max) inside the compiled kernel and error.get() on the
           host, over the flat tokens and positions model.flat_tokens makes (B*T of the bench's
           shapes is a power of two: nothing is padded).
  flag     jax.jit of gather + add that also returns an in-range flag (min/max of the ids in
           the same kernel); the host raises on it before h is returned, as TF's xla mode does:
           how much of checkify's error plumbing a plain flag saves.
  nocheck  jax.jit of the bare gather + add (model._gather_add), no id check: shows what the
           check costs. Comparison only (out-of-range ids would be silently clamped).
Every forward mode runs over the same flat tokens and positions, and returns the kernel's flat
rows [bucket(B*T), d] (h is the first B*T of them; no reshape is timed).
backward: jax.vjp of the [B, T] lookup, jitted (with checkify in suite), as the adapter's
gradients; XLA prunes the unused forward.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import checkify

from gpt2_conformance.api.adapter import AdapterConfig
from gpt2_conformance.api.errors import TokenIdOutOfRangeError
from gpt2_conformance.backends.jax import BACKEND, model

MODES, CHECK = BACKEND.mode_table()  # declared once, in the registry entry (__init__.py)
SUITE_MODE = "suite"
FASTEST_MODE = "flag"


def available(device: str) -> tuple[bool, str]:
    from gpt2_conformance.backends.jax.adapter import JaxAdapter

    return JaxAdapter.device_available(device)


def threads_setting() -> str:
    return f"XLA CPU thread pool (all cores); devices={[str(d) for d in jax.devices()]}"


def _backward(params, ids, past_length, dh):
    _, pullback = jax.vjp(lambda p: model._lookup(p, ids, past_length), params)
    (grads,) = pullback(dh)
    return grads["wte"], grads["wpe"]


def _checked_backward(params, ids, past_length, dh):
    model._check_token_ids(ids, params["wte"].shape[0])
    return _backward(params, ids, past_length, dh)


_backward_jit = jax.jit(_backward)
_checked_backward_jit = jax.jit(checkify.checkify(_checked_backward))
_gather_add_jit = jax.jit(model._gather_add)


@jax.jit
def _gather_add_flag_jit(params, tokens, positions):
    if tokens.size == 0:  # static: min/max of an empty array is undefined, and nothing is out of range
        return model._gather_add(params, tokens, positions), jnp.bool_(True)
    in_range = (tokens.min() >= 0) & (tokens.max() < params["wte"].shape[0])
    return model._gather_add(params, tokens, positions), in_range


class Runner:
    def __init__(self, wte, wpe, mode: str, device: str):
        from gpt2_conformance.backends.jax.adapter import JaxAdapter

        self.mode = mode
        self.adapter = JaxAdapter(AdapterConfig(n_embd=wte.shape[1], device=device))
        self.adapter.load_tables(wte, wpe)
        self.params = self.adapter.params
        self._device = jax.devices(device)[0]

    def put(self, array):
        return jax.device_put(array, self._device)

    def sync(self, out):
        return jax.block_until_ready(out)

    def make(self, w, ids, past_length, dh=None, h=None):
        params = self.params
        if w.kind == "forward":
            tokens, positions = (self.put(a) for a in model.flat_tokens(np.asarray(ids, np.int32), past_length))
            if self.mode == "suite":
                return lambda: model.embed_tokens(params, tokens, positions)
            if self.mode == "flag":

                def forward():
                    # the gather clamps a bad id; h is never returned unless the flag is true
                    h, in_range = _gather_add_flag_jit(params, tokens, positions)
                    if not bool(in_range):
                        raise TokenIdOutOfRangeError("token id outside the wte table")
                    return h

                return forward
            return lambda: _gather_add_jit(params, tokens, positions)
        if self.mode == "flag":
            return None  # forward only: the suite mode times backward and logits
        if w.kind == "backward":
            if self.mode == "suite":

                def backward():
                    error, out = _checked_backward_jit(params, ids, past_length, dh)
                    if error.get():
                        raise TokenIdOutOfRangeError(error.get())
                    return out

                return backward
            return lambda: _backward_jit(params, ids, past_length, dh)
        if w.kind == "logits" and self.mode == "suite":
            return lambda: model.logits(params, h)
        return None
