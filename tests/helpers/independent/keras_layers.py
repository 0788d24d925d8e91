"""GPT-2's embedding and tied head in Keras 3 as its guides write a token-and-position
embedding layer: two keras.layers.Embedding (RandomNormal initialisers at the official stds),
positions from ops.arange offset by the cache, and the tied head ops.matmul(h, transpose of the
token embedding's matrix). Backend-neutral: it runs on whichever backend Keras was started
with (TensorFlow by default). The gathers of some backends clamp, so the range checks are the
layer's own, on the concrete ids before the lookups."""

from __future__ import annotations

import operator

import keras
import numpy as np
from keras import ops

from gpt2_conformance.api.adapter import Adapter, AdapterConfig, Capabilities

VOCAB, CONTEXT = 50257, 1024


class TokenAndPositionEmbedding(keras.layers.Layer):
    def __init__(self, n_embd: int, seed: int | None = None, **kwargs):
        super().__init__(**kwargs)
        seeds = keras.random.SeedGenerator(seed)  # one stream: the two tables get different draws
        self.token_emb = keras.layers.Embedding(
            VOCAB, n_embd, embeddings_initializer=keras.initializers.RandomNormal(stddev=0.02, seed=seeds)
        )
        self.pos_emb = keras.layers.Embedding(
            CONTEXT, n_embd, embeddings_initializer=keras.initializers.RandomNormal(stddev=0.01, seed=seeds)
        )

    def call(self, x, past_length=0):
        if len(x.shape) != 2:
            raise ValueError(f"Expected token ids of shape (batch, seq_len), received shape {tuple(x.shape)}")
        seq_len = x.shape[1]
        if past_length + seq_len > CONTEXT:
            raise ValueError(f"past_length + seq_len = {past_length + seq_len} exceeds the {CONTEXT} positions")
        ids = ops.convert_to_numpy(x)
        if ids.size and (ids.min() < 0 or ids.max() >= VOCAB):
            raise ValueError(f"token ids must be in [0, {VOCAB}), received values from {ids.min()} to {ids.max()}")
        positions = ops.arange(past_length, past_length + seq_len)
        return self.token_emb(x) + self.pos_emb(positions)

    def logits(self, h):
        return ops.matmul(h, ops.transpose(self.token_emb.embeddings))


class Adapter(Adapter):
    capabilities = Capabilities()

    def __init__(self, config: AdapterConfig = AdapterConfig()):
        super().__init__(config)
        self.layer = self._built(None)

    def _built(self, seed):
        layer = TokenAndPositionEmbedding(self.config.n_embd, seed=seed)
        layer(np.zeros((1, 1), "int32"))
        return layer

    def load_tables(self, wte, wpe):
        self.layer.token_emb.embeddings.assign(wte)
        self.layer.pos_emb.embeddings.assign(wpe)

    def tables(self):
        return (
            ops.convert_to_numpy(self.layer.token_emb.embeddings).copy(),
            ops.convert_to_numpy(self.layer.pos_emb.embeddings).copy(),
        )

    def init_tables(self, seed):
        self.layer = self._built(seed)

    def assign_wte_row(self, index, values):
        table = self.layer.token_emb.embeddings
        table.assign(ops.slice_update(table, (index, 0), ops.expand_dims(ops.convert_to_tensor(values), 0)))

    def parameters(self):
        return {w.path: tuple(w.shape) for w in self.layer.trainable_weights}

    def embed(self, ids, past_length=0):
        if not np.issubdtype(ids.dtype, np.integer):
            raise TypeError(f"token ids must be integers, got {ids.dtype}")
        past_length = operator.index(past_length)
        if past_length < 0:
            raise ValueError(f"past_length must be >= 0, got {past_length}")
        return ops.convert_to_numpy(self.layer(np.ascontiguousarray(ids), past_length=past_length))

    def logits(self, h_final):
        return ops.convert_to_numpy(self.layer.logits(h_final))
