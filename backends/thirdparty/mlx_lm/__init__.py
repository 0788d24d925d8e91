"""Third-party backend: mlx-lm's GPT-2 (`mlx_lm.models.gpt2.Model`, Apple's MLX, CPU),
built from a ModelArgs with random init (no hub). See adapter.py and waivers.toml."""
