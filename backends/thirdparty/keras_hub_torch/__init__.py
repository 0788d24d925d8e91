"""Third-party backend: keras-hub GPT2Backbone on the Keras torch backend (see
backends/thirdparty/keras_hub_common.py and waivers.toml here)."""

from gpt2_conformance.api.backend import JUDGED, Backend

BACKEND = Backend(
    name="keras-hub-torch",
    adapter="adapter:KerasHubTorchAdapter",
    requires=("keras_hub", "keras", "torch"),
    kind=JUDGED,
    wraps="keras-hub `GPT2Backbone`, Keras on PyTorch",
    extra="keras-hub",
    waivers="waivers.toml",
    bench="bench",
)
