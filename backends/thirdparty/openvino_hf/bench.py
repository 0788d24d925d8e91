"""Native bench hooks for OpenVINO running the exported GPT2LMHeadModel
(conformance/api/bench.py).

OpenVINO's own tensors are ov.Tensors: put turns the ids (cast to the graph's int64 input, as a
deployment feeds it) and h (in the model's dtype) into ov.Tensors once, before timing; the zero
cache input of each (batch, past_length) is made at the untimed first call. The timed calls are
InferRequest.infer on ov.Tensors (share_inputs, so nothing is copied in) for the "h" output and
for the "logits" output, on the compiled model the adapter built; they return the request's
output ov.Tensor (no numpy). CPU only, as the adapter claims.
"""

from __future__ import annotations

import numpy as np
import openvino as ov

from gpt2_conformance.api.bench import NativeBench


def native_available(device: str) -> tuple[bool, str]:
    if device == "cpu":
        return True, ""
    return False, "the openvino-hf adapter compiles its model for OpenVINO's CPU plugin only"


def native_bench(adapter, device: str):
    compiled, request, graph, dtype = adapter.compiled, adapter.request, adapter.graph, adapter.np_dtype
    d = adapter.config.n_embd
    inputs = {name for port in compiled.inputs for name in port.get_names()}
    h_port, logits_port = compiled.output("h"), compiled.output("logits")

    def tensor(array):
        return ov.Tensor(np.ascontiguousarray(array))  # copies into a tensor of OpenVINO's own

    def put(array):
        return tensor(array.astype(np.int64) if array.dtype.kind in "iu" else array.astype(dtype))

    caches = {}

    def cache(batch, past_length):
        key = (batch, past_length)
        if key not in caches:
            caches[key] = tensor(np.zeros((batch, graph.n_head, past_length, graph.head_dim), dtype))
        return caches[key]

    no_h, no_ids = tensor(np.zeros((1, 0, d), dtype)), tensor(np.zeros((1, 0), np.int64))

    def run(ids, past_length, h, port):
        kv = cache(ids.get_shape()[0], past_length)
        feeds = {"input_ids": ids, "h_final": h, "past_key": kv, "past_value": kv}
        request.infer({k: v for k, v in feeds.items() if k in inputs}, share_inputs=True)
        return request.get_tensor(port)

    return NativeBench(
        put=put,
        forward=lambda ids, past_length: run(ids, past_length, no_h, h_port),
        logits=lambda h: run(no_ids, 0, h, logits_port),
        description="InferRequest.infer on ov.Tensors (ids int64 and the zero cache put once, "
        "share_inputs), outputs h and logits as the request's ov.Tensors",
        threads="OpenVINO CPU plugin defaults (PERFORMANCE_HINT latency: all cores)",
    )
