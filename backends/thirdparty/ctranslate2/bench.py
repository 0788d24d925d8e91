"""Native bench hooks for CTranslate2 running the adapter's GPT-2 decoder spec
(conformance/bench/native.py).

CTranslate2's own tensors are StorageViews: put turns the ids into an int32 StorageView and
their lengths into another, once, before timing (forward_batch takes a dense StorageView with a
lengths vector, the form that skips converting Python lists); the timed call is
Generator.forward_batch on them, returning h as a StorageView (no numpy). That call also runs
the zero block CTranslate2 needs (adapter.py), whose attention over the sequence is most of a
prefill's time: the row is CTranslate2's forward, not its gather alone. Only the forward is
timed: the head runs in a model whose token rows are written and loaded for each call
(adapter.py), which would time a model load, not the projection; and a cached decode is not
timed because no API of the Python package runs given ids after a cache (kv_cache is not
claimed). CPU only, the Generator's intra_threads set to the machine's cores.
"""

from __future__ import annotations

import ctranslate2
import numpy as np

from gpt2_conformance.api.bench import NativeBench


def native_available(device: str) -> tuple[bool, str]:
    if device == "cpu":
        return True, ""
    return False, "the ctranslate2 adapter runs CTranslate2's CPU backend only"


def native_bench(adapter, device: str):
    held = []  # a StorageView made by from_array shares the array's memory: the arrays stay alive here

    def view(array):
        held.append(array)
        return ctranslate2.StorageView.from_array(array)

    def put(array):
        if array.dtype.kind in "iu":
            return view(np.ascontiguousarray(array, np.int32)), view(np.full(array.shape[0], array.shape[1], np.int32))
        return view(np.ascontiguousarray(array, np.float32))

    def forward(ids, past_length):
        if past_length:
            raise NotImplementedError("CTranslate2's Python API runs given ids from position 0 only")
        tokens, lengths = ids
        return adapter.generator.forward_batch(tokens, lengths)

    return NativeBench(put=put, forward=forward, logits=None,
                       description="Generator.forward_batch on int32 StorageViews of the ids and their lengths (put "
                                   "once), h returned as a StorageView (the zero block it needs included); the head and "
                                   "cached calls are not timed",
                       threads=f"intra_threads = {adapter.intra_threads}")
