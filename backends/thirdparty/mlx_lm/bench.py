"""Native bench hooks for mlx-lm's GPT-2 (conformance/api/bench.py).

The timed forward is the adapter's observation path on mx.arrays: GPT2Model.__call__ with a
prompt cache of past_length entries built once per shape, at the untimed first call (the
forward stops at block 0's input, before any block writes to the cache), then mx.eval: MLX is
lazy, so sync is what computes. The head is wte.as_linear, the tied head of Model.__call__.
CPU only: the adapter runs on MLX's CPU backend (the mlx[cpu] wheel).
"""

from __future__ import annotations

import mlx.core as mx

from gpt2_conformance.api.bench import NativeBench
from gpt2_conformance.backends.thirdparty.mlx_lm.adapter import StopAtBlock0


def native_available(device: str) -> tuple[bool, str]:
    if device == "cpu":
        return True, ""
    return False, "mlx-lm runs on MLX's CPU backend here (mlx[cpu]); MLX's GPU is Metal, on Apple machines only"


def _sync(out):
    mx.eval(out)
    return out


def native_bench(adapter, device: str):
    caches = {}
    model = adapter.model.model

    def forward(ids, past_length):
        key = (ids.shape[0], past_length)
        if key not in caches:
            caches[key] = adapter._cache(ids.shape[0], past_length)
        adapter._captured = None
        try:
            model(ids, cache=caches[key])
        except StopAtBlock0:
            pass
        return adapter._captured

    return NativeBench(
        put=lambda a: _sync(mx.array(a)),
        forward=forward,
        logits=model.wte.as_linear,
        sync=_sync,
        description="GPT2Model.__call__ on mx.arrays to block 0's input (a prompt cache of past_length "
        "entries, built at the untimed first call), mx.eval; head wte.as_linear",
        threads="MLX CPU defaults",
    )
