"""Third-party backends: keras-hub's GPT2Backbone on each Keras backend. One implementation, three
entries: the framework is a parameter (adapter.py sets KERAS_BACKEND per entry), and only what
really differs between the frameworks is kept apart: each entry's waivers and upstream causes in
on_<framework>/. The reproduction templates they share are in upstream/."""

from gpt2_conformance.api.backend import CACHE, JUDGED, Backend

# Keras on JAX runs each op eagerly, and JAX compiles each op once per shape: a verdict draws
# hundreds of shapes. As for the jax backend, the suite's processes keep what they compiled in
# JAX's persistent compilation cache (keyed by the program, JAX's version and the device), so a
# shard or a later run loads it instead of compiling again.
_JAX_CACHE = {"JAX_COMPILATION_CACHE_DIR": CACHE, "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0"}

# framework (Keras' backend name) -> (the adapter class in adapter.py, how the table names it, child env)
FRAMEWORKS = {
    "tensorflow": ("KerasHubTensorFlowAdapter", "TensorFlow", {}),
    "jax": ("KerasHubJaxAdapter", "JAX", _JAX_CACHE),
    "torch": ("KerasHubTorchAdapter", "PyTorch", {}),
}

BACKENDS = tuple(
    Backend(
        name=f"keras-hub-{framework}",
        adapter=f"adapter:{adapter}",
        requires=("keras_hub", "keras", framework),
        kind=JUDGED,
        wraps=f"keras-hub `GPT2Backbone`, Keras on {label}",
        extra="keras-hub",
        waivers=f"on_{framework}/waivers.toml",
        bench="bench",
        child_env=env,
    )
    for framework, (adapter, label, env) in FRAMEWORKS.items()
)
