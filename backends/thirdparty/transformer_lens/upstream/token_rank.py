"""HookedTransformer accepts token ids of rank 3: for tokens of shape [1, 1, 3] it returns a
rank-4 residual stream [1, 1, 3, d_model] (W_E[tokens] keeps the extra axis and the position
embedding broadcasts against it) instead of raising. Rank 1 ([T], lifted to [1, T]) is a
documented convenience and is not what this is about.

Standalone: needs only transformer-lens, torch and numpy. Exits 1 while [1, 1, 3] tokens return a
result, 0 once they raise. The width does not matter."""

import sys
import warnings

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
    "GPT-2 reference (openai/gpt-2 src/model.py L141-150): X is [batch, sequence]; "
    "`batch, sequence = shape_list(X)` fails for any other rank"
)
try:
    with torch.no_grad():
        h = model(torch.zeros((1, 1, 3), dtype=torch.long), stop_at_layer=0)
except Exception as exc:  # noqa: BLE001
    print(f"got: {type(exc).__name__}: {exc}")
    sys.exit(0)
print(f"got: no error; tokens [1, 1, 3] gave a residual stream of shape {list(h.shape)}")
sys.exit(1)
