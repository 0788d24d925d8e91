"""The TensorFlow backend: the suite passes on it (one suite run, about a minute), and the
model checked directly (fast).

The TensorFlow mutants (its raw ops used the wrong way) are in
tests/helpers/mutants_tensorflow.py; tests/test_kill_matrix.py (the slow tier) checks the exact
clauses each fails.
"""

import numpy as np
import pytest

tf = pytest.importorskip("tensorflow")

from gpt2_conformance import spec  # noqa: E402
from gpt2_conformance.api import gpt2  # noqa: E402
from gpt2_conformance.api.adapter import AdapterConfig  # noqa: E402
from gpt2_conformance.api.errors import PositionOutOfRangeError, TokenIdOutOfRangeError  # noqa: E402
from gpt2_conformance.backends.tensorflow.adapter import TensorFlowAdapter  # noqa: E402
from gpt2_conformance.backends.tensorflow.model import GPT2Embedding, checked_gather_add, initial_tables, tied_logits  # noqa: E402
from gpt2_conformance.results import PASS  # noqa: E402
from gpt2_conformance.run.runner import run_in_process  # noqa: E402
from gpt2_conformance.runtime.tables import random_tables  # noqa: E402
from helpers.mutants_tensorflow import CheckedUnderXLAModel  # noqa: E402


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


def test_one_trace_serves_every_instance(model):
    """The suite makes dozens of models: the forward and the head take the Variables as
    arguments, so a second model of the same shapes traces nothing and reads its own tables."""
    X, h = tf.constant([[3, 5]]), tf.ones([1, 2, gpt2.N_EMBD_SMALL])
    model(X, 4), model.logits(h)
    counts = checked_gather_add.experimental_get_tracing_count(), tied_logits.experimental_get_tracing_count()
    wte, wpe = random_tables(gpt2.N_EMBD_SMALL, seed=1)
    other = GPT2Embedding(wte, wpe)
    np.testing.assert_array_equal(other(X, 4).numpy(), wte[[[3, 5]]] + wpe[4:6])
    np.testing.assert_allclose(
        other.logits(h).numpy(), np.ones((1, 2, gpt2.N_EMBD_SMALL)) @ wte.T, atol=1e-5
    )  # row sums
    assert (checked_gather_add.experimental_get_tracing_count(), tied_logits.experimental_get_tracing_count()) == counts


# A sparse access (a gather on the Variable, a sliced assign, a scatter) switches a resource
# Variable to copy-on-read for the rest of its life; every later read, the head's matmul
# included, then copies all of wte first (tensorflow/core/kernels/resource_variable_ops.cc,
# EnsureSparseVariableAccess). The logits of one row measured 114 ms that way against 7 ms.
SPARSE_ACCESS = {
    "ResourceGather",
    "ResourceGatherNd",
    "ResourceStridedSliceAssign",
    "ResourceScatterUpdate",
    "ResourceScatterNdUpdate",
    "ResourceScatterAdd",
    "ResourceScatterSub",
    "ResourceScatterNdAdd",
}


def _op_types(concrete) -> set[str]:
    graph = concrete.graph.as_graph_def()
    types = {node.op for node in graph.node}
    for f in graph.library.function:  # nested functions (none today, but a refactor may add them)
        types |= {node.op for node in f.node_def}
    return types


def test_tables_are_never_read_or_written_sparsely(model):
    """The forward, the head and assign_wte_row read and write the Variables whole, so reading
    wte never copies it; a gather straight from the Variable (model.py's line as TF 1 ran it)
    is the sparse access this rules out."""
    X, past = tf.constant([[3, 5]]), tf.constant(0)
    h = tf.zeros([1, 2, gpt2.N_EMBD_SMALL])
    adapter = TensorFlowAdapter(AdapterConfig())
    adapter.load_tables(*random_tables(gpt2.N_EMBD_SMALL))
    row = np.ones(gpt2.N_EMBD_SMALL, np.float32)
    traced = {
        "embed": checked_gather_add.get_concrete_function(model.wte, model.wpe, X, past),
        "logits": tied_logits.get_concrete_function(model.wte, h),
        "assign_wte_row": tf.function(lambda: adapter.assign_wte_row(7, row)).get_concrete_function(),
    }
    for name, concrete in traced.items():
        assert not _op_types(concrete) & SPARSE_ACCESS, f"{name}: {sorted(_op_types(concrete) & SPARSE_ACCESS)}"
    adapter.assign_wte_row(7, row)
    np.testing.assert_array_equal(adapter.tables()[0][7], row)
    gather_on_variable = tf.function(lambda X: tf.gather(model.wte, X)).get_concrete_function(X)
    assert "ResourceGather" in _op_types(gather_on_variable)


def test_bench_backward_reads_the_tables_whole_before_the_head_rows_run():
    """bench times each mode's workloads on one Runner, backward before logits: a backward that
    gathered from the Variable left the suite mode's head copying wte (logits_decode 23.5 ms
    against 7.5 ms). The eager mode keeps openai's line as written, and with it the sparse read."""
    from gpt2_conformance.backends.tensorflow.bench import Runner

    runner = Runner(*random_tables(gpt2.N_EMBD_SMALL), "suite", "cpu")
    X, past, dh = tf.constant([[3, 5]]), tf.constant(0), tf.zeros([1, 2, gpt2.N_EMBD_SMALL])
    for jit in (False, True):
        types = _op_types(runner._backward_fn(jit).get_concrete_function(X, past, dh))
        assert not types & SPARSE_ACCESS, f"backward jit_compile={jit}: {sorted(types & SPARSE_ACCESS)}"
    eager = tf.function(runner._backward_fn(None)).get_concrete_function(X, past, dh)
    assert "ResourceGather" in _op_types(eager)


@pytest.mark.parametrize("bad,dtype", [(-1, tf.int32), (gpt2.N_VOCAB, tf.int64), (2**31 - 1, tf.int32)])
def test_bad_token_id_error(model, bad, dtype):
    X = tf.constant([[3, bad, 5]], dtype)
    with pytest.raises(TokenIdOutOfRangeError, match=rf"token id {bad} at ids\[0, 1\] .*\[0, 50257\)"):
        model(X)


def test_xla_clamps_silently_where_the_model_raises(model):
    """The reason the forward is not jit-compiled: the same code under XLA returns a row."""
    X = tf.constant([[gpt2.N_VOCAB]])
    clamped = CheckedUnderXLAModel(model.wte, model.wpe)(X).numpy()
    np.testing.assert_array_equal(clamped[0, 0], (model.wte[-1] + model.wpe[0]).numpy())
    with pytest.raises(TokenIdOutOfRangeError):
        model(X)


def test_position_error(model):
    with pytest.raises(PositionOutOfRangeError, match="position 1024 is outside the wpe table"):
        model(tf.zeros([1, 2], tf.int32), past_length=1023)


def test_init_is_seeded():
    first, again, other = (initial_tables(64, seed) for seed in (5, 5, 6))
    for a, b in zip(first, again, strict=True):
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
