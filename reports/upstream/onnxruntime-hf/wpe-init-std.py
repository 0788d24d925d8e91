"""GPT2LMHeadModel initialises the position embedding (wpe) with std 0.02; GPT-2 uses 0.01.

Standalone: needs only torch, transformers and numpy. Exits 1 while wpe's std is 0.02, 0 once
it is GPT-2's 0.01 (wte's 0.02 is already GPT-2's)."""

import sys

import numpy as np
import torch
from transformers import GPT2Config, GPT2LMHeadModel

torch.manual_seed(0)
# GPT-2's vocabulary and context with the default initializer_range (0.02), random init, no
# hub. The std drawn does not depend on the width (initializer_range is a constant), so a
# small n_embd keeps this fast; 1024 x 64 values estimate the std to about +-0.0001.
config = GPT2Config(vocab_size=50257, n_positions=1024, n_embd=64, n_layer=1, n_head=1)
model = GPT2LMHeadModel(config)
wte = model.transformer.wte.weight.detach().numpy()
wpe = model.transformer.wpe.weight.detach().numpy()
print(f"got: wte std {wte.std():.4f}, wpe std {wpe.std():.4f} (initializer_range {config.initializer_range})")
print("GPT-2 reference (openai/gpt-2 src/model.py L152-155): wpe ~ N(0, 0.01^2), wte ~ N(0, 0.02^2)")
sys.exit(0 if abs(wpe.std() - 0.01) < 0.001 else 1)
