"""Third-party backend: Hugging Face transformers' GPT2LMHeadModel (PyTorch), built from a
GPT2Config with random init (no hub). See adapter.py and waivers.toml."""
