"""Third-party backend: TransformerLens' HookedTransformer (PyTorch), GPT-2-shaped, built from an
explicit HookedTransformerConfig with random init (no hub). See adapter.py and waivers.toml."""
