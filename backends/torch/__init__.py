"""The PyTorch backend: GPT-2's token + position embedding and tied head as an nn.Module."""

from gpt2_conformance.api.backend import REFERENCE, Backend, BenchMode

BACKEND = Backend(
    name="torch",
    adapter="adapter:TorchAdapter",
    requires=("torch",),
    kind=REFERENCE,
    wraps="`nn.Module` with two `nn.Embedding`s, head `F.linear` on the same Parameter; eager, `no_grad`",
    extra="torch",
    bench="bench",
    bench_modes={
        "suite": BenchMode(
            about="eager GPT2Embedding (the adapter's mode), aminmax check + host sync",
            check="on (aminmax on device, host sync)",
        ),
        "compile": BenchMode(
            about="eager check (aminmax + host sync), then torch.compile(embedding + add)",
            check="on (eager aminmax + host sync before the compiled kernel)",
        ),
        "suite-1thread": BenchMode(
            about="the suite mode with torch.set_num_threads(1)",
            check="on (aminmax on device, host sync)",
        ),
        "nocheck": BenchMode(
            about="forward only: the compile mode's torch.compile(embedding + add) with no check (comparison only)",
            check="OFF (comparison only)",
            kinds=("forward",),
        ),
    },
)
