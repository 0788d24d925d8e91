"""The iree-hf backend (backends/thirdparty/iree_hf), beyond what tests/test_thirdparty.py runs on
every third-party backend: h and the logits come out of IREE's compiled functions (bit for bit the
sum, the tied head), the offset is the length of the `past` argument, the compiled modules are
kept in the cache folder and read back, bad input reaches the runtime's own checks, and what the
BOUNDS-TOKEN waiver says: an id one past the table returns a row that is not in it, with no error."""

from __future__ import annotations

import os

import numpy as np
import pytest

pytest.importorskip("iree.compiler", reason="iree-base-compiler is not installed (pip install -e '.[iree]')")
pytest.importorskip("iree.runtime", reason="iree-base-runtime is not installed (pip install -e '.[iree]')")
pytest.importorskip("iree.turbine", reason="iree-turbine is not installed (pip install -e '.[iree]')")
pytest.importorskip("transformers", reason="transformers is not installed (pip install -e '.[iree]')")

from gpt2_conformance.api import gpt2  # noqa: E402
from gpt2_conformance.api.adapter import AdapterConfig  # noqa: E402
from gpt2_conformance.backends.thirdparty.iree_hf import adapter as iree_hf  # noqa: E402
from helpers.loaded_engines import load_random_tables  # noqa: E402


@pytest.fixture(scope="module")
def loaded():
    return load_random_tables(iree_hf.IreeHFAdapter)


def test_h_is_the_compiled_forwards_answer_bit_for_bit(loaded):
    adapter, wte, wpe = loaded
    ids = np.array([[3, 50256, 0], [7, 7, 1]])
    assert np.array_equal(adapter.embed(ids, 0), wte[ids] + wpe[0:3])
    assert np.array_equal(adapter.embed(ids[:, :1], 37), wte[ids[:, :1]] + wpe[37:38])
    assert (gpt2.N_EMBD_SMALL, "float32") in iree_hf._MODULES  # the call ran the compiled module


def test_logits_are_the_tied_head(loaded):
    adapter, wte, _ = loaded
    h = np.random.default_rng(1).standard_normal((1, 2, gpt2.N_EMBD_SMALL), dtype=np.float32)
    np.testing.assert_allclose(adapter.logits(h), h @ wte.T, rtol=1e-4, atol=1e-3)


def test_new_tables_reach_the_compiled_functions(loaded):
    adapter, wte, wpe = loaded
    other = iree_hf.IreeHFAdapter()
    other.load_tables(wte[::-1].copy(), wpe)  # the same compiled module, other tables
    ids = np.array([[0, 1]])
    assert np.array_equal(other.embed(ids), wte[::-1][ids] + wpe[0:2])
    assert np.array_equal(adapter.embed(ids), wte[ids] + wpe[0:2])  # the first adapter's are untouched


def test_parameters_are_the_two_tables_the_graphs_read(loaded):
    adapter, _, _ = loaded
    d = gpt2.N_EMBD_SMALL
    assert adapter.parameters() == {
        "transformer.wte.weight": (gpt2.N_VOCAB, d),
        "transformer.wpe.weight": (gpt2.N_CTX, d),
    }


def test_the_compiled_module_is_kept_in_the_cache_folder_and_read_back(loaded, tmp_path, monkeypatch):
    monkeypatch.setenv(iree_hf.CACHE_ENV, str(tmp_path))
    monkeypatch.setattr(iree_hf, "_MODULES", {})
    calls = []
    real = iree_hf._compile
    monkeypatch.setattr(iree_hf, "_compile", lambda *a: calls.append(a) or real(*a))
    first = iree_hf.compiled(gpt2.N_EMBD_SMALL, "float32")
    files = os.listdir(tmp_path)
    assert calls == [(gpt2.N_EMBD_SMALL, "float32")] and len(files) == 1 and files[0].endswith(".iree")
    monkeypatch.setattr(iree_hf, "_MODULES", {})
    second = iree_hf.compiled(gpt2.N_EMBD_SMALL, "float32")  # a new process: read back, not compiled
    assert len(calls) == 1 and second is not first and second.parameters == first.parameters


def test_offset_comes_from_np_zeros_which_rejects_bad_lengths(loaded):
    adapter, _, _ = loaded
    ids = np.array([[1]])
    with pytest.raises(ValueError, match="negative dimensions"):
        adapter.embed(ids, -1)
    with pytest.raises(TypeError):
        adapter.embed(ids, 1.5)


def test_signed_ints_are_widened_and_nothing_else_is_converted(loaded):
    adapter, wte, wpe = loaded
    ids = np.array([[5, 6]], np.int32)
    assert np.array_equal(adapter.embed(ids, 3), wte[ids] + wpe[3:5])
    for bad_ids in (np.array([[5.0]]), np.array([[True]]), np.array([[5]], np.uint8)):
        with pytest.raises(ValueError, match="element type mismatch"):  # the runtime's signature check, not ours
            adapter.embed(bad_ids)


def test_bad_input_reaches_the_runtimes_checks(loaded):
    adapter, _, _ = loaded
    with pytest.raises(TypeError, match="ids must be an array"):
        adapter.embed([[1, 2]])
    for bad in (np.array([1, 2]), np.zeros((1, 1, 2), np.int64)):  # wrong rank: the runtime refuses it
        with pytest.raises((ValueError, RuntimeError)):
            adapter.embed(bad)


def test_no_tables_yet_is_a_clear_error():
    adapter = iree_hf.IreeHFAdapter()
    with pytest.raises(RuntimeError, match="no tables yet"):
        adapter.embed(np.array([[1]]))


def test_unclaimed_config_is_refused():
    with pytest.raises(ValueError, match="bfloat16"):
        iree_hf.IreeHFAdapter(AdapterConfig(dtype="bfloat16"))
    with pytest.raises(ValueError, match="gpu"):
        iree_hf.IreeHFAdapter(AdapterConfig(device="gpu"))


def test_an_id_one_past_the_table_returns_a_row_not_in_it(loaded):
    """What the BOUNDS-TOKEN waiver says (the unchecked gather): no error, and the row is neither
    the last row nor a row of zeros (other memory). Only 50257, which lands right after the table;
    ids further out, or negative, can crash the process."""
    adapter, wte, wpe = loaded
    h = adapter.embed(np.array([[gpt2.N_VOCAB]]))
    row = h[0, 0] - wpe[0]
    assert h.shape == (1, 1, gpt2.N_EMBD_SMALL)
    assert not np.array_equal(row, wte[-1]) and not np.array_equal(row, wte[0])
