"""The torch-compile-hf backend (backends/thirdparty/torch_compile_hf), beyond what
tests/test_thirdparty.py runs on every third-party backend: h is the output of Inductor's compiled
graph (not eager torch under another name: a recompile past the limit raises, never falls back), the
kernels are compiled for at least two threads whatever share of the cores the run gives, an engine
message's kernel path is written without the machine's cache folder, and what the bounds waivers
describe is what the suite observes: the process dies of SIGABRT on a bad token id."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")

import torch  # noqa: E402

from gpt2_conformance.backends.thirdparty.torch_compile_hf import adapter as compiled  # noqa: E402
from gpt2_conformance.run import runner  # noqa: E402
from helpers.loaded_engines import load_random_tables  # noqa: E402


def test_h_is_the_compiled_graphs_output_bit_for_bit():
    """Dynamo compiled a graph for the call (its frame counter moves), and its answer is the sum."""
    from torch._dynamo.utils import counters

    adapter, wte, wpe = load_random_tables(compiled.TorchCompileHFAdapter)
    before = counters["stats"]["unique_graphs"]
    ids = np.array([[3, 50256, 0], [7, 7, 1]])
    assert np.array_equal(adapter.embed(ids, 0), wte[ids] + wpe[0:3])
    assert np.array_equal(adapter.embed(ids[:, :1], 37), wte[ids[:, :1]] + wpe[37:38])
    assert counters["stats"]["unique_graphs"] > before
    assert torch._dynamo.config.fail_on_recompile_limit_hit  # past the limit: an error, never eager torch
    assert torch.get_num_threads() >= 2  # Inductor's parallel kernels, as on a multi-core deployment


def test_an_engine_message_names_the_kernel_without_the_cache_folder():
    folder = compiled.cache_dir()
    with pytest.raises(RuntimeError) as caught, compiled._kernel_paths_hidden():
        raise RuntimeError(f"kernel, {folder}/ek/cek3.main.cpp:26, index out of bounds: tmp6 < 1024L")
    assert str(caught.value) == "kernel, <inductor cache>/ek/cek3.main.cpp:26, index out of bounds: tmp6 < 1024L"
    with pytest.raises(ValueError, match="other") as other, compiled._kernel_paths_hidden():
        raise ValueError("other")  # anything else passes through untouched
    assert other.value.__cause__ is None


def test_a_bad_token_id_kills_the_process_as_the_waiver_says(monkeypatch):
    """One sentinel probe through the suite's child process: the crash costs its test, by signal."""
    monkeypatch.setenv("OMP_NUM_THREADS", "1")  # the share a two-shard run gives: the adapter still uses 2
    case = "test_bounds.py::test_sentinel_ids_raise[50257..50303-int64-prefill]"
    result = runner.run_backend("torch-compile-hf", extra_args=("--gpt2c-case", case))
    (test,) = [t for c in result.clauses for t in c.tests if t.nodeid.endswith(case)]
    assert test.status == "FAIL" and "SIGABRT" in test.message, (test.status, test.message)
