"""HookedTransformer built from a GPT-2 config has an untied head: unembed.W_U [d_model,
d_vocab] and unembed.b_U [d_vocab] are their own parameters, not embed.W_E. GPT-2 ties the
output projection to the token embedding and has no output bias, so a model trained from this
config has 38,647,633 more parameters at d_model = 768 and its logits are not h @ W_E^T.

Standalone: needs only transformer-lens, torch and numpy. Exits 1 while W_U is not W_E^T's
storage, 0 once the head reads embed.W_E. The tying does not depend on the width."""

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
model = HookedTransformer(gpt2_config(64)).eval()
W_E, W_U, b_U = model.embed.W_E, model.unembed.W_U, model.unembed.b_U
same_storage = W_U.data_ptr() == W_E.data_ptr()
h = torch.randn(1, 1, 64)
with torch.no_grad():
    gap = (model.unembed(h) - h @ W_E.T).abs().max().item()
extra = W_U.numel() + b_U.numel()
print(
    f"got: unembed.W_U {tuple(W_U.shape)} shares embed.W_E's storage: {same_storage}; unembed.b_U {tuple(b_U.shape)}; "
    f"max |unembed(h) - h @ W_E^T| = {gap:.3g}; head parameters beyond W_E: {extra:,} at d_model 64 "
    f"({768 * 50257 + 50257:,} at 768)"
)
print(
    "GPT-2 reference (openai/gpt-2 src/model.py L170-171): logits = tf.matmul(h_flat, wte, transpose_b=True), "
    "the token embedding itself, no bias"
)
sys.exit(0 if same_storage else 1)
