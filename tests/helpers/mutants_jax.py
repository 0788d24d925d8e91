"""The JAX mutant catalogue: JaxAdapter with one thing done the way JAX makes easy and wrong.

ALL: the mutants tests/test_kill_matrix.py runs the whole suite on, checking which clauses kill
each (FRAMEWORK_KILLS["jax"]). DIRECT: mutants tests/backends/test_jax.py checks directly, on
small tables, instead (the suite's draws do not reliably reach Int64Wraps; CheckifyErrorDropped
saves a suite run, see the comment in FRAMEWORK_KILLS["jax"]).

Imports jax at the top: import this module only where JAX is installed.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from gpt2_conformance.api.adapter import AdapterConfig
from gpt2_conformance.api.validation import check_ids_layout, check_past_length
from gpt2_conformance.backends.jax import model
from gpt2_conformance.backends.jax.adapter import JaxAdapter, _to_numpy

_raw_embed = jax.jit(lambda p, ids, past: p["wte"][ids] + p["wpe"][past + jnp.arange(ids.shape[1])][None])


class RawIndexing(JaxAdapter):
    """The plain JAX user's embedding: jnp.asarray(ids), wte[ids] + wpe[past + arange(T)],
    no bounds check. jnp indexing clamps (id 50257 -> row 50256, position 1024 -> 1023) and
    wraps -1 to the last row; it never raises (and jnp.asarray wraps int64 ids)."""

    def embed(self, ids, past_length=0):
        check_ids_layout(ids.shape, ids.dtype.name, np.issubdtype(ids.dtype, np.integer))
        past = check_past_length(past_length)
        return _to_numpy(_raw_embed(self.params, jax.device_put(jnp.asarray(ids), self._device), past))


_take_fill_embed = jax.jit(
    lambda p, tokens, positions: (
        jnp.take(p["wte"], tokens, axis=0)  # mode="fill": NaN rows, no error
        + p["wpe"][positions]
    )
)


class TakeFillsNaN(JaxAdapter):
    """The host-side checks kept, the token check dropped, and jnp.take for the gather: its
    default mode="fill" returns NaN rows for ids >= 50257 (and still wraps -1)."""

    def embed(self, ids, past_length=0):
        return self._flat_forward(_take_fill_embed, ids, past_length)


class CheckifyErrorDropped(JaxAdapter):
    """The kernel is checkified, but checkify returns the error as a value and nothing
    raises until someone calls .get() or .throw() on it; this adapter never does, so a bad
    id is clamped (50257) or wrapped (-1) by the gather as if there were no check."""

    def embed(self, ids, past_length=0):
        def error_dropped(params, tokens, positions):
            _error, h = model._embed_jit(params, tokens, positions)  # the error, never looked at
            return h

        return self._flat_forward(error_dropped, ids, past_length)


class UntiedHeadCopy(JaxAdapter):
    """A separate "head" parameter, copied from wte at load and init: same logits at first,
    but an update to wte does not reach it, dwte lacks the projection role, and there is a
    third [V, d] parameter."""

    def __init__(self, config=AdapterConfig()):
        super().__init__(config)
        self.params["head"] = jnp.array(self.params["wte"])

    def load_tables(self, wte, wpe):
        super().load_tables(wte, wpe)
        self.params["head"] = self._put(wte, self._dtype)

    def init_tables(self, seed):
        super().init_tables(seed)
        self.params["head"] = jnp.array(self.params["wte"])

    def logits(self, h_final):
        h_final = np.asarray(h_final)
        if (
            h_final.ndim != 3 or h_final.shape[-1] != self.config.n_embd
        ):  # the reference's refusal; the defect is the copy
            raise ValueError(f"h_final.shape={h_final.shape}, but should be (B, T, {self.config.n_embd})")
        return _to_numpy(model.logits({"wte": self.params["head"]}, self._put(h_final, self._dtype)))

    def gradients(self, ids, past_length, cotangent_h, cotangent_logits):
        ids = self._put(self._ids_int32(ids))

        def forward(p):
            h = model._lookup(p, ids, past_length)
            return h, model._logits({"wte": p["head"]}, h)

        _, pullback = jax.vjp(forward, self.params)
        (grads,) = pullback((self._put(cotangent_h, self._dtype), self._put(cotangent_logits, self._dtype)))
        return tuple(np.asarray(grads[name], np.float32) for name in ("wte", "wpe"))


class Int64Wraps(JaxAdapter):
    """int64 ids cast to int32 on the host with no range check (what jnp.asarray does with
    x64 off): 2**32 + 5 becomes 5, a valid id, so the device check cannot see it."""

    def _ids_int32(self, ids):
        check_ids_layout(ids.shape, ids.dtype.name, np.issubdtype(ids.dtype, np.integer))
        return ids.astype(np.int32)


DIRECT = [CheckifyErrorDropped, Int64Wraps]  # checked directly in tests/backends/test_jax.py

ALL = [
    obj
    for name, obj in sorted(globals().items())
    if isinstance(obj, type)
    and issubclass(obj, JaxAdapter)
    and obj is not JaxAdapter
    and not name.startswith("_")
    and obj not in DIRECT
]
