"""mlx-lm's GPT-2 initialises wte and wpe with mlx.nn.Embedding's default, N(0, 1/n_embd):
std 0.0361 at GPT-2's n_embd = 768, where GPT-2 draws wte at 0.02 and wpe at 0.01.

Standalone: needs only mlx, mlx-lm and numpy. Exits 1 while either std differs from GPT-2's by
more than 10%, 0 once both match. The std depends on the width, so this builds the real
n_embd = 768 (one block)."""

import sys

import mlx.core as mx
import numpy as np
from mlx_lm.models import gpt2

mx.random.seed(0)
args = gpt2.ModelArgs(
    model_type="gpt2",
    n_ctx=1024,
    n_embd=768,
    n_head=12,
    n_layer=1,
    n_positions=1024,
    layer_norm_epsilon=1e-5,
    vocab_size=50257,
)
model = gpt2.Model(args)
wte, wpe = np.array(model.model.wte.weight), np.array(model.model.wpe.weight)
print(f"got: wte std {wte.std():.4f}, wpe std {wpe.std():.4f} (1/sqrt(768) = {1 / np.sqrt(768):.4f})")
print("GPT-2 reference (openai/gpt-2 src/model.py L152-155): wte ~ N(0, 0.02^2), wpe ~ N(0, 0.01^2)")
sys.exit(0 if abs(wte.std() - 0.02) < 0.002 and abs(wpe.std() - 0.01) < 0.001 else 1)
