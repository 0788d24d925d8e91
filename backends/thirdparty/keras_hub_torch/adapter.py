"""keras-hub GPT2Backbone on Keras' torch backend: backends/thirdparty/keras_hub_common.py does the work.
Keras is imported (with KERAS_BACKEND=torch) when the first adapter is built."""

from gpt2_conformance.backends.thirdparty.keras_hub_common import KerasHubGPT2Adapter


class KerasHubTorchAdapter(KerasHubGPT2Adapter):
    KERAS_BACKEND = "torch"
