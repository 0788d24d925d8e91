"""transformer-lens (backends/thirdparty/transformer_lens): TransformerLens' HookedTransformer,
judged through blocks.0.hook_resid_pre. Its whole verdict is tests/test_thirdparty.py's; here,
what the adapter itself must keep true."""

import pytest

from helpers.short_cut import same_as_full_forward


def test_the_short_cut_is_the_full_forwards_resid_pre():
    """blocks.0.hook_resid_pre of the complete forward, with and without a cache, bit for bit."""
    pytest.importorskip("transformer_lens")
    from gpt2_conformance.backends.thirdparty.transformer_lens.adapter import TransformerLensAdapter

    assert same_as_full_forward(TransformerLensAdapter()) == []
