"""The tvm-relax-hf backend (backends/thirdparty/tvm_relax_hf), beyond what tests/test_thirdparty.py
runs on every third-party backend: h and the logits are the compiled Relax function's outputs, the
tie is one parameter of that function (a row written in place reaches the gather and the head),
the compiled library is kept in the cache folder for the next process, bad configuration and
bad input are refused with the name of what is wrong, and TVM's unchecked gather is what the
waivers say it is: a row of other memory for an id past the table, no error."""

from __future__ import annotations

import os

import numpy as np
import pytest

pytest.importorskip("torch", reason="tvm-relax-hf exports the model with torch: pip install '.[tvm]'")
pytest.importorskip("transformers", reason="tvm-relax-hf builds HF's GPT-2: pip install '.[tvm]'")
pytest.importorskip("tvm", reason="tvm-relax-hf needs Apache TVM: pip install '.[tvm]'")

from gpt2_conformance.api import gpt2  # noqa: E402
from gpt2_conformance.api.adapter import AdapterConfig  # noqa: E402
from gpt2_conformance.backends.thirdparty.tvm_relax_hf import adapter as tvm_adapter  # noqa: E402
from helpers.loaded_engines import load_random_tables  # noqa: E402


@pytest.fixture(scope="module")
def loaded():
    return load_random_tables(tvm_adapter.TvmRelaxHFAdapter)


def test_h_and_logits_are_the_compiled_outputs(loaded):
    adapter, wte, wpe = loaded
    ids = np.array([[3, 50256, 0], [7, 7, 1]])
    assert np.array_equal(adapter.embed(ids, 0), wte[ids] + wpe[0:3])
    assert np.array_equal(adapter.embed(ids[:, :1], 37), wte[ids[:, :1]] + wpe[37:38])
    h = adapter.embed(ids, 5)
    np.testing.assert_allclose(adapter.logits(h), h @ wte.T, rtol=1e-4, atol=1e-3)


def test_the_tie_is_one_parameter_written_in_place():
    adapter, wte, wpe = load_random_tables(tvm_adapter.TvmRelaxHFAdapter)
    assert adapter.parameters() == {
        "lm.lm_head.weight": (gpt2.N_VOCAB, gpt2.N_EMBD_SMALL),
        "lm.transformer.wpe.weight": (gpt2.N_CTX, gpt2.N_EMBD_SMALL),
    }
    row = np.full(gpt2.N_EMBD_SMALL, 2.0, np.float32)
    adapter.assign_wte_row(11, row)
    assert np.array_equal(adapter.embed(np.array([[11]]))[0, 0], row + wpe[0])
    one = np.zeros((1, 1, gpt2.N_EMBD_SMALL), np.float32)
    one[0, 0, 0] = 1.0
    assert adapter.logits(one)[0, 0, 11] == 2.0  # the head reads the same write
    assert np.array_equal(adapter.tables()[0][11], row)


def test_the_compiled_library_is_kept_for_the_next_process(loaded):
    folder = tvm_adapter._cache_folder()
    assert folder is not None
    key = tvm_adapter._key(gpt2.N_EMBD_SMALL, "float32")
    assert os.path.exists(os.path.join(folder, key + ".so"))
    assert os.path.exists(os.path.join(folder, key + ".json"))


def test_bad_configuration_and_input_are_refused_by_name(loaded):
    with pytest.raises(ValueError, match="dtype 'bfloat16'"):
        tvm_adapter.TvmRelaxHFAdapter(AdapterConfig(dtype="bfloat16"))
    with pytest.raises(ValueError, match="device 'cuda'"):
        tvm_adapter.TvmRelaxHFAdapter(AdapterConfig(device="cuda"))
    adapter = loaded[0]
    with pytest.raises(TypeError, match="ids must be an array, got list"):
        adapter.embed([[1, 2]])


def test_an_id_past_the_table_returns_other_memory_without_an_error(loaded):
    """What the BOUNDS-TOKEN waiver says: TVM's take in mode="fast" reads past the table. The row
    read is not a row of wte (the engine returns it; nothing is raised)."""
    adapter, wte, wpe = loaded
    h = adapter.embed(np.array([[gpt2.N_VOCAB, 1]]))
    assert h.shape == (1, 2, gpt2.N_EMBD_SMALL)
    assert not (wte == h[0, 0] - wpe[0]).all(axis=1).any()
