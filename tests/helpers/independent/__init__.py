"""Independent correct implementations of GPT-2's embedding and tied head, each written the
way its framework's own documentation teaches, with the input checks such code has of its own
and none of the suite's helpers (nothing from gpt2_conformance.api.validation). They are the
specificity half of the kill matrix: every clause must pass on each (tests/test_independent.py),
as every mutant must fail its own. A spec change that fails one of them judges the suite's
habits, not GPT-2, and does not land.

Names only here, so that importing this package imports no framework: each module imports its
own. IMPLEMENTATIONS: name -> (the framework module it needs, "module:Adapter").
"""

IMPLEMENTATIONS = {
    "numpy-plain": ("numpy", "helpers.independent.numpy_plain:Adapter"),
    "torch-embedding": ("torch", "helpers.independent.torch_embedding:Adapter"),
    "torch-parameters": ("torch", "helpers.independent.torch_parameters:Adapter"),
    "keras-layers": ("keras", "helpers.independent.keras_layers:Adapter"),
    "flax-linen": ("flax", "helpers.independent.flax_linen:Adapter"),
    "tensorflow-variables": ("tensorflow", "helpers.independent.tensorflow_variables:Adapter"),
}
