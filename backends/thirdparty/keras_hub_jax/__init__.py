"""Third-party backend: keras-hub GPT2Backbone on the Keras jax backend (see
backends/thirdparty/keras_hub_common.py and waivers.toml here)."""

from gpt2_conformance.api.backend import JUDGED, Backend

BACKEND = Backend(name="keras-hub-jax", adapter="adapter:KerasHubJaxAdapter", requires=("keras_hub", "keras", "jax"),
                  kind=JUDGED, extra="keras-hub", waivers="waivers.toml", bench="bench")
