"""TransformerLens' HookedTransformer (backends/transformer_lens): the adapter's short-cut
(forward with stop_at_layer=0) equals the full forward's blocks.0.hook_resid_pre, with and
without a cache. (The suite with its waivers runs in tests/test_thirdparty.py.)"""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("transformer_lens")


def test_short_cut_equals_full_forward():
    """The adapter stops the forward before block 0 (stop_at_layer=0); running every block and
    reading blocks.0.hook_resid_pre must give the same bits, with and without a cache."""
    from backends.transformer_lens.adapter import TransformerLensAdapter

    adapter = TransformerLensAdapter()
    rng = np.random.default_rng(0)
    adapter.load_tables(rng.standard_normal((50257, 768), dtype=np.float32) * np.float32(0.02),
                        rng.standard_normal((1024, 768), dtype=np.float32) * np.float32(0.01))
    ids = rng.integers(0, 50257, (2, 7))
    for past in (0, 5, 1017):
        short = adapter.embed(ids, past)
        adapter.FULL_FORWARD = True
        full = adapter.embed(ids, past)
        adapter.FULL_FORWARD = False
        assert np.array_equal(short, full), past
