"""Third-party backend: IREE (iree-base-compiler for llvm-cpu, iree-base-runtime's local-task
driver) running Hugging Face's GPT2LMHeadModel (GPT2Config, random init, no hub) exported by
torch.export and imported by iree-turbine. See adapter.py and waivers.toml."""

from gpt2_conformance.api.backend import CACHE, JUDGED, Backend

BACKEND = Backend(
    name="iree-hf",
    adapter="adapter:IreeHFAdapter",
    requires=("torch", "transformers", "iree.compiler", "iree.runtime", "iree.turbine"),
    kind=JUDGED,
    wraps="HF `GPT2LMHeadModel` exported by `torch.export` (dynamic batch, length and offset), imported by "
    "iree-turbine, compiled by IREE for llvm-cpu (host CPU) and run by iree.runtime (local-task); h = "
    "hidden_states[0], an output of the compiled forward; logits from the compiled `lm_head`",
    extra="iree",
    waivers="waivers.toml",
    # the compiled .vmfb modules, one per (n_embd, dtype), kept between the suite's processes and runs
    child_env={"GPT2C_IREE_HF_CACHE": CACHE},
)
