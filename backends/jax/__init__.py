"""The JAX backend: pure jitted functions over a {"wte", "wpe"} params dict, and its adapter."""

from gpt2_conformance.api.backend import CACHE, REFERENCE, Backend

# JAX compiles once per shape, and a verdict draws about 180 shapes (0.1 s each on 2 cores):
# its suite processes keep what they compiled in JAX's persistent compilation cache, so a shard
# loads what another process compiled (the cache's key is the program, JAX's version and the
# device; every compile is kept, not only those over JAX's default of 1 s)
BACKEND = Backend(name="jax", adapter="adapter:JaxAdapter", requires=("jax",),
                  kind=REFERENCE, extra="jax", bench="bench",
                  bench_modes={"suite": (), "flag": ("forward",), "nocheck": ("forward", "backward")},
                  child_env={"JAX_COMPILATION_CACHE_DIR": CACHE, "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0"})
