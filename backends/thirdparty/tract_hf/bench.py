"""Native bench hooks for tract running the exported GPT2LMHeadModel
(conformance/api/bench.py).

tract's own tensors are tract.Tensors: put turns the ids (cast to the graph's int64 input, as a
deployment feeds it) and h (in the model's dtype) into tract.Tensors once, before timing (that
is where tract copies: tract_tensor_from_bytes); the zero cache input of each (batch,
past_length) is made at the untimed first call. The timed calls are State.run on tract.Tensors
(a State spawned once from each of the adapter's two Runnables, the graph with its "h" output
and with its "logits" output; the model has no state of its own to carry), returning the h or
logits tract.Tensor (no numpy). CPU only: tract's default runtime.
"""

from __future__ import annotations

import numpy as np
import tract

from gpt2_conformance.api.bench import NativeBench
from gpt2_conformance.backends.thirdparty.onnxruntime_hf import export


def native_available(device: str) -> tuple[bool, str]:
    if device == "cpu":
        return True, ""
    return False, "the tract-hf adapter runs tract's default CPU runtime only"


def native_bench(adapter, device: str):
    graph, dtype, d = adapter.graph, adapter.np_dtype, adapter.config.n_embd
    # one State per output model (the adapter loads the graph once per output: adapter.py)
    states = {}
    for output in export.OUTPUTS:
        runnable, inputs = adapter.runnable(output)
        states[output] = (runnable.spawn_state(), inputs)

    def tensor(array):
        return tract.Tensor.from_numpy(np.ascontiguousarray(array))

    batches = {}  # id of a put tensor -> its batch size (tract.Tensor has no cheap shape)

    def put(array):
        out = tensor(array.astype(np.int64) if array.dtype.kind in "iu" else array.astype(dtype))
        batches[id(out)] = array.shape[0]
        return out

    caches = {}

    def cache(batch, past_length):
        key = (batch, past_length)
        if key not in caches:
            caches[key] = tensor(np.zeros((batch, graph.n_head, past_length, graph.head_dim), dtype))
        return caches[key]

    no_h, no_ids = tensor(np.zeros((1, 0, d), dtype)), tensor(np.zeros((1, 0), np.int64))

    def run(feeds, output):
        state, inputs = states[output]
        return state.run([feeds[name] for name in inputs])[0]

    def forward(ids, past_length):
        kv = cache(batches[id(ids)], past_length)
        return run({"input_ids": ids, "past_key": kv, "past_value": kv, "h_final": no_h}, "h")

    def logits(h):
        kv = cache(1, 0)
        return run({"input_ids": no_ids, "past_key": kv, "past_value": kv, "h_final": h}, "logits")

    return NativeBench(
        put=put,
        forward=forward,
        logits=logits,
        description="State.run on tract.Tensors (ids int64 and the zero cache put once), outputs h "
        "and logits as tract.Tensors",
        threads="tract defaults",
    )
