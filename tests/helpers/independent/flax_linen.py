"""GPT-2's embedding and tied head in Flax (linen), as its examples write a language model:
two nn.Embed modules (normal initialisers at the official stds), positions jnp.arange offset by
the cache, and the tied head `wte.attend(h)` (Embed.attend: h @ embedding.T). The forward is
jitted; gradients by jax.grad of the same apply. A JAX gather clamps an out-of-range index
instead of failing, so the range checks run on the host, before the jitted call."""

from __future__ import annotations

import operator

import jax
import jax.numpy as jnp
import numpy as np
from flax import linen as nn

from gpt2_conformance.api.adapter import Adapter, AdapterConfig, Capabilities

jax.config.update("jax_enable_x64", False)
VOCAB, CONTEXT = 50257, 1024


class Embedding(nn.Module):
    n_embd: int

    def setup(self):
        self.wte = nn.Embed(VOCAB, self.n_embd, embedding_init=nn.initializers.normal(stddev=0.02))
        self.wpe = nn.Embed(CONTEXT, self.n_embd, embedding_init=nn.initializers.normal(stddev=0.01))

    def __call__(self, ids, past_length):
        positions = past_length + jnp.arange(ids.shape[1])
        return self.wte(ids) + self.wpe(positions)

    def logits(self, h):
        return self.wte.attend(h)

    def loss(self, ids, past_length, cotangent_h, cotangent_logits):
        h = self(ids, past_length)
        return jnp.sum(h * cotangent_h) + jnp.sum(self.logits(h) * cotangent_logits)


def check(ids: np.ndarray, past_length) -> int:
    if ids.ndim != 2:
        raise ValueError(f"ids must have shape [batch, length], got {ids.shape}")
    if not np.issubdtype(ids.dtype, np.integer):
        raise TypeError(f"ids must be integers, got {ids.dtype}")
    past_length = operator.index(past_length)
    if past_length < 0 or past_length + ids.shape[1] > CONTEXT:
        raise ValueError(f"positions {past_length}..{past_length + ids.shape[1] - 1} are outside [0, {CONTEXT})")
    if ids.size and (ids.min() < 0 or ids.max() >= VOCAB):
        raise ValueError(f"ids must be in [0, {VOCAB}); got {ids.min()}..{ids.max()}")
    return past_length


class Adapter(Adapter):
    capabilities = Capabilities(gradients=True)

    def __init__(self, config: AdapterConfig = AdapterConfig()):
        super().__init__(config)
        self.model = Embedding(config.n_embd)
        self.init_tables(0)
        self._embed = jax.jit(self.model.apply)
        self._logits = jax.jit(lambda p, h: self.model.apply(p, h, method=Embedding.logits))
        self._grad = jax.jit(jax.grad(lambda p, *args: self.model.apply(p, *args, method=Embedding.loss)))

    def init_tables(self, seed):
        self.params = self.model.init(jax.random.key(seed), jnp.zeros((1, 1), jnp.int32), 0)

    def load_tables(self, wte, wpe):
        self.params = {"params": {"wte": {"embedding": jnp.array(wte)}, "wpe": {"embedding": jnp.array(wpe)}}}

    def tables(self):
        p = self.params["params"]
        return np.array(p["wte"]["embedding"]), np.array(p["wpe"]["embedding"])

    def assign_wte_row(self, index, values):
        p = self.params["params"]
        wte = p["wte"]["embedding"].at[index].set(values)
        self.params = {"params": {"wte": {"embedding": wte}, "wpe": p["wpe"]}}

    def parameters(self):
        return {"/".join(k.key for k in path): v.shape for path, v in jax.tree_util.tree_leaves_with_path(self.params)}

    def embed(self, ids, past_length=0):
        past_length = check(ids, past_length)
        return np.asarray(self._embed(self.params, ids, past_length))

    def logits(self, h_final):
        return np.asarray(self._logits(self.params, h_final))

    def gradients(self, ids, past_length, cotangent_h, cotangent_logits):
        past_length = check(ids, past_length)
        grads = self._grad(self.params, ids, past_length, cotangent_h, cotangent_logits)["params"]
        return np.asarray(grads["wte"]["embedding"]), np.asarray(grads["wpe"]["embedding"])
