"""Third-party backend: keras-hub GPT2Backbone on the Keras tensorflow backend (see
backends/thirdparty/keras_hub_common.py and waivers.toml here)."""

from gpt2_conformance.api.backend import JUDGED, Backend

BACKEND = Backend(
    name="keras-hub-tensorflow",
    adapter="adapter:KerasHubTensorFlowAdapter",
    requires=("keras_hub", "keras", "tensorflow"),
    kind=JUDGED,
    wraps="keras-hub `GPT2Backbone`, Keras on TensorFlow",
    extra="keras-hub",
    waivers="waivers.toml",
    bench="bench",
)
