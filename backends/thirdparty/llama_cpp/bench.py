"""Native bench hooks for llama.cpp running the adapter's GPT-2 GGUF (conformance/api/bench.py).

llama.cpp's own buffers are host memory it owns: the ids go in as ctypes llama_token arrays made
once by put (as llama-cpp-python hands tokens to llama_decode), h comes out of the graph's
"inpL" tensor through the eval callback (a copy of [T, d] floats, the only way llama.cpp gives a
tensor out), and the logits are a view of llama.cpp's own output buffer (llama_get_logits), no
copy. The offset is the engine's: the cache is filled with past_length placeholder tokens at the
first call for that past_length (untimed), and every timed forward decodes each row after it
and then removes the row from the cache again (llama_memory_seq_rm), as a decode loop that
rolls back would. The head is llama.cpp's head fed h through the callback (adapter.py), for
tokens placed after the cache and removed after. A decode step is the two calls; llama.cpp's
own generation step is one llama_decode that runs the (zero) block and ln_f between them.
CPU only, llama.cpp's threads set to this process's cores (machine.threads()).
"""

from __future__ import annotations

import llama_cpp
import numpy as np

from gpt2_conformance.api.bench import NativeBench
from gpt2_conformance.backends.thirdparty.llama_cpp.adapter import H_TENSOR, PAST_TOKEN


def native_available(device: str) -> tuple[bool, str]:
    if device == "cpu":
        return True, ""
    return False, "the llama-cpp adapter runs llama.cpp's CPU backend only"


def native_bench(adapter, device: str):
    memory = llama_cpp.llama_get_memory(adapter.ctx)
    cached = {"past": None}  # the past_length the cache holds now

    def put(array):
        if array.dtype.kind in "iu":
            return [(llama_cpp.llama_token * array.shape[1])(*row.tolist()) for row in array]
        return np.ascontiguousarray(array, np.float32)

    def hold(past_length):
        if cached["past"] != past_length:
            llama_cpp.llama_memory_clear(memory, True)
            cached["past"] = None
            if past_length:
                adapter._decode(np.full(past_length, PAST_TOKEN, np.int32).tolist())
            cached["past"] = past_length

    def forward(rows, past_length):
        hold(past_length)
        out = []
        for tokens in rows:
            adapter._start_capture()
            adapter.engine.log.clear()
            code = llama_cpp.llama_decode(adapter.ctx, llama_cpp.llama_batch_get_one(tokens, len(tokens)))
            llama_cpp.llama_memory_seq_rm(memory, 0, past_length, -1)
            adapter.check_status(code)
            (h,) = adapter.captured(H_TENSOR)  # a row of at most n_batch tokens: one graph evaluation
            out.append(h)
        return out

    def logits(h):
        return [adapter.head_call(row, cached["past"] or 0) for row in h]

    return NativeBench(
        put=put,
        forward=forward,
        logits=logits,
        description="llama_decode of ctypes token arrays after a cache of past_length tokens "
        "(h read from the graph, the row then removed from the cache); the head fed h "
        "through the eval callback, logits a view of llama.cpp's output buffer",
        threads=f"n_threads = {llama_cpp.llama_n_threads(adapter.ctx)}",
    )
