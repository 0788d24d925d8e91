"""The TensorFlow backend: the suite passes on it, and TensorFlow-specific mistakes are caught
by exactly the clauses they break (each mutant below is one full suite run, about a minute)."""

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")

from gpt2_conformance.backends.tensorflow.adapter import TensorFlowAdapter  # noqa: E402
from gpt2_conformance.backends.tensorflow.model import GPT2Embedding, initial_tables, positions_for  # noqa: E402
from gpt2_conformance.api import gpt2  # noqa: E402
from gpt2_conformance import spec
from gpt2_conformance.api.adapter import AdapterConfig  # noqa: E402
from gpt2_conformance.api.errors import PositionOutOfRangeError, TokenIdOutOfRangeError  # noqa: E402
from gpt2_conformance.runtime.tables import random_tables  # noqa: E402
from gpt2_conformance.results import PASS  # noqa: E402
from gpt2_conformance.run.runner import run_in_process  # noqa: E402
from gpt2_conformance.api.validation import check_ids_layout, check_past_length  # noqa: E402

BOUNDS_MESSAGE = "BOUNDS-MESSAGE"


# -- helpers.mutants: TensorFlow's raw ops used the wrong way ---------------------------------------

class RawGather(GPT2Embedding):
    """model.py line 157 as written, without the explicit bounds checks (position and token id).
    On CPU tf.gather raises InvalidArgumentError for any index outside the table (it does not
    wrap -1), so every bad input still raises and BOUNDS-TOKEN / BOUNDS-POSITION pass; only
    BOUNDS-MESSAGE fails: InvalidArgumentError is neither IndexError nor ValueError. (On a GPU
    tf.gather is documented to return zero rows instead, which would fail BOUNDS-TOKEN and
    BOUNDS-POSITION too.)"""

    def __call__(self, X, past_length=0):
        check_ids_layout(tuple(X.shape), X.dtype.name, X.dtype.is_integer)
        return self._raw(X, tf.constant(check_past_length(past_length), tf.int32))

    @tf.function(reduce_retracing=True)
    def _raw(self, X, past_length):
        return tf.gather(self.wte, X) + tf.gather(self.wpe, positions_for(X, past_length))


class CheckedUnderXLA(GPT2Embedding):
    """The checked forward compiled with jit_compile=True: XLA drops the tf.debugging.Assert
    and its gather clamps, so id -1 reads wte[0] and 50257 reads wte[50256] without a word.
    The host-side position check still runs, so only the token-id clauses fail."""

    _embed = tf.function(GPT2Embedding._embed.python_function, jit_compile=True, reduce_retracing=True)


class UntiedHead(GPT2Embedding):
    """The head multiplies by a copy of wte held in its own Variable (untied weights)."""

    def __init__(self, wte, wpe, name="gpt2_embedding"):
        super().__init__(wte, wpe, name)
        with self.name_scope:
            self.head = tf.Variable(self.wte, name="head")

    @tf.function(reduce_retracing=True)
    def logits(self, h):
        shape = tf.shape(h)
        out = tf.matmul(tf.reshape(tf.cast(h, tf.float32), [-1, shape[-1]]), tf.cast(self.head, tf.float32),
                        transpose_b=True)
        return tf.cast(tf.reshape(out, tf.concat([shape[:-1], [self.n_vocab]], 0)), self.wte.dtype)


def _adapter_with(model_class):
    return type(f"{model_class.__name__}Adapter", (TensorFlowAdapter,), {"model_class": model_class})


def _claimed_clauses(capabilities):
    return {c.id for c in spec.CLAUSES if all(capabilities.claims(r) for r in c.requires)}


# -- the suite --------------------------------------------------------------------------------

def test_suite_passes():
    result = run_in_process(TensorFlowAdapter, "tensorflow")
    assert result.error == ""
    assert result.failed() == []
    claimed = _claimed_clauses(TensorFlowAdapter.capabilities)
    assert claimed == {c.id for c in spec.CLAUSES}  # every clause is claimed on CPU
    assert {c.clause.id for c in result.clauses if c.status == PASS} == claimed


@pytest.mark.slow  # one whole suite run per framework mutant
@pytest.mark.parametrize("model_class,failing", [
    (RawGather, {BOUNDS_MESSAGE}),
    (CheckedUnderXLA, {"BOUNDS-TOKEN", BOUNDS_MESSAGE}),
    (UntiedHead, {"TIED-STORAGE", "TIED-GRAD", "SHAPE-PARAMS"}),
], ids=lambda v: v.__name__ if isinstance(v, type) else None)
def test_mutant_fails_exactly(model_class, failing):
    result = run_in_process(_adapter_with(model_class), model_class.__name__)
    assert result.error == ""
    assert set(result.failed()) == failing


@pytest.mark.skipif(not tf.config.list_physical_devices("GPU"), reason="TensorFlow sees no GPU on this machine")
def test_suite_passes_on_gpu():
    result = run_in_process(TensorFlowAdapter, "tensorflow", device="gpu")
    assert result.error == ""
    assert result.failed() == []
    assert {c.clause.id for c in result.clauses if c.status == PASS} == {c.id for c in spec.CLAUSES}


# -- the model directly (fast) ----------------------------------------------------------------

@pytest.fixture(scope="module")
def model():
    return GPT2Embedding(*random_tables(gpt2.N_EMBD_SMALL))


def test_head_is_wte_itself(model):
    assert [v.name for v in model.trainable_variables] == ["gpt2_embedding/wpe:0", "gpt2_embedding/wte:0"]
    h = tf.random.stateless_normal([1, 2, gpt2.N_EMBD_SMALL], seed=[1, 2])
    row = model.wte[7].numpy()
    try:
        model.wte[7].assign(tf.zeros([gpt2.N_EMBD_SMALL]))
        assert not model.logits(h).numpy()[..., 7].any()
    finally:
        model.wte[7].assign(row)


@pytest.mark.parametrize("bad,dtype", [(-1, tf.int32), (gpt2.N_VOCAB, tf.int64), (2**31 - 1, tf.int32)])
def test_bad_token_id_error(model, bad, dtype):
    X = tf.constant([[3, bad, 5]], dtype)
    with pytest.raises(TokenIdOutOfRangeError, match=rf"token id {bad} at ids\[0, 1\] .*\[0, 50257\)"):
        model(X)


def test_xla_clamps_silently_where_the_model_raises(model):
    """The reason the forward is not jit-compiled: the same code under XLA returns a row."""
    X = tf.constant([[gpt2.N_VOCAB]])
    clamped = CheckedUnderXLA(model.wte, model.wpe)(X).numpy()
    np.testing.assert_array_equal(clamped[0, 0], (model.wte[-1] + model.wpe[0]).numpy())
    with pytest.raises(TokenIdOutOfRangeError):
        model(X)


def test_position_error(model):
    with pytest.raises(PositionOutOfRangeError, match="position 1024 is outside the wpe table"):
        model(tf.zeros([1, 2], tf.int32), past_length=1023)


def test_init_is_seeded():
    first, again, other = (initial_tables(64, seed) for seed in (5, 5, 6))
    for a, b in zip(first, again):
        np.testing.assert_array_equal(a.numpy(), b.numpy())
    assert not np.array_equal(first[0].numpy(), other[0].numpy())


def test_device_probe_matches_tensorflow():
    has_gpu = bool(tf.config.list_physical_devices("GPU"))
    assert TensorFlowAdapter.device_available("cpu") == (True, "")
    assert TensorFlowAdapter.device_available("gpu")[0] is has_gpu
    if not has_gpu:
        assert "TensorFlow sees no GPU" in TensorFlowAdapter.device_available("gpu")[1]
        with pytest.raises(ValueError, match="sees no GPU"):
            TensorFlowAdapter(AdapterConfig(device="gpu"))
