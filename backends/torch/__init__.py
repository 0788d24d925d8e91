"""The PyTorch backend: GPT-2's token + position embedding and tied head as an nn.Module."""

from gpt2_conformance.api.backend import REFERENCE, Backend

BACKEND = Backend(
    name="torch",
    adapter="adapter:TorchAdapter",
    requires=("torch",),
    kind=REFERENCE,
    extra="torch",
    bench="bench",
    bench_modes={"suite": (), "compile": (), "suite-1thread": (), "nocheck": ("forward",)},
)
