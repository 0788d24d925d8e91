"""The JAX backend: pure jitted functions over a {"wte", "wpe"} params dict, and its adapter."""
