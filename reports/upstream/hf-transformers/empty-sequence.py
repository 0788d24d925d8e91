"""GPT2Model.forward raises on an empty sequence (input_ids of shape [1, 0]).

Standalone: needs only torch, transformers and numpy. Exits 1 while the behaviour reproduces,
0 once GPT2Model returns hidden states of shape [1, 0, n_embd]."""

import sys

import numpy as np
import torch
from transformers import GPT2Config, GPT2Model

# GPT-2's vocabulary and context, random init, no hub. Width and depth do not matter here:
# the reshape that fails runs before any weight is used.
config = GPT2Config(vocab_size=50257, n_positions=1024, n_embd=64, n_layer=1, n_head=1)
model = GPT2Model(config).eval()

input_ids = torch.from_numpy(np.zeros((1, 0), dtype=np.int64))  # batch 1, no tokens
print(
    "GPT-2 reference (openai/gpt-2 src/model.py L157): tf.gather(wte, X) + tf.gather(wpe, positions_for(X, 0)) "
    "with X of shape [1, 0] is an empty [1, 0, n_embd] tensor"
)
try:
    with torch.no_grad():
        out = model(input_ids=input_ids, output_hidden_states=True)
except Exception as exc:  # noqa: BLE001 - the exception is what is being reported
    print(f"got: {type(exc).__name__}: {exc}")
    sys.exit(1)
print(f"got: hidden_states[0] of shape {tuple(out.hidden_states[0].shape)}")
sys.exit(0 if tuple(out.hidden_states[0].shape) == (1, 0, 64) else 1)
