"""The JAX backend: pure jitted functions over a {"wte", "wpe"} params dict, and its adapter."""

from gpt2_conformance.api.backend import REFERENCE, Backend

BACKEND = Backend(name="jax", adapter="adapter:JaxAdapter", requires=("jax",),
                  kind=REFERENCE, extra="jax", bench="bench",
                  bench_modes={"suite": (), "flag": ("forward",), "nocheck": ("forward", "backward")})
