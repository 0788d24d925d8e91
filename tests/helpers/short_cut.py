"""The black-box adapters (hf-transformers, TransformerLens) stop the model's forward at block 0's
input; the complete forward's first hidden state must be the same bits (tests/backends/)."""

from __future__ import annotations

import numpy as np


def same_as_full_forward(adapter) -> list[int]:
    """The offsets (of 0, 5, 1017) where the adapter's short cut differs from its full forward."""
    rng = np.random.default_rng(0)
    adapter.load_tables(
        rng.standard_normal((50257, 768), dtype=np.float32) * np.float32(0.02),
        rng.standard_normal((1024, 768), dtype=np.float32) * np.float32(0.01),
    )
    ids = rng.integers(0, 50257, (2, 7))
    differ = []
    for past in (0, 5, 1017):
        short = adapter.embed(ids, past)
        adapter.FULL_FORWARD = True
        full = adapter.embed(ids, past)
        adapter.FULL_FORWARD = False
        if not np.array_equal(short, full):
            differ.append(past)
    return differ
