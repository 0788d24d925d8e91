"""Third-party backend: Hugging Face transformers' GPT2LMHeadModel compiled by torch.compile
(TorchDynamo + Inductor, CPU C++ kernels), built from a GPT2Config with random init (no hub).
See adapter.py and waivers.toml."""

from gpt2_conformance.api.backend import CACHE, JUDGED, Backend

BACKEND = Backend(
    name="torch-compile-hf",
    adapter="adapter:TorchCompileHFAdapter",
    requires=("torch", "transformers"),
    kind=JUDGED,
    wraps="transformers `GPT2LMHeadModel` (PyTorch) compiled by `torch.compile` (Inductor, CPU C++ kernels, "
    "fullgraph, dynamic shapes); h a graph output of the compiled forward",
    extra="torch-compile",
    waivers="waivers.toml",
    # Inductor's compiled kernels and FX graphs, kept between the suite's processes and runs
    # (without it each child recompiles every graph it meets)
    child_env={"TORCHINDUCTOR_CACHE_DIR": CACHE},
)
