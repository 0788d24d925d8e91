"""Third-party backend: Apache TVM (Relax) compiling the torch.export graph of Hugging Face's
GPT2LMHeadModel (GPT2Config, random init, no hub) for target "llvm", run on the Relax VM.
See adapter.py and waivers.toml."""

from gpt2_conformance.api.backend import CACHE, JUDGED, Backend

BACKEND = Backend(
    name="tvm-relax-hf",
    adapter="adapter:TvmRelaxHFAdapter",
    requires=("torch", "transformers", "tvm"),
    kind=JUDGED,
    wraps="HF `GPT2LMHeadModel` through `torch.export` -> TVM Relax (`from_exported_program`, dynamic shapes), "
    "`tvm.compile` for llvm, run on the Relax VM; h and the tied head's logits are outputs of the compiled function",
    extra="tvm",
    waivers="waivers.toml",
    # the compiled library (export_library), one per width and dtype, kept between the suite's
    # processes and runs (without it each child exports and compiles again)
    child_env={"GPT2C_TVM_CACHE": CACHE},
)
