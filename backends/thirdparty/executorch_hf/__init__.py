"""Third-party backend: ExecuTorch (portable CPU kernels, its runtime's Python binding) running
Hugging Face transformers' GPT2Model exported by torch.export (GPT2Config, random init, no hub).
See adapter.py and waivers.toml."""

from gpt2_conformance.api.backend import CACHE, JUDGED, Backend

BACKEND = Backend(
    name="executorch-hf",
    adapter="adapter:ExecuTorchHFAdapter",
    requires=("torch", "transformers", "executorch"),
    kind=JUDGED,
    wraps="HF `GPT2Model` exported by `torch.export` to an ExecuTorch .pte (portable kernels), run by "
    "`executorch.runtime`; h the program's output (hidden_states[0]), tables and past_length program inputs, "
    "logits a second program (the tied lm_head)",
    extra="executorch",
    waivers="waivers.toml",
    # the exported .pte programs (one per n_embd, dtype and shape bucket), kept between the suite's
    # processes and runs (without it each child exports and lowers every program it meets again)
    child_env={"GPT2C_EXECUTORCH_CACHE": CACHE},
)
