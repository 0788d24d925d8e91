"""GPT-2's embedding and tied head in TensorFlow 2 as openai/gpt-2's model.py writes it,
made eager: a tf.Module holding wte and wpe as tf.Variables from random_normal_initializer at
the official stds, h = tf.gather(wte, X) + tf.gather(wpe, past_length + tf.range(T)), the head
tf.matmul(h, wte, transpose_b=True), gradients by tf.GradientTape. tf.gather on the CPU refuses
an out-of-range index itself (InvalidArgumentError naming the index and the range); the module
checks only what tf.gather cannot see: the rank, and where the positions start."""

from __future__ import annotations

import numpy as np
import tensorflow as tf

from gpt2_conformance.api.adapter import Adapter, AdapterConfig, Capabilities

VOCAB, CONTEXT = 50257, 1024


class Embedding(tf.Module):
    def __init__(self, n_embd: int, seed: int | None = None):
        super().__init__()
        wpe_seed = None if seed is None else seed + 1  # one seed for both would draw wpe = wte[:1024] / 2
        self.wte = tf.Variable(tf.random_normal_initializer(stddev=0.02, seed=seed)([VOCAB, n_embd]), name="wte")
        self.wpe = tf.Variable(tf.random_normal_initializer(stddev=0.01, seed=wpe_seed)([CONTEXT, n_embd]), name="wpe")

    def __call__(self, X, past_length=0):
        if X.shape.rank != 2:
            raise ValueError(f"X must be [batch, sequence], got shape {X.shape}")
        if not X.dtype.is_integer:
            raise TypeError(f"X must hold token ids, got dtype {X.dtype.name}")
        if not isinstance(past_length, int) or past_length < 0:
            raise ValueError(f"past_length must be a non-negative int, got {past_length!r}")
        positions = past_length + tf.range(tf.shape(X)[1], dtype=X.dtype)
        return tf.gather(self.wte, X) + tf.gather(self.wpe, positions)

    def logits(self, h):
        return tf.matmul(h, self.wte, transpose_b=True)


class Adapter(Adapter):
    capabilities = Capabilities(gradients=True)

    def __init__(self, config: AdapterConfig = AdapterConfig()):
        super().__init__(config)
        self.model = Embedding(config.n_embd)

    def load_tables(self, wte, wpe):
        self.model.wte.assign(wte)
        self.model.wpe.assign(wpe)

    def tables(self):
        return self.model.wte.numpy(), self.model.wpe.numpy()

    def init_tables(self, seed):
        self.model = Embedding(self.config.n_embd, seed=seed)

    def assign_wte_row(self, index, values):
        self.model.wte[index].assign(values)

    def parameters(self):
        return {v.name: tuple(v.shape) for v in self.model.trainable_variables}

    def _past(self, past_length):
        return past_length.item() if isinstance(past_length, np.integer | np.ndarray) else past_length

    def embed(self, ids, past_length=0):
        return self.model(tf.constant(ids), self._past(past_length)).numpy()

    def logits(self, h_final):
        return self.model.logits(tf.constant(h_final)).numpy()

    def gradients(self, ids, past_length, cotangent_h, cotangent_logits):
        with tf.GradientTape() as tape:
            h = self.model(tf.constant(ids), self._past(past_length))
            loss = tf.reduce_sum(h * cotangent_h) + tf.reduce_sum(self.model.logits(h) * cotangent_logits)
        grad_wte, grad_wpe = tape.gradient(loss, [self.model.wte, self.model.wpe])
        # a gathered variable's gradient comes back as IndexedSlices
        return tf.convert_to_tensor(grad_wte).numpy(), tf.convert_to_tensor(grad_wpe).numpy()
