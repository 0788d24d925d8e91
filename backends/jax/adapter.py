"""JAX adapter: numpy in, numpy out, around backends/jax/model.py (compiled with jax.jit).

JAX arrays are immutable, so the adapter holds the params dict and rebinds it; wte is one
entry that the gather and the head both read. Tables and work live on the requested device
(jax.device_put). x64 stays off (it is process-global and would change other code), so ids
reach the device as int32; see _ids_int32 for the int64 case.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from gpt2_conformance.api import gpt2
from gpt2_conformance.api.adapter import Adapter, AdapterConfig, Capabilities
from gpt2_conformance.api.errors import TokenIdOutOfRangeError
from gpt2_conformance.api.machine import immutable, zero_table
from gpt2_conformance.api.validation import check_ids_layout, check_tables, describe_bad_id
from gpt2_conformance.backends.jax import model

_JAX_DTYPES = {"float32": jnp.float32, "float16": jnp.float16, "bfloat16": jnp.bfloat16}
_INT32 = np.iinfo(np.int32)


def _to_numpy(x) -> np.ndarray:
    """A fresh numpy array; bfloat16 comes back as float32 holding the same values (exact)."""
    if x.dtype == jnp.bfloat16:
        x = x.astype(jnp.float32)
    return np.array(x)


def _rows_to_numpy(h, n: int) -> np.ndarray:
    """A fresh numpy array of the first n rows of h; bfloat16 widened to float32 on the host
    (exact), so no conversion is compiled per shape."""
    rows = np.asarray(h)[:n]
    return rows.astype(np.float32) if h.dtype == jnp.bfloat16 else np.array(rows)


class JaxAdapter(Adapter):
    capabilities = Capabilities(dtypes=tuple(_JAX_DTYPES), devices=("cpu", "gpu"), gradients=True)

    def __init__(self, config: AdapterConfig = AdapterConfig()):
        super().__init__(config)
        self._dtype = self.framework_dtype(_JAX_DTYPES)
        self._device = jax.devices(config.device)[0]
        d = config.n_embd
        # zeros that take no memory until loaded (machine.zero_table), most adapters are loaded
        # right after they are made
        self.params = {
            "wte": self._put(zero_table((gpt2.N_VOCAB, d), np.float32), self._dtype),
            "wpe": self._put(zero_table((gpt2.N_CTX, d), np.float32), self._dtype),
        }

    @classmethod
    def device_available(cls, device):
        if device == "cpu":
            return True, ""
        try:
            if jax.devices(device):
                return True, ""
        except RuntimeError:  # no backend for this platform
            pass
        return False, f"JAX sees no {device.upper()} on this machine"

    # -- bridge ---------------------------------------------------------------------
    def _put(self, array, dtype=None):
        # on CPU device_put may share the caller's numpy buffer: only memory nothing can write
        # into is shared (the suite's read-only tables: 154 MB not copied per load)
        out = jax.device_put(array, self._device, may_alias=isinstance(array, np.ndarray) and immutable(array))
        return out if dtype is None else out.astype(dtype)  # the framework's round-to-nearest-even cast

    def _ids_int32(self, ids: np.ndarray) -> np.ndarray:
        if not isinstance(ids, np.ndarray):
            raise TypeError(f"ids must be a numpy array, got {type(ids).__name__}")
        check_ids_layout(ids.shape, ids.dtype.name, np.issubdtype(ids.dtype, np.integer))
        if ids.dtype.itemsize >= 4 and ids.dtype != np.int32 and ids.size:
            # Forced host check: with x64 off JAX holds int32, and the cast wraps silently
            # (2**32 + 5 -> 5, 2**40 -> 0: valid ids). So ids that do not fit int32 are
            # rejected here; those that fit are cast exactly and the device checks [0, V).
            lo, hi = ids.min(), ids.max()
            if lo < _INT32.min or hi > _INT32.max:
                raise TokenIdOutOfRangeError(describe_bad_id(ids, (ids < _INT32.min) | (ids > _INT32.max)))
        return ids.astype(np.int32, copy=False)

    # -- tables ---------------------------------------------------------------------
    def load_tables(self, wte, wpe):
        check_tables(wte, wpe, self.config.n_embd)
        self.params = {"wte": self._put(wte, self._dtype), "wpe": self._put(wpe, self._dtype)}

    def tables(self):
        return _to_numpy(self.params["wte"]), _to_numpy(self.params["wpe"])

    def init_tables(self, seed):
        with jax.default_device(self._device):
            self.params = model.init_params(jax.random.key(seed), self.config.n_embd, self._dtype)

    def assign_wte_row(self, index, values):
        self.params = model.set_wte_row(self.params, int(index), self._put(np.asarray(values, np.float32)))

    def parameters(self):
        return {name: tuple(p.shape) for name, p in self.params.items()}

    # -- forward --------------------------------------------------------------------
    def embed(self, ids, past_length=0):
        return self._flat_forward(model.embed_tokens, ids, past_length)

    def _flat_forward(self, kernel, ids, past_length):
        """h [B, T, d] as numpy from kernel(params, tokens, positions) -> flat rows, run over
        model.flat_tokens of the host-checked ids (the JAX mutants swap the kernel)."""
        ids = self._ids_int32(ids)
        tokens, positions = model.flat_tokens(ids, past_length, self.params["wpe"].shape[0])
        h = kernel(self.params, self._put(tokens), self._put(positions))
        return _rows_to_numpy(h, ids.size).reshape(*ids.shape, h.shape[-1])

    def logits(self, h_final):
        h_final = np.asarray(h_final)
        if h_final.ndim != 3 or h_final.shape[-1] != self.config.n_embd:
            raise ValueError(f"h_final.shape={h_final.shape}, but should be (B, T, {self.config.n_embd})")
        return _to_numpy(model.logits(self.params, self._put(h_final, self._dtype)))

    def gradients(self, ids, past_length, cotangent_h, cotangent_logits):
        grads = model.gradients(
            self.params,
            self._put(self._ids_int32(ids)),
            past_length,
            self._put(cotangent_h, self._dtype),
            self._put(cotangent_logits, self._dtype),
        )
        return tuple(_to_numpy(grads[name]).astype(np.float32, copy=False) for name in ("wte", "wpe"))
