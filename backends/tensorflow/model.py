"""GPT-2's token + position embedding and tied output head, written as a TensorFlow 2 user would.

Follows openai/gpt-2 src/model.py: the tables are wte [n_vocab, d] and wpe [n_ctx, d] (lines
152-155), h = tf.gather(wte, X) + tf.gather(wpe, positions_for(X, past_length)) (line 157) and
the head is tf.matmul(h_flat, wte, transpose_b=True) on the same Variable (line 171). The
gathers read the Variables' values (in TF 1, where model.py ran, the same graph): a gather on a
TF 2 resource Variable switches it to copy-on-read (tensorflow/core/kernels/
resource_variable_ops.cc, ResourceGatherOp, EnsureSparseVariableAccess), and from then on every
read of wte, the head's matmul included, copies the whole table.

tf.gather does not agree with itself on bad ids (eager CPU raises InvalidArgumentError, GPU
returns zero rows, under jit_compile=True it clamps and tf.debugging asserts are dropped), so
__call__ checks its input explicitly and raises the conformance errors. The forward runs as a
tf.function without XLA, where the id assert is kept and ordered before the gather.
"""

from __future__ import annotations

import tensorflow as tf

from gpt2_conformance.api import gpt2
from gpt2_conformance.api.errors import TokenIdOutOfRangeError
from gpt2_conformance.api.validation import check_ids_layout, check_past_length, check_positions, describe_bad_id


def positions_for(tokens, past_length):
    """past_length + t for t < T. model.py tiles this over the batch (expand_tile); the add in
    __call__ broadcasts it instead, which gives the same h with T position rows, not B * T."""
    return past_length + tf.range(tf.shape(tokens)[1])


def gather_add(wte, wpe, X, past_length):
    """wte[X] + wpe[past_length + t] (model.py line 157), gathered from the tables' values: a
    gather on a TF 2 resource Variable (ResourceGather) switches it to copy-on-read for good,
    after which every dense read, the head's matmul included, copies the whole table first."""
    wte, wpe = tf.convert_to_tensor(wte), tf.convert_to_tensor(wpe)
    return tf.gather(wte, X) + tf.gather(wpe, positions_for(X, past_length))


def initial_tables(n_embd: int, seed: int, dtype=tf.float32) -> tuple[tf.Tensor, tf.Tensor]:
    """(wte, wpe) as model() draws them: random_normal_initializer(stddev=0.02 / 0.01), plain
    normals. Stateless ops, so a seed always gives the same tables; drawn in float32, then
    rounded to dtype (as loaded tables are)."""
    wte = tf.random.stateless_normal([gpt2.N_VOCAB, n_embd], seed=[seed, 0], stddev=gpt2.WTE_INIT_STD)
    wpe = tf.random.stateless_normal([gpt2.N_CTX, n_embd], seed=[seed, 1], stddev=gpt2.WPE_INIT_STD)
    return tf.cast(wte, dtype), tf.cast(wpe, dtype)


class GPT2Embedding(tf.Module):
    """wte and wpe as tf.Variables; __call__ embeds, logits() is the tied head."""

    def __init__(self, wte, wpe, name: str = "gpt2_embedding"):
        super().__init__(name=name)
        with self.name_scope:
            self.wte = tf.Variable(wte, name="wte")
            self.wpe = tf.Variable(wpe, name="wpe")

    @property
    def n_vocab(self) -> int:
        return int(self.wte.shape[0])

    def __call__(self, X: tf.Tensor, past_length=0) -> tf.Tensor:
        """h [B, T, d] for int32/int64 ids X [B, T]; positions start at past_length. Call it
        eagerly: the checks read X's shape (and, on a bad id, its values) on the host."""
        X = tf.convert_to_tensor(X)
        check_ids_layout(tuple(X.shape), X.dtype.name, X.dtype.is_integer)
        past_length = check_past_length(past_length)
        check_positions(int(X.shape[1]), past_length, int(self.wpe.shape[0]))  # host-side: needs only T
        try:
            # a tensor, not a Python int: one trace serves every past_length
            return self._embed(X, tf.constant(past_length, tf.int32))
        except tf.errors.InvalidArgumentError:
            ids = X.numpy()  # error path only: find and name the offending id
            bad = (ids < 0) | (ids >= self.n_vocab)
            if bad.any():
                raise TokenIdOutOfRangeError(describe_bad_id(ids, bad, self.n_vocab)) from None
            raise

    def _embed(self, X, past_length):
        return checked_gather_add(self.wte, self.wpe, X, past_length)

    def logits(self, h):
        """h [B, T, d] @ wte^T -> [B, T, V], accumulated in float32 and rounded once to wte's dtype."""
        return tied_logits(self.wte, h)


# The graphs take the Variables as arguments rather than capturing self's: a tf.function
# method traces once per instance, and the suite makes dozens of instances in one whole-suite
# process; these trace once per input signature for every instance.


@tf.function(reduce_retracing=True)
def checked_gather_add(wte, wpe, X, past_length):
    """gather_add behind an assert that every id is in [0, V): one min/max reduction on the
    device, and the gather waits for the assert."""
    in_range = tf.logical_and(tf.reduce_min(X) >= 0, tf.reduce_max(X) < wte.shape[0])
    with tf.control_dependencies([tf.debugging.Assert(in_range, ["token id outside the wte table"])]):
        X = tf.identity(X)
    return gather_add(wte, wpe, X, past_length)


@tf.function(reduce_retracing=True)
def tied_logits(wte, h):
    """h [B, T, d] @ wte^T -> [B, T, V], accumulated in float32 and rounded once to wte's dtype."""
    shape = tf.shape(h)
    h_flat = tf.reshape(tf.cast(h, tf.float32), [-1, shape[-1]])
    # model.py's tf.matmul(h_flat, wte, transpose_b=True), as (wte @ h_flat^T)^T: the same
    # dot products, but TF 2.21's CPU matmul was several times slower for 2 to 6 rows of h that
    # way: an Eigen contraction path, measured and traced in reports/bench/tensorflow-matmul-few-rows.md
    logits = tf.transpose(tf.matmul(tf.cast(wte, tf.float32), h_flat, transpose_b=True))  # no-op casts in float32
    return tf.cast(tf.reshape(logits, tf.concat([shape[:-1], [wte.shape[0]]], 0)), wte.dtype)


__all__ = ["GPT2Embedding", "checked_gather_add", "gather_add", "initial_tables", "positions_for", "tied_logits"]
