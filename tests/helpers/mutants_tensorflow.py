"""The TensorFlow mutant catalogue: TensorFlowAdapter with TensorFlow's raw ops used the wrong
way, one mistake per mutant (the model class holds the wrong code; the adapter plugs it in
through TensorFlowAdapter.model_class). tests/test_kill_matrix.py runs the whole suite on each
and checks which clauses kill it (FRAMEWORK_KILLS["tensorflow"]).

model.py's own raw tf.gather is no mutant: on the CPU it refuses every bad index with
InvalidArgumentError naming the index and the range, which spec 1.6's BOUNDS-MESSAGE accepts (the
independent TensorFlow implementation, tests/helpers/independent/tensorflow_variables.py, relies
on it).

Imports tensorflow at the top: import this module only where TensorFlow is installed.
"""

from __future__ import annotations

import tensorflow as tf

from gpt2_conformance.backends.tensorflow.adapter import TensorFlowAdapter
from gpt2_conformance.backends.tensorflow.model import GPT2Embedding, checked_gather_add

# -- the models: the wrong code -----------------------------------------------------------


_checked_under_xla = tf.function(checked_gather_add.python_function, jit_compile=True, reduce_retracing=True)


class CheckedUnderXLAModel(GPT2Embedding):
    """The checked forward compiled with jit_compile=True: XLA drops the tf.debugging.Assert
    and its gather clamps, so id -1 reads wte[0] and 50257 reads wte[50256] without a word.
    The host-side position check still runs, so only the token-id clauses fail."""

    def _embed(self, X, past_length):
        return _checked_under_xla(self.wte, self.wpe, X, past_length)


class UntiedHeadModel(GPT2Embedding):
    """The head multiplies by a copy of wte held in its own Variable (untied weights)."""

    def __init__(self, wte, wpe, name="gpt2_embedding"):
        super().__init__(wte, wpe, name)
        with self.name_scope:
            self.head = tf.Variable(self.wte, name="head")

    @tf.function(reduce_retracing=True)
    def logits(self, h):
        shape = tf.shape(h)  # GPT2Embedding.logits with self.head in wte's place
        out = tf.transpose(
            tf.matmul(
                tf.cast(self.head, tf.float32), tf.reshape(tf.cast(h, tf.float32), [-1, shape[-1]]), transpose_b=True
            )
        )
        return tf.cast(tf.reshape(out, tf.concat([shape[:-1], [self.n_vocab]], 0)), self.wte.dtype)


# -- the mutants: TensorFlowAdapter on each model --------------------------------------------


class CheckedUnderXLA(TensorFlowAdapter):
    """The checked forward under jit_compile=True (see CheckedUnderXLAModel)."""

    model_class = CheckedUnderXLAModel


class UntiedHead(TensorFlowAdapter):
    """The head on a copy of wte (see UntiedHeadModel)."""

    model_class = UntiedHeadModel


ALL = [
    obj
    for name, obj in sorted(globals().items())
    if isinstance(obj, type)
    and issubclass(obj, TensorFlowAdapter)
    and obj is not TensorFlowAdapter
    and not name.startswith("_")
]
