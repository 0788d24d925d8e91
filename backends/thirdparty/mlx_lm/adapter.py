"""Adapter for mlx-lm's GPT-2 (`mlx_lm.models.gpt2.Model`, Apple's MLX), the implementation
under test -- not a reimplementation. Built from an explicit ModelArgs (no model hub); runs on
MLX's CPU backend (the `mlx[cpu]` wheel).

What is observed, and how (Capabilities.black_box):

- h: the input of block 0 inside `GPT2Model.__call__` (mlx_lm/models/gpt2.py L130-149):
  `self.wte(inputs)`, then `+= self.wpe(mx.arange(L) + cache[0].offset)`. MLX has no forward
  hooks, so block 0's class is swapped for a subclass that records its input and, by default,
  ends the forward there (StopAtBlock0) -- the blocks and ln_f after it cannot change h.
  FULL_FORWARD = True records the same input and lets the whole forward run
  (tests/backends/test_mlx_lm.py checks that both give the same bits and that the model's own output
  is unchanged by the recorder).
- the cache offset: a real mlx-lm prompt cache (`make_prompt_cache(model)`, one KVCache per
  block), filled through the library's own `KVCache.update_and_fetch` with past_length zero
  key/value entries, so `cache[0].offset` is past_length as after a real prefill. MLX is lazy
  and the short-cut never reads the entries, so they are never materialised.
- logits: `model.model.wte.as_linear(h)` (`x @ self.weight.T`), the tied head exactly as
  `Model.__call__` applies it (gpt2.py L167).
- init: `mx.random.seed(seed)` then `Model(ModelArgs(...))`: mlx.nn.Embedding's own init.
- gradients: `mlx.nn.value_and_grad(model, loss)`, MLX's autodiff over the model's own
  trainable parameters.

The adapter adds no checks of its own: ids go to the model as mx.array unchanged, so
whatever MLX does with out-of-range ids or positions is what the suite sees -- MLX's gather
does no bounds check (an id far outside the table reads unmapped memory and the process dies
with SIGSEGV; the runner turns that into a FAIL of the clause in flight). past_length has no
counterpart in mlx-lm's API (the offset is the number of cached entries), so it becomes the
length of the cached key array, given to MLX as an array dimension.
"""

from __future__ import annotations

import mlx.core as mx
import mlx.nn as nn
import mlx_lm
import numpy as np
from mlx.utils import tree_flatten
from mlx_lm.models import gpt2 as mlx_gpt2
from mlx_lm.models.cache import make_prompt_cache

from gpt2_conformance.api import gpt2
from gpt2_conformance.api.adapter import Adapter, AdapterConfig, Capabilities
from gpt2_conformance.api.validation import check_tables

MLX_DTYPES = {"float32": mx.float32, "float16": mx.float16, "bfloat16": mx.bfloat16}
_N_HEAD = {768: 12, 1024: 16, 1280: 20, 1600: 25}  # GPT-2's released head counts


class StopAtBlock0(Exception):
    """Raised by the recording block to end the forward once h is recorded."""


class _RecordingBlock(mlx_gpt2.TransformerBlock):
    """mlx-lm's TransformerBlock with its input recorded (block 0's input is h).

    Installed by swapping the class of the model's own block 0, so the parameter tree, the
    names and the weights stay the model's."""

    def __call__(self, x, mask=None, cache=None):
        self._gpt2c_record(x)  # a plain attribute: not an mx.array, so not a parameter
        if not self._gpt2c_full_forward():
            raise StopAtBlock0
        return super().__call__(x, mask, cache)


def model_args(n_embd: int) -> mlx_gpt2.ModelArgs:
    """GPT-2's hyperparameters at width n_embd; one block (the embedding does not care)."""
    return mlx_gpt2.ModelArgs(
        model_type="gpt2",
        n_ctx=gpt2.N_CTX,
        n_embd=n_embd,
        n_head=_N_HEAD.get(n_embd, 1),
        n_layer=1,
        n_positions=gpt2.N_CTX,
        layer_norm_epsilon=1e-5,
        vocab_size=gpt2.N_VOCAB,
    )


def from_numpy(a) -> mx.array:
    """The same values as an mx.array. mx.array reads numpy through DLPack, which refuses
    negative strides (a reversed view), so a numpy array is first copied in C order; its
    dtype and shape are kept, so MLX still sees exactly what the caller passed."""
    return mx.array(np.array(a, order="C", copy=True) if isinstance(a, np.ndarray) else a)


def to_numpy(a: mx.array) -> np.ndarray:
    if a.dtype == mx.bfloat16:
        a = a.astype(mx.float32)  # numpy has no bfloat16; the upcast is exact
    return np.array(a, copy=True)


class MlxLmAdapter(Adapter):
    capabilities = Capabilities(
        dtypes=tuple(MLX_DTYPES),
        devices=("cpu",),
        gradients=True,
        black_box="h = input of block 0 in GPT2Model.__call__; offset from an mlx-lm KVCache holding "
        "past_length entries; logits = wte.as_linear(h)",
    )
    FULL_FORWARD = False  # True: record block 0's input and run the complete forward

    @classmethod
    def implementation(cls) -> str:
        # mlx.core's stubs (mlx/core/__init__.pyi) lack the __version__ the module has
        return f"mlx-lm {mlx_lm.__version__} models.gpt2.Model (mlx {mx.__version__}, CPU)"  # type: ignore[attr-defined, unused-ignore]  # mlx types it where installed

    def __init__(self, config: AdapterConfig = AdapterConfig()):
        super().__init__(config)
        self.dtype = self.framework_dtype(MLX_DTYPES)
        self.args = model_args(config.n_embd)
        # MLX is lazy: the random init drawn here is never computed if load_tables replaces it
        self._set_model(mlx_gpt2.Model(self.args))

    def _set_model(self, model: mlx_gpt2.Model) -> None:
        model.set_dtype(self.dtype)
        model.eval()
        block = model.model.h[0]
        block.__class__ = _RecordingBlock
        block._gpt2c_record = self._record
        block._gpt2c_full_forward = lambda: self.FULL_FORWARD
        self.model = model
        self._captured: mx.array | None = None

    def _record(self, x):
        self._captured = x

    # -- tables -------------------------------------------------------------------
    def load_tables(self, wte, wpe):
        check_tables(wte, wpe, self.config.n_embd)  # the protocol's float32 [V, d], [C, d]: our glue takes no other
        self.model.model.wte.weight = from_numpy(wte).astype(self.dtype)
        self.model.model.wpe.weight = from_numpy(wpe).astype(self.dtype)
        mx.eval(self.model.model.wte.weight, self.model.model.wpe.weight)  # own the copy now

    def tables(self):
        return to_numpy(self.model.model.wte.weight), to_numpy(self.model.model.wpe.weight)

    def init_tables(self, seed):
        mx.random.seed(seed)
        self._set_model(mlx_gpt2.Model(self.args))  # nn.Embedding's own init for wte and wpe

    def assign_wte_row(self, index, values):
        # in-place update of the array the head also reads (mx.array __setitem__)
        self.model.model.wte.weight[index] = from_numpy(np.asarray(values, np.float32)).astype(self.dtype)

    def parameters(self):
        keep = ("model.wte.", "model.wpe.")  # Model has no lm_head: the head is wte.as_linear
        return {n: tuple(p.shape) for n, p in tree_flatten(self.model.trainable_parameters()) if n.startswith(keep)}

    # -- forward ------------------------------------------------------------------
    def _cache(self, batch: int, past_length):
        """mlx-lm's own prompt cache, past_length (zero) entries written by update_and_fetch."""
        cache = make_prompt_cache(self.model)
        head_dim = self.args.n_embd // self.args.n_head
        kv = mx.zeros((batch, self.args.n_head, past_length, head_dim), self.dtype)
        cache[0].update_and_fetch(kv, kv)
        return cache

    def _h(self, ids: mx.array, past_length) -> mx.array:
        """h from the model's own forward (lazy: traced by value_and_grad in gradients)."""
        self._captured = None
        try:
            self.model.model(ids, cache=self._cache(ids.shape[0], past_length))
        except StopAtBlock0:
            pass
        assert self._captured is not None  # block 0 records its input (_record) before it runs
        return self._captured

    def embed(self, ids, past_length=0):
        h = self._h(from_numpy(ids), past_length)
        mx.eval(h)
        return to_numpy(h)

    def logits(self, h_final):
        # a bfloat16 adapter gets float32 arrays holding bfloat16 values: hand the head the
        # model's dtype, as the model's own h would be
        h = from_numpy(h_final).astype(self.dtype)
        return to_numpy(self.model.model.wte.as_linear(h))

    def gradients(self, ids, past_length, cotangent_h, cotangent_logits):
        cot_h = from_numpy(cotangent_h).astype(self.dtype)
        cot_l = from_numpy(cotangent_logits).astype(self.dtype)
        ids = from_numpy(ids)

        def loss(model_ids):
            h = self._h(model_ids, past_length)
            logits = self.model.model.wte.as_linear(h)
            return (cot_h * h).sum() + (cot_l * logits).sum()

        _, grads = nn.value_and_grad(self.model, loss)(ids)
        d_wte, d_wpe = grads["model"]["wte"]["weight"], grads["model"]["wpe"]["weight"]
        return to_numpy(d_wte.astype(mx.float32)), to_numpy(d_wpe.astype(mx.float32))
