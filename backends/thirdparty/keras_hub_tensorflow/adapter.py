"""keras-hub GPT2Backbone on Keras' tensorflow backend: backends/thirdparty/keras_hub_common.py does the work.
Keras is imported (with KERAS_BACKEND=tensorflow) when the first adapter is built."""

from gpt2_conformance.backends.thirdparty.keras_hub_common import KerasHubGPT2Adapter


class KerasHubTensorFlowAdapter(KerasHubGPT2Adapter):
    KERAS_BACKEND = "tensorflow"
