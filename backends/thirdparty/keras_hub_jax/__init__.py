"""Third-party backend: keras-hub GPT2Backbone on the Keras jax backend (see
backends/thirdparty/keras_hub_common.py and waivers.toml here)."""

from gpt2_conformance.api.backend import CACHE, JUDGED, Backend

# Keras on JAX runs each op eagerly, and JAX compiles each op once per shape: a verdict draws
# hundreds of shapes. As for the jax backend, the suite's processes keep what they compiled in
# JAX's persistent compilation cache (keyed by the program, JAX's version and the device), so a
# shard or a later run loads it: 64 s for a first verdict, 51 s once the cache holds it.
BACKEND = Backend(
    name="keras-hub-jax",
    adapter="adapter:KerasHubJaxAdapter",
    requires=("keras_hub", "keras", "jax"),
    kind=JUDGED,
    wraps="keras-hub `GPT2Backbone`, Keras on JAX",
    extra="keras-hub",
    waivers="waivers.toml",
    bench="bench",
    child_env={"JAX_COMPILATION_CACHE_DIR": CACHE, "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0"},
)
