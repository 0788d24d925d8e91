"""The NumPy reference backend: the spec's formulas, with the spec's input checks."""

from gpt2_conformance.api.backend import REFERENCE, Backend

BACKEND = Backend(
    name="numpy",
    adapter="adapter:NumpyAdapter",
    requires=("numpy",),
    kind=REFERENCE,
    extra="",
    bench="bench",
    bench_modes={"suite": (), "take-out": ("forward",), "fancy": ("forward",), "nocheck": ("forward",)},
)
