"""Native bench hooks for TransformerLens' HookedTransformer (conformance/api/bench.py).

The timed forward is the adapter's observation path on torch tensors:
HookedTransformer.forward(tokens, stop_at_layer=0) (the residual stream before block 0), with
a TransformerLensKeyValueCache of past_length entries built once per shape, at the untimed
first call, and frozen: forward appends each call's attention mask to an unfrozen cache
(HookedTransformer.py L445-449 with key_value_cache.py L87-92, transformer-lens 3.9.0), so
repeated calls would move the offset; a frozen cache is the library's own way to run many
inputs after one prefix (key_value_cache.py L31). The head is unembed (untied W_U, b_U).
"""

from __future__ import annotations

import torch

from gpt2_conformance.backends.thirdparty import torch_bench


def native_available(device: str) -> tuple[bool, str]:
    return torch_bench.available(device)


def native_bench(adapter, device: str):
    caches = {}

    def forward(ids, past_length):
        if not past_length:
            return adapter.model(ids, stop_at_layer=0)
        key = (ids.shape[0], ids.shape[1], past_length)
        if key not in caches:
            cache = adapter._cache(ids.shape[0], past_length)
            cache.freeze()
            caches[key] = (cache, torch.ones(tuple(ids.shape), dtype=torch.int, device=ids.device))
        cache, mask = caches[key]
        return adapter.model(ids, stop_at_layer=0, past_kv_cache=cache, attention_mask=mask)

    return torch_bench.native(
        adapter,
        device,
        forward,
        "HookedTransformer.forward(stop_at_layer=0) on torch tensors (a frozen KV cache of "
        "past_length entries, built at the untimed first call); head unembed",
    )
