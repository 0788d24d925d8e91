"""tinygrad's nn.Embedding returns a row of zeros for an id outside the table (-1, the vocabulary
size, 2**31 - 1) instead of raising: a GPT-2 embedding built as tinygrad's examples/gpt2.py builds it
answers a bad token id with the position row alone, silently.

Standalone: plain tinygrad and numpy, nothing of the conformance suite. Runs on tinygrad's CPU device
(needs clang, or CC naming a clang). Exits 1 while the bug is there (a bad id returns a row instead of
raising), 0 once tinygrad raises for it.
"""

import os
import shutil
import sys
from importlib.metadata import version

if "CC" not in os.environ and not shutil.which("clang"):
    os.environ["CC"] = next((f"clang-{v}" for v in range(21, 13, -1) if shutil.which(f"clang-{v}")), "clang")

import numpy as np
from tinygrad import Tensor, nn
from tinygrad.helpers import DEV

DEV.value = "CPU"
VOCAB, CTX, DIM = 50257, 1024, 64  # GPT-2's table sizes; the width does not matter here

Tensor.manual_seed(0)
wte, wpe = nn.Embedding(VOCAB, DIM), nn.Embedding(CTX, DIM)  # as tinygrad's examples/gpt2.py's Transformer
IDS = [464, VOCAB, -1, 2**31 - 1]  # "The", then three ids outside [0, 50257)
tokens = Tensor([IDS])
pos = Tensor.arange(0, CTX).reshape(1, -1).shrink(((0, 1), (0, 4)))
print(f"tinygrad {version('tinygrad')}, device {wte.weight.device}")
try:
    (wte(tokens) + wpe(pos)).numpy()  # realise h
except Exception as exc:  # noqa: BLE001  (any error a fix raises for the bad ids is the fix)
    print(f"raised {type(exc).__name__}: {exc}")
    sys.exit(0)

token_rows = wte(tokens).numpy()[0]
for t, token in enumerate(IDS):
    zero = not np.any(token_rows[t])
    print(f"id {token:>11}: wte row {'ALL ZERO' if zero else 'read'}, h = {'wpe row alone' if zero else 'wte + wpe'}")
bad = [t for t in (1, 2, 3) if not np.any(token_rows[t])]
if bad:
    print(f"BUG: {len(bad)} ids outside [0, {VOCAB}) gave zero rows and no error")
    sys.exit(1)
sys.exit(0)
