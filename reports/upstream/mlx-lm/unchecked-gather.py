"""mlx-lm's GPT-2 does not check token ids or positions against the embedding tables: id -1
silently reads the last row of wte, and a prompt of 1025 tokens (n_positions = 1024) returns
logits computed from a wpe row read past the end of the table. Ids or caches further out
read unmapped memory and kill the process (SIGSEGV), so this script stays one row past the end.

Standalone: needs only mlx, mlx-lm and numpy. Exits 1 while either call returns, 0 once both
raise. n_positions is GPT-2's 1024; the width does not matter."""

import sys

import mlx.core as mx
import numpy as np
from mlx_lm.models import gpt2

# GPT-2's vocabulary and context from explicit ModelArgs (no hub), random init, one block
args = gpt2.ModelArgs(
    model_type="gpt2",
    n_ctx=1024,
    n_embd=64,
    n_head=1,
    n_layer=1,
    n_positions=1024,
    layer_norm_epsilon=1e-5,
    vocab_size=50257,
)
model = gpt2.Model(args)
model.eval()
print(
    "GPT-2 reference (openai/gpt-2 src/model.py L152-157): wte has 50257 rows and wpe 1024; tf.gather on CPU "
    "raises for id -1 ('indices[0,0] = -1 is not in [0, 50257)') and for position 1024"
)
silent = 0
# 1. token id -1, through the model's own wte (GPT2Model.__call__'s first step)
rows = model.model.wte(mx.array([[-1, 50256]]))
try:
    mx.eval(rows)
except Exception as exc:  # noqa: BLE001
    print(f"got for id -1: {type(exc).__name__}: {exc}")
else:
    same = bool(np.array_equal(np.array(rows[0, 0]), np.array(rows[0, 1])))
    print(f"got for id -1: no error; the row equals wte[50256]: {same}")
    silent += 1
# 2. a prompt of 1025 tokens: positions 0..1024, one past wpe's last row
try:
    logits = model(mx.zeros((1, 1025), dtype=mx.int32))
    mx.eval(logits)
except Exception as exc:  # noqa: BLE001
    print(f"got for T = 1025: {type(exc).__name__}: {exc}")
else:
    print(f"got for T = 1025: no error; logits of shape {tuple(logits.shape)}")
    silent += 1
sys.exit(1 if silent else 0)
