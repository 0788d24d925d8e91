"""Third-party backend: keras-hub GPT2Backbone on the Keras jax backend (see
backends/thirdparty/keras_hub_common.py and waivers.toml here)."""
