"""An out-of-range token id or position in GPT2Model raises torch's
IndexError('index out of range in self'), which names neither the index nor the table size.

Standalone: needs only torch, transformers and numpy. Exits 1 while the message lacks the
offending value or the table size, 0 once it names both."""

import sys

import numpy as np
import torch
from transformers import GPT2Config, GPT2Model

# GPT-2's vocabulary (50257) and context (1024), random init, no hub; the width does not
# matter for the lookup's error.
config = GPT2Config(vocab_size=50257, n_positions=1024, n_embd=64, n_layer=1, n_head=1)
model = GPT2Model(config).eval()

cases = {
    "token id 50257": np.array([[50256, 50257]], dtype=np.int64),  # one past the vocabulary
    "position 1024": np.zeros((1, 1025), dtype=np.int64),
}  # T = 1025: positions 0..1024
print(
    "GPT-2 reference (openai/gpt-2 src/model.py L152-157): wte has 50257 rows and wpe 1024 rows; "
    "tf.gather on CPU raises 'indices[0,1] = 50257 is not in [0, 50257)', naming the value and the size"
)
unclear = 0
for what, ids in cases.items():
    size = "50257" if what.startswith("token") else "1024"  # the bad value equals the table size
    try:
        with torch.no_grad():
            model(input_ids=torch.from_numpy(ids))
    except Exception as exc:  # noqa: BLE001
        text = str(exc)
        named = text.count(size) >= 2  # names the value and the size, e.g. "index 50257 ... size 50257"
        print(f"got for {what}: {type(exc).__name__}: {text}")
        unclear += not named
        continue
    print(f"got for {what}: no error")
    unclear += 1
sys.exit(1 if unclear else 0)
