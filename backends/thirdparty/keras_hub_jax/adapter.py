"""keras-hub GPT2Backbone on Keras' jax backend: backends/thirdparty/keras_hub_common.py does the work.
Keras is imported (with KERAS_BACKEND=jax) when the first adapter is built."""

from gpt2_conformance.backends.thirdparty.keras_hub_common import KerasHubGPT2Adapter


class KerasHubJaxAdapter(KerasHubGPT2Adapter):
    KERAS_BACKEND = "jax"
