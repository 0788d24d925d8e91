"""Native bench hooks for ONNX Runtime running the exported GPT2LMHeadModel
(conformance/api/bench.py).

ORT's own tensors are OrtValues: put turns the ids (cast to the graph's int64 input, as a
deployment feeds it) and h (in the model's dtype) into OrtValues once, before timing; the zero
cache inputs of each (batch, past_length) are made at the untimed first call. The timed calls
are InferenceSession.run_with_ort_values (OrtValues in and out, no numpy) for the "h" output
and for the "logits" output, on the same session the adapter built. CPU only: the session runs
on the CPUExecutionProvider, as the adapter claims.
"""

from __future__ import annotations

import numpy as np
import onnxruntime as ort

from gpt2_conformance.api.bench import NativeBench


def native_available(device: str) -> tuple[bool, str]:
    if device == "cpu":
        return True, ""
    return False, "the onnxruntime-hf adapter builds its session on the CPUExecutionProvider only"


def native_bench(adapter, device: str):
    session, graph, dtype = adapter.session, adapter.graph, adapter.np_dtype
    d = adapter.config.n_embd

    def value(array):
        return ort.OrtValue.ortvalue_from_numpy(np.ascontiguousarray(array))

    def put(array):
        array = array.astype(np.int64) if array.dtype.kind in "iu" else array.astype(dtype)
        return value(array)

    caches = {}

    def cache(batch, past_length):
        key = (batch, past_length)
        if key not in caches:
            caches[key] = value(np.zeros((batch, graph.n_head, past_length, graph.head_dim), dtype))
        return caches[key]

    no_h, no_ids = value(np.zeros((1, 0, d), dtype)), value(np.zeros((1, 0), np.int64))

    def forward(ids, past_length):
        kv = cache(ids.shape()[0], past_length)
        return session.run_with_ort_values(
            ["h"], {"input_ids": ids, "h_final": no_h, "past_key": kv, "past_value": kv}
        )[0]

    def logits(h):
        kv = cache(1, 0)
        return session.run_with_ort_values(
            ["logits"], {"input_ids": no_ids, "h_final": h, "past_key": kv, "past_value": kv}
        )[0]

    return NativeBench(
        put=put,
        forward=forward,
        logits=logits,
        description="InferenceSession.run_with_ort_values on OrtValues (ids int64 and the zero cache "
        "put once), outputs h and logits",
        threads="ORT default session options (intra-op threads: all cores)",
    )
