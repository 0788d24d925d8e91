"""Native bench hooks for keras-hub's GPT2Backbone on Keras' jax backend (the shared code:
backends/thirdparty/keras_hub_bench.py)."""

from gpt2_conformance.backends.thirdparty import keras_hub_bench


def native_available(device: str) -> tuple[bool, str]:
    return keras_hub_bench.available("jax", device)


def native_bench(adapter, device: str):
    return keras_hub_bench.native_bench(adapter, device)
