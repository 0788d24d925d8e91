"""Third-party backend: Hugging Face transformers' GPT2LMHeadModel (PyTorch), built from a
GPT2Config with random init (no hub). See adapter.py and waivers.toml."""

from gpt2_conformance.api.backend import JUDGED, Backend

BACKEND = Backend(
    name="hf-transformers",
    adapter="adapter:HFTransformersAdapter",
    requires=("torch", "transformers"),
    kind=JUDGED,
    wraps="transformers `GPT2LMHeadModel` (PyTorch)",
    extra="hf",
    waivers="waivers.toml",
    bench="bench",
)
