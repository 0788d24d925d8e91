"""TensorFlow adapter: numpy in, numpy out, around backends/tensorflow/model.py.

Execution mode: the embedding and the head are tf.functions (graph mode, no XLA: under
jit_compile=True tf.gather clamps and the id assert is dropped); load_tables, assign_wte_row
and gradients (tf.GradientTape) run eagerly around them. Tables are Variables on the
requested device, created from the first tables loaded (one copy, no zero fill first), and only
ever read or assigned whole: a sparse access (a gather on the Variable, a sliced assign) puts
it in copy-on-read mode for the rest of its life, and each later read copies all of it.
"""

from __future__ import annotations

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")  # before TF loads: hides its startup INFO and cuInit noise

import numpy as np
import tensorflow as tf

from gpt2_conformance.api import gpt2
from gpt2_conformance.api.adapter import Adapter, AdapterConfig, Capabilities
from gpt2_conformance.api.validation import check_tables, check_token_ids
from gpt2_conformance.backends.tensorflow.model import GPT2Embedding, initial_tables

_TF_DTYPES = {"float32": tf.float32, "float16": tf.float16, "bfloat16": tf.bfloat16}


class TensorFlowAdapter(Adapter):
    capabilities = Capabilities(dtypes=tuple(_TF_DTYPES), devices=("cpu", "gpu"), gradients=True)
    model_class = GPT2Embedding  # a subclass may swap the implementation (the tests' mutants do)

    def __init__(self, config: AdapterConfig = AdapterConfig()):
        super().__init__(config)
        self._dtype = self.framework_dtype(_TF_DTYPES)
        self._device = "/GPU:0" if config.device == "gpu" else "/CPU:0"
        self._model: GPT2Embedding | None = None

    @classmethod
    def device_available(cls, device):
        if device == "cpu":
            return True, ""
        if device == "gpu" and tf.config.list_physical_devices("GPU"):
            return True, ""
        return False, f"TensorFlow sees no {device.upper()} on this machine"

    @property
    def model(self) -> GPT2Embedding:
        if self._model is None:  # used before any tables were set: zeros, as the numpy adapter
            d = self.config.n_embd
            self._set_tables(tf.zeros([gpt2.N_VOCAB, d], self._dtype), tf.zeros([gpt2.N_CTX, d], self._dtype))
        assert self._model is not None  # _set_tables built it
        return self._model

    def _set_tables(self, wte, wpe):
        with tf.device(self._device):
            if self._model is None:
                self._model = self.model_class(wte, wpe)
            else:  # assign, so the traced tf.functions keep reading the same Variables
                self._model.wte.assign(wte)
                self._model.wpe.assign(wpe)

    def _to_numpy(self, t: tf.Tensor) -> np.ndarray:
        # numpy has no bfloat16: hand back float32 holding the bfloat16 values (exact)
        return (tf.cast(t, tf.float32) if t.dtype == tf.bfloat16 else t).numpy()

    # -- tables -------------------------------------------------------------------
    def load_tables(self, wte, wpe):
        check_tables(wte, wpe, self.config.n_embd)
        # tf.cast rounds to nearest even; the Variable (or assign) takes its own copy
        self._set_tables(tf.cast(wte, self._dtype), tf.cast(wpe, self._dtype))

    def tables(self):
        return self._to_numpy(self.model.wte), self._to_numpy(self.model.wpe)

    def init_tables(self, seed):
        with tf.device(self._device):
            self._set_tables(*initial_tables(self.config.n_embd, seed, self._dtype))

    def assign_wte_row(self, index, values):
        # the row scattered into wte's value, assigned whole: a sliced assign (or scatter_update)
        # would switch wte to copy-on-read for good (tensorflow/core/kernels/strided_slice_op.cc,
        # EnsureSparseVariableAccess), after which every embed and logits call copies 154 MB first
        wte = self.model.wte
        with tf.device(self._device):
            row = tf.cast(np.asarray(values)[None], self._dtype)
            wte.assign(tf.tensor_scatter_nd_update(wte, [[index]], row))

    def parameters(self):
        # tf.Module tracks each Variable once: the tied head adds none
        return {v.name.split(":")[0].split("/")[-1]: tuple(v.shape) for v in self.model.trainable_variables}

    # -- forward ------------------------------------------------------------------
    def _ids(self, ids) -> tf.Tensor:
        ids = np.asarray(ids)
        if ids.dtype.kind in "ui" and ids.dtype not in (np.int32, np.int64):
            # tf.gather takes only int32/int64 indices: check other integer dtypes on the host, then widen
            check_token_ids(ids)
            ids = ids.astype(np.int64)
        with tf.device(self._device):
            return tf.constant(ids)

    def embed(self, ids, past_length=0):
        with tf.device(self._device):
            return self._to_numpy(self.model(self._ids(ids), past_length))

    def logits(self, h_final):
        h_final = np.asarray(h_final)
        if h_final.ndim != 3 or h_final.shape[-1] != self.config.n_embd:
            raise ValueError(f"h_final.shape={h_final.shape}, but should be (B, T, {self.config.n_embd})")
        with tf.device(self._device):
            return self._to_numpy(self.model.logits(tf.constant(h_final)))

    def gradients(self, ids, past_length, cotangent_h, cotangent_logits):
        model = self.model
        with tf.device(self._device):
            X = self._ids(ids)
            with tf.GradientTape() as tape:
                h = model(X, past_length)
                logits = model.logits(h)
            # the vector-Jacobian product of (h, logits) with the cotangents is dL/d(wte, wpe)
            grads = tape.gradient(
                [h, logits],
                [model.wte, model.wpe],
                output_gradients=[tf.cast(cotangent_h, h.dtype), tf.cast(cotangent_logits, logits.dtype)],
            )
            return tuple(tf.cast(tf.convert_to_tensor(g), tf.float32).numpy() for g in grads)
