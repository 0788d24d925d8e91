"""Bench hooks for the TensorFlow backend (same names in every backends/<fw>/bench.py).

Modes:
  suite          what TensorFlowAdapter runs: GPT2Embedding.__call__ (host checks, then a
                 tf.function without XLA whose tf.debugging.Assert on min/max is ordered before
                 the gather, which reads wte's value, not the Variable); head:
                 GPT2Embedding.logits, (wte @ h^T)^T in a tf.function without XLA.
  xla            one tf.function(jit_compile=True) returning h and an in-range flag (min/max of
                 the ids, computed in the same XLA cluster), called through its concrete function;
                 the host reads the flag and raises before h is returned. XLA drops a
                 tf.debugging.Assert inside a cluster, but it cannot drop an output. An Assert
                 outside the cluster, ordered before it by a control dependency, costs two
                 executions per call.
                 head and backward: tf.function(jit_compile=True) (backward keeps the Assert).
  nocheck        forward only: the same XLA gather + add with no check, to show TF's own
                 ceiling at a shape (comparison only).
  eager          no tf.function: eager min/max check, tf.gather + add; head: the exact line of
                 openai/gpt-2, tf.matmul(h, wte, transpose_b=True), run eagerly. Its gather on
                 the Variable switches wte to copy-on-read (model.py), so after the first
                 forward each head call copies wte first: what the literal line costs in TF 2.
  pretransposed  head only: eager tf.matmul(h, wte_T) with wte_T = transpose(wte) stored once.
backward: the gradient tape's IndexedSlices for wte are made dense (tf.convert_to_tensor,
an unsorted_segment_sum into [V, d]) so every backend returns the same dense gradients.
"""

from __future__ import annotations

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import tensorflow as tf

from gpt2_conformance.api.adapter import AdapterConfig
from gpt2_conformance.backends.tensorflow import BACKEND
from gpt2_conformance.backends.tensorflow.model import gather_add

MODES, CHECK = BACKEND.mode_table()  # declared once, in the registry entry (__init__.py)
SUITE_MODE = "suite"
FASTEST_MODE = "xla"


def available(device: str) -> tuple[bool, str]:
    from gpt2_conformance.backends.tensorflow.adapter import TensorFlowAdapter

    return TensorFlowAdapter.device_available(device)


def threads_setting() -> str:
    intra = tf.config.threading.get_intra_op_parallelism_threads()
    inter = tf.config.threading.get_inter_op_parallelism_threads()
    return f"intra_op={intra or 'all cores'} inter_op={inter or 'default'}"


def _sync_all():
    sync = getattr(getattr(tf.test, "experimental", None), "sync_devices", None)
    if sync:
        sync()


def _as_written(wte, wpe, X, past_length):
    """openai's line 157 as written, gathering from the Variables (the eager mode's), where
    model.gather_add gathers from their values."""
    return tf.gather(wte, X) + tf.gather(wpe, past_length + tf.range(tf.shape(X)[1]))


def _check(X, n_vocab):
    in_range = tf.logical_and(tf.reduce_min(X) >= 0, tf.reduce_max(X) < n_vocab)
    return tf.debugging.Assert(in_range, ["token id outside the wte table"])


class Runner:
    def __init__(self, wte, wpe, mode: str, device: str):
        from gpt2_conformance.backends.tensorflow.adapter import TensorFlowAdapter

        self.mode = mode
        self.device = "/GPU:0" if device == "gpu" else "/CPU:0"
        self.adapter = TensorFlowAdapter(AdapterConfig(n_embd=wte.shape[1], device=device))
        self.adapter.load_tables(wte, wpe)
        self.model = self.adapter.model
        self.wte, self.wpe = self.model.wte, self.model.wpe
        self.n_vocab = int(self.wte.shape[0])

    def put(self, array):
        with tf.device(self.device):
            return tf.constant(array)

    def sync(self, out):
        if self.device != "/CPU:0":
            _sync_all()
        return out

    # -- forward --------------------------------------------------------------------
    def _xla_forward(self, X, past_length, checked: bool = True):
        """The forward for inputs shaped like (X, past_length), called through its concrete
        function: tf.function's dispatch (matching the signature on every call) costs more than the
        decode step itself at B=1, T=1 (reports/performance.md)."""
        wte, wpe, n_vocab = self.wte, self.wpe, self.n_vocab

        @tf.function(jit_compile=True)
        def unchecked(X, past_length):
            return gather_add(wte, wpe, X, past_length)

        @tf.function(jit_compile=True)
        def gather_add_flag(X, past_length):
            in_range = tf.logical_and(tf.reduce_min(X) >= 0, tf.reduce_max(X) < n_vocab)
            return unchecked(X, past_length), in_range

        if not checked:
            return unchecked.get_concrete_function(X, past_length)
        concrete = gather_add_flag.get_concrete_function(X, past_length)

        def forward(X, past_length):
            # XLA's gather clamps a bad id; h is never returned unless the flag says none was bad
            h, in_range = concrete(X, past_length)
            if not bool(in_range):
                raise ValueError("token id outside the wte table")
            return h

        return forward

    def _eager_forward(self, X, past_length):
        if not bool(tf.logical_and(tf.reduce_min(X) >= 0, tf.reduce_max(X) < self.n_vocab)):
            raise ValueError("token id outside the wte table")
        return _as_written(self.wte, self.wpe, X, past_length)

    # -- backward -------------------------------------------------------------------
    def _backward_fn(self, jit):
        wte, wpe, n_vocab = self.wte, self.wpe, self.n_vocab
        # suite and xla gather from the tables' values, as GPT2Embedding does: a gather on the
        # Variable would leave wte copy-on-read for the head rows timed after it
        forward = _as_written if jit is None else gather_add

        def backward(X, past_length, dh):
            with tf.control_dependencies([_check(X, n_vocab)]):
                X = tf.identity(X)
            with tf.GradientTape() as tape:
                h = forward(wte, wpe, X, past_length)
            d_wte, d_wpe = tape.gradient(h, [wte, wpe], output_gradients=dh)
            return tf.convert_to_tensor(d_wte), tf.convert_to_tensor(d_wpe)

        if jit is None:
            return backward
        return tf.function(backward, jit_compile=jit)

    # -- head -----------------------------------------------------------------------
    def _eager_head(self, h):
        shape = tf.shape(h)
        logits = tf.matmul(tf.reshape(h, [-1, shape[-1]]), self.wte, transpose_b=True)
        return tf.reshape(logits, tf.concat([shape[:-1], [self.n_vocab]], 0))

    def make(self, w, ids, past_length, dh=None, h=None):
        mode = self.mode
        with tf.device(self.device):
            past = tf.constant(past_length, tf.int32)
            if mode == "pretransposed":
                if w.kind != "logits":
                    return None
                wte_t = tf.Variable(tf.transpose(self.wte))
                B, T, d = h.shape
                return lambda: tf.reshape(tf.matmul(tf.reshape(h, [-1, d]), wte_t), [B, T, self.n_vocab])
            if mode == "nocheck":
                if w.kind != "forward":
                    return None
                fwd = self._xla_forward(ids, past, checked=False)
                return lambda: fwd(ids, past)
            if w.kind == "forward":
                if mode == "suite":
                    return lambda: self.model(ids, past_length)
                if mode == "xla":
                    fwd = self._xla_forward(ids, past)
                    return lambda: fwd(ids, past)
                return lambda: self._eager_forward(ids, past)
            if w.kind == "backward":
                fn = self._backward_fn({"suite": False, "xla": True, "eager": None}[mode])
                return lambda: fn(ids, past, dh)
            if w.kind == "logits":
                if mode == "suite":
                    return lambda: self.model.logits(h)
                if mode == "xla":
                    head = tf.function(self._eager_head, jit_compile=True)
                    return lambda: head(h)
                return lambda: self._eager_head(h)
        return None
