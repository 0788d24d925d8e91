"""A judged engine's adapter with unit-scale random tables loaded, for the tests of one engine
(tests/backends/test_tract_hf.py, test_openvino_hf.py, test_llama_cpp.py): large values make any wrong row or
wrong sum visible, and the tables are returned beside the adapter to compute what h must be."""

from __future__ import annotations

import numpy as np

from gpt2_conformance.api import gpt2


def load_random_tables(factory, n_embd: int = gpt2.N_EMBD_SMALL, seed: int = 0):
    """(adapter, wte, wpe): factory() with float32 N(0, 1) tables of width n_embd loaded."""
    rng = np.random.default_rng(seed)
    wte = rng.standard_normal((gpt2.N_VOCAB, n_embd), dtype=np.float32)
    wpe = rng.standard_normal((gpt2.N_CTX, n_embd), dtype=np.float32)
    adapter = factory()
    adapter.load_tables(wte, wpe)
    return adapter, wte, wpe
