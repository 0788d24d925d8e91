"""Third-party backend: mlx-lm's GPT-2 (`mlx_lm.models.gpt2.Model`, Apple's MLX, CPU),
built from a ModelArgs with random init (no hub). See adapter.py and waivers.toml."""

from gpt2_conformance.api.backend import JUDGED, Backend

BACKEND = Backend(
    name="mlx-lm",
    adapter="adapter:MlxLmAdapter",
    requires=("mlx", "mlx_lm"),
    kind=JUDGED,
    wraps="mlx-lm `models.gpt2.Model` on MLX (CPU)",
    extra="mlx",
    waivers="waivers.toml",
    bench="bench",
)
