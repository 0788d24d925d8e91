"""Native bench hooks of the keras-hub adapters on each Keras backend (conformance/api/bench.py):
native_bench, and native_available for the adapter's Keras backend.

The timed calls are the adapter's path, call_with_cache's embedding and the tied head, on the
backend's own tensors (keras.ops.convert_to_tensor, once, before timing):

    tokens = token_embedding(ids); positions = position_embedding(tokens, start_index=past)
    h = embeddings_add((tokens, positions));  logits = token_embedding(h, reverse=True)

on torch under torch.no_grad() as keras-hub's generate runs there, with the backend's own
synchronisation: jax block_until_ready, torch cuda.synchronize, and
TensorFlow's sync_devices on a GPU (its CPU eager ops return when done). On a GPU the tensors
go where Keras puts them: its backend's default device (all three use a GPU they see).

Eager, as the adapter runs them: keras-hub's generate() compiles its step on TensorFlow
and JAX (causal_lm.py L157 on), where XLA may fuse what eager calls do apart (the head's
transpose of wte, keras reversible_embedding.py L131), so these rows are the layers' eager
cost, not generate()'s.
"""

from __future__ import annotations

from gpt2_conformance.api.bench import NativeBench


def _sync(backend: str):
    if backend == "jax":
        import jax

        return jax.block_until_ready
    if backend == "torch":
        import torch

        def torch_sync(out):
            if torch.cuda.is_available():
                torch.cuda.synchronize()
            return out

        return torch_sync
    import tensorflow as tf

    gpu = bool(tf.config.list_physical_devices("GPU"))
    sync_devices = getattr(getattr(tf.test, "experimental", None), "sync_devices", None)

    def tf_sync(out):
        if gpu and sync_devices:
            sync_devices()
        return out

    return tf_sync


def available(backend: str, device: str) -> tuple[bool, str]:
    if device == "cpu":
        return True, ""
    if backend == "jax":
        import jax

        ok = any(d.platform == "gpu" for d in jax.devices())
    elif backend == "torch":
        import torch

        ok = torch.cuda.is_available()
    else:
        import tensorflow as tf

        ok = bool(tf.config.list_physical_devices("GPU"))
    return (True, "") if ok else (False, f"keras-hub on {backend}: {backend} sees no GPU on this machine")


def native_bench(adapter, device: str) -> NativeBench:
    backend = adapter.KERAS_BACKEND
    ops, b = adapter.keras.ops, adapter.backbone

    def forward(ids, past_length):
        tokens = b.token_embedding(ids)
        positions = b.position_embedding(tokens, start_index=past_length)
        return b.embeddings_add((tokens, positions))

    def logits(h):
        return b.token_embedding(h, reverse=True)

    if backend == "torch":  # as keras-hub's own generate runs on torch: under torch.no_grad()
        import torch  # (keras_hub src/models/causal_lm.py L147-154, keras-hub 0.32.0)

        forward, logits = torch.no_grad()(forward), torch.no_grad()(logits)

    return NativeBench(
        put=ops.convert_to_tensor,
        forward=forward,
        logits=logits,
        sync=_sync(backend),
        description=f"GPT2Backbone's embedding layers and tied head (reverse=True) on {backend} "
        "tensors, eager, as call_with_cache runs them",
        threads=f"keras on {backend}: the framework's defaults",
    )
