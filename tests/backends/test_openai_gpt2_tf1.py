"""The openai-gpt2-tf1 backend (backends/thirdparty/openai_gpt2_tf1), beyond what
tests/test_thirdparty.py runs on every third-party backend: h is the tensor of model.py's own
`tf.gather(wte, X) + tf.gather(wpe, positions_for(X, past_length))` (found once per model() call,
offset by a real fed `past`), the logits are model.py's own tied matmul fed h_final, the
parameters are what the graph reads, each adapter's tables are its own (one session each), and a
bad index is refused by tf.gather with the value named and no machine-local path in the message."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

if importlib.util.find_spec("gpt_2_simple") is None:  # found, not imported: its import leaves eager mode
    pytest.skip(
        "gpt-2-simple is not installed (pip install 'gpt2-conformance[openai-gpt2-tf1]')", allow_module_level=True
    )
tf = pytest.importorskip("tensorflow", reason="tensorflow is not installed")

from gpt2_conformance.api import gpt2  # noqa: E402
from gpt2_conformance.backends.thirdparty.openai_gpt2_tf1 import adapter as module  # noqa: E402
from gpt2_conformance.backends.thirdparty.openai_gpt2_tf1.adapter import OpenAIGPT2TF1Adapter  # noqa: E402
from helpers.loaded_engines import load_random_tables  # noqa: E402


@pytest.fixture(scope="module")
def loaded():
    return load_random_tables(OpenAIGPT2TF1Adapter)


def test_h_is_model_pys_sum_bit_for_bit_in_each_ids_dtype(loaded):
    adapter, wte, wpe = loaded
    ids = np.array([[3, 50256, 0], [7, 7, 1]])
    for dtype in (np.int64, np.int32):
        assert np.array_equal(adapter.embed(ids.astype(dtype), 0), wte[ids] + wpe[0:3])
    long = np.arange(gpt2.N_CTX)[None] % gpt2.N_VOCAB
    assert np.array_equal(adapter.embed(long, 0), wte[long] + wpe[None])  # position 1023 included


def test_the_offset_is_the_fed_pasts_length(loaded):
    adapter, wte, wpe = loaded
    ids = np.array([[5, 9]], np.int32)
    assert np.array_equal(adapter.embed(ids, 1022), wte[ids] + wpe[1022:1024])
    with_past = adapter.g.call(np.dtype(np.int32), True)
    assert with_past.past is not None and with_past.past.shape.as_list()[-2] is None  # the length is dynamic


def test_logits_are_the_tied_matmul_of_model_py(loaded):
    adapter, wte, _ = loaded
    h = np.random.default_rng(1).standard_normal((2, 3, gpt2.N_EMBD_SMALL), dtype=np.float32)
    logits = adapter.logits(h)
    assert logits.shape == (2, 3, gpt2.N_VOCAB)
    np.testing.assert_allclose(logits, h @ wte.T, rtol=1e-4, atol=1e-3)
    # the fed tensor is the head's own input: the Reshape's input inside model(), not a new matmul
    call = adapter.g.call(np.dtype(np.int32), False)
    assert call.head_input.name.startswith("model/ln_f/")
    assert call.head_weight.op.inputs[0].op.name == "model/wte"


def test_parameters_are_what_the_graph_reads(loaded):
    adapter, _, _ = loaded
    assert adapter.parameters() == {"model/wte": (gpt2.N_VOCAB, 768), "model/wpe": (gpt2.N_CTX, 768)}


def test_each_adapter_has_its_own_tables(loaded):
    adapter, wte, _ = loaded
    other = OpenAIGPT2TF1Adapter()  # the same graph, its own session
    other.load_tables(np.zeros_like(wte), np.zeros((gpt2.N_CTX, 768), np.float32))
    other.assign_wte_row(7, np.ones(768))
    assert np.array_equal(adapter.tables()[0][7], wte[7])
    assert np.array_equal(other.tables()[0][7], np.ones(768, np.float32))


def test_init_is_model_pys_seeded_initializers():
    first, second, third = (OpenAIGPT2TF1Adapter() for _ in range(3))
    first.init_tables(3)
    second.init_tables(3)
    third.init_tables(4)
    wte, wpe = first.tables()
    assert np.array_equal(wte, second.tables()[0])
    assert not np.array_equal(wte, third.tables()[0])
    assert abs(float(wte.std()) - gpt2.WTE_INIT_STD) < 1e-3 and abs(float(wpe.std()) - gpt2.WPE_INIT_STD) < 1e-3


@pytest.mark.parametrize(
    ("ids", "past_length", "named"),
    [
        ([[0, 50257]], 0, "= 50257 is not in [0, 50257)"),
        ([[-1]], 0, "= -1 is not in"),
        ([[0, 1]], 1023, "= 1024 is not in [0, 1024)"),
    ],
)
def test_a_bad_index_is_tf_gathers_error_naming_it(loaded, ids, past_length, named):
    adapter = loaded[0]
    with pytest.raises(tf.errors.InvalidArgumentError) as raised:
        adapter.embed(np.array(ids), past_length)
    message = str(raised.value)
    assert named in message
    assert "File " not in message and "site-packages" not in message  # the creation traceback is dropped


def test_bad_input_is_refused_by_the_engine_or_numpy(loaded):
    adapter = loaded[0]
    with pytest.raises(TypeError, match="indices"):  # model()'s tf.gather, while its graph is built
        adapter.embed(np.array([[1.0]]))
    with pytest.raises(ValueError, match="Cannot feed value of shape"):  # X is [None, None]
        adapter.embed(np.array([1, 2]))
    with pytest.raises(ValueError, match="negative dimensions"):  # the past's size, in numpy
        adapter.embed(np.array([[1]]), -1)
    # a table of the wrong shape: the protocol's check_tables where load_tables calls it, else the variable's assign
    with pytest.raises((ValueError, tf.errors.InvalidArgumentError), match="wte|wrong shape"):
        adapter.load_tables(np.zeros((3, 768), np.float32), np.zeros((gpt2.N_CTX, 768), np.float32))


def test_the_structural_finders_refuse_a_graph_without_one_match():
    graph = tf.Graph()
    with graph.as_default():
        a = tf.compat.v1.placeholder(tf.float32, [2, 2])
        tf.matmul(a, a)
    with pytest.raises(RuntimeError, match="0 additions of two gathers"):
        module.embedding_sum(graph.get_operations())
    with pytest.raises(RuntimeError, match="0 transposed matmuls"):
        module.tied_head(graph.get_operations())


def test_the_process_stays_eager(loaded):
    """The backend loads model.py alone: importing the gpt_2_simple package would have called
    tf.compat.v1.disable_eager_execution() (gpt_2_simple/gpt_2.py L29) and turned every other
    TensorFlow adapter in the process to graph mode."""
    import sys

    adapter, wte, wpe = loaded
    adapter.embed(np.array([[1, 2]]), 0)
    assert tf.executing_eagerly(), "the process left eager mode after the openai-gpt2-tf1 backend ran"
    assert not [name for name in sys.modules if name.startswith("gpt_2_simple")]
    assert tf.constant([1]).numpy().tolist() == [1]
