"""Native bench hooks for transformers' GPT2LMHeadModel (conformance/api/bench.py).

The timed forward is the adapter's observation path on torch tensors: GPT2Model.forward with
the input ids, stopped at block 0's input (h) by the adapter's pre-hook, with a DynamicCache of
past_length entries built once per shape, at the untimed first call (the stopped forward never
writes to it: the blocks that would append to it do not run; in generation the cache exists
before each step too). The head is lm_head, the tied nn.Linear.
"""

from __future__ import annotations

from gpt2_conformance.backends.thirdparty import torch_bench
from gpt2_conformance.backends.thirdparty.hf_transformers.adapter import StopAtBlock0


def native_available(device: str) -> tuple[bool, str]:
    return torch_bench.available(device)


def native_bench(adapter, device: str):
    caches = {}  # (batch, past_length) -> DynamicCache, built outside the timed call

    def cache_for(batch, past_length):
        key = (batch, past_length)
        if key not in caches:
            caches[key] = adapter._cache(batch, past_length)
        return caches[key]

    transformer = adapter.model.transformer

    def forward(ids, past_length):
        cache = cache_for(ids.shape[0], past_length) if past_length else None
        adapter._captured = None
        try:
            transformer(input_ids=ids, cache=cache, use_cache=cache is not None)
        except StopAtBlock0:
            pass
        return adapter._captured

    return torch_bench.native(
        adapter,
        device,
        forward,
        "GPT2Model.forward on torch tensors to block 0's input (a DynamicCache of past_length "
        "entries, built at the untimed first call); head lm_head",
    )
