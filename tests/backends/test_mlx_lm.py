"""The mlx-lm adapter observes mlx-lm's own forward faithfully: the short-cut (the forward
stopped at block 0's input) gives the same bits as recording that input during the complete
forward through a real KVCache, and the recorder leaves the model's own output unchanged."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("mlx.core")
pytest.importorskip("mlx_lm")

import mlx.core as mx  # noqa: E402  (after the skips: mlx is optional)
from mlx_lm.models import gpt2 as mlx_gpt2  # noqa: E402

from gpt2_conformance.backends.thirdparty.mlx_lm import adapter as mlx_adapter  # noqa: E402


@pytest.fixture(scope="module")
def adapter():
    a = mlx_adapter.MlxLmAdapter()
    rng = np.random.default_rng(0)
    a.load_tables(
        rng.standard_normal((50257, 768), dtype=np.float32) * np.float32(0.02),
        rng.standard_normal((1024, 768), dtype=np.float32) * np.float32(0.01),
    )
    return a


@pytest.mark.parametrize("past", [0, 5, 1017])
def test_short_cut_equals_full_forward(adapter, past):
    ids = np.random.default_rng(past).integers(0, 50257, (2, 7))
    short = adapter.embed(ids, past)
    adapter.FULL_FORWARD = True
    try:
        full = adapter.embed(ids, past)
    finally:
        adapter.FULL_FORWARD = False
    assert np.array_equal(short, full), f"past_length={past}: short-cut h differs from the full forward's block-0 input"


def test_recorder_leaves_the_model_output_unchanged(adapter):
    """Model.__call__ (all blocks, ln_f, tied head) with block 0 recording equals the same
    model with mlx-lm's own TransformerBlock class restored."""
    ids = mx.array(np.random.default_rng(3).integers(0, 50257, (1, 5)))
    adapter.FULL_FORWARD = True
    try:
        recorded = np.array(adapter.model(ids, cache=adapter._cache(1, 4)))
    finally:
        adapter.FULL_FORWARD = False
    block = adapter.model.model.h[0]
    block.__class__ = mlx_gpt2.TransformerBlock
    try:
        plain = np.array(adapter.model(ids, cache=adapter._cache(1, 4)))
    finally:
        block.__class__ = mlx_adapter._RecordingBlock
    assert recorded.shape == (1, 5, 50257) and np.array_equal(recorded, plain), "the recorder changed the logits"
