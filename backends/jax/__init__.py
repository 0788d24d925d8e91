"""The JAX backend: pure jitted functions over a {"wte", "wpe"} params dict, and its adapter."""

from gpt2_conformance.api.backend import CACHE, REFERENCE, Backend, BenchMode

# JAX compiles once per shape (the forward once per power-of-two token count, model.py): a
# verdict's two shards compile dozens of programs. Its suite processes keep them
# in JAX's persistent compilation cache, so a later verdict loads what an earlier one compiled
# (the cache's key is the program, JAX's version and the device; every compile is kept, not
# only those over JAX's default minimum compile time)
BACKEND = Backend(
    name="jax",
    adapter="adapter:JaxAdapter",
    requires=("jax",),
    kind=REFERENCE,
    wraps=(
        "pure functions under `jax.jit`, flat tokens with their positions (one compile per power-of-two "
        "count), ids checked by `checkify`"
    ),
    extra="jax",
    bench="bench",
    bench_modes={
        "suite": BenchMode(
            about="jax.jit(checkify(gather + add)) (the adapter's mode): check inside the kernel",
            check="on (checkify min/max in the kernel)",
        ),
        "flag": BenchMode(
            about="jax.jit(gather + add) returning an in-range flag; the host raises on it",
            check="on (min/max flag out of the kernel, host raises)",
            kinds=("forward",),
        ),
        "nocheck": BenchMode(
            about="jax.jit(gather + add), no id check (for the check's cost only)",
            check="OFF (comparison only)",
            kinds=("forward", "backward"),
        ),
    },
    child_env={"JAX_COMPILATION_CACHE_DIR": CACHE, "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0"},
)
