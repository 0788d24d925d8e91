"""HookedTransformer does not check the sequence length against n_ctx: for 1025 tokens
(n_ctx = 1024) PosEmbed's slice W_pos[0:1025] comes back with 1024 rows and the sum with the
token embedding fails with a shape mismatch that names neither the position nor n_ctx.

Standalone: needs only transformer-lens, torch and numpy. Exits 1 while T = 1025 raises anything
but an IndexError/ValueError naming n_ctx 1024, 0 once it does. n_ctx is GPT-2's 1024."""

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
    "GPT-2 reference (openai/gpt-2 src/model.py L152, L157): wpe has n_ctx = 1024 rows and "
    "tf.gather(wpe, positions) on CPU raises for position 1024 ('indices[0,1024] = 1024 is not in [0, 1024)')"
)
try:
    with torch.no_grad():
        model(torch.zeros((1, 1025), dtype=torch.long), stop_at_layer=0)
except Exception as exc:  # noqa: BLE001
    print(f"got: {type(exc).__name__}: {exc}")
    sys.exit(0 if isinstance(exc, (IndexError, ValueError)) and "1024" in str(exc) else 1)
print("got: no error")
sys.exit(1)
