"""HookedTransformer's "gpt2" init draws W_E and W_pos from N(0, initializer_range^2) with
initializer_range defaulting to 0.8 / sqrt(d_model): std 0.0289 at GPT-2's d_model = 768,
where GPT-2 draws wte at 0.02 and wpe at 0.01.

Standalone: needs only transformer-lens, torch and numpy. Exits 1 while either std differs from
GPT-2's by more than 10%, 0 once both match. The std depends on the width, so this builds the
real d_model = 768 (one block)."""

import sys
import warnings

import numpy as np
import torch
from transformer_lens import HookedTransformer, HookedTransformerConfig


# GPT-2 as TransformerLens builds it from an explicit config (the fields its own GPT-2 conversion
# sets, loading_from_pretrained.py), random init, no hub, one block.
def gpt2_config(d_model):
    n_heads = max(1, d_model // 64)
    return HookedTransformerConfig(
        d_model=d_model,
        d_head=d_model // n_heads,
        n_heads=n_heads,
        d_mlp=4 * d_model,
        n_layers=1,
        n_ctx=1024,
        eps=1e-5,
        d_vocab=50257,
        act_fn="gelu_new",
        use_attn_scale=True,
        normalization_type="LN",
        original_architecture="GPT2LMHeadModel",
        device="cpu",
    )


warnings.filterwarnings("ignore", category=DeprecationWarning)  # 3.x: HookedTransformer is deprecated
torch.manual_seed(0)
cfg = gpt2_config(768)
model = HookedTransformer(cfg)
W_E, W_pos = model.embed.W_E.detach().numpy(), model.pos_embed.W_pos.detach().numpy()
print(
    f"got: W_E std {W_E.std():.4f}, W_pos std {W_pos.std():.4f} (init_mode {cfg.init_mode!r}, "
    f"initializer_range {cfg.initializer_range:.4f})"
)
print("GPT-2 reference (openai/gpt-2 src/model.py L152-155): wte ~ N(0, 0.02^2), wpe ~ N(0, 0.01^2)")
sys.exit(0 if abs(W_E.std() - 0.02) < 0.002 and abs(W_pos.std() - 0.01) < 0.001 else 1)
