"""hf-transformers (backends/thirdparty/hf_transformers): transformers' GPT2LMHeadModel, judged
through block 0's input. Its whole verdict is tests/test_thirdparty.py's; here, what the adapter
itself must keep true."""

import pytest

from helpers.short_cut import same_as_full_forward


def test_the_short_cut_is_the_full_forwards_first_hidden_state():
    """output.hidden_states[0] of the complete forward, with and without a cache, bit for bit."""
    pytest.importorskip("transformers")
    from gpt2_conformance.backends.thirdparty.hf_transformers.adapter import HFTransformersAdapter

    assert same_as_full_forward(HFTransformersAdapter()) == []
