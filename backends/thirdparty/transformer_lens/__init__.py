"""Third-party backend: TransformerLens' HookedTransformer (PyTorch), GPT-2-shaped, built from an
explicit HookedTransformerConfig with random init (no hub). See adapter.py and waivers.toml."""

from gpt2_conformance.api.backend import JUDGED, Backend

BACKEND = Backend(
    name="transformer-lens",
    adapter="adapter:TransformerLensAdapter",
    requires=("torch", "transformer_lens"),
    kind=JUDGED,
    wraps="TransformerLens `HookedTransformer` (PyTorch)",
    extra="transformer-lens",
    waivers="waivers.toml",
    bench="bench",
)
