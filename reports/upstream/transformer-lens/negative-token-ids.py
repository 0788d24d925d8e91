"""HookedTransformer looks token ids up with W_E[tokens] (torch advanced indexing), so a
negative id wraps around: id -1 silently reads W_E[50256]. Ids >= d_vocab do raise IndexError.

Standalone: needs only transformer-lens, torch and numpy. Exits 1 while id -1 returns a result,
0 once it raises. The width does not matter."""

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
print(
    "GPT-2 reference (openai/gpt-2 src/model.py L154, L157): wte has 50257 rows (ids 0..50256) and "
    "tf.gather(wte, X) on CPU raises for -1 ('indices[0,0] = -1 is not in [0, 50257)')"
)
try:
    with torch.no_grad():
        h = model(torch.tensor([[-1, 50256]]), stop_at_layer=0)  # the residual stream entering block 0
except Exception as exc:  # noqa: BLE001
    print(f"got: {type(exc).__name__}: {exc}")
    sys.exit(0)
W_E, W_pos = model.embed.W_E, model.pos_embed.W_pos
print(f"got: no error; h[0, 0] equals W_E[50256] + W_pos[0]: {torch.equal(h[0, 0], W_E[50256] + W_pos[0])}")
sys.exit(1)
