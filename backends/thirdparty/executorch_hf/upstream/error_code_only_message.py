"""ExecuTorch's Python runtime: an out-of-range token id in Hugging Face's GPT-2, exported to a .pte
of portable kernels, raises RuntimeError('method->execute() failed with error 0x12'). The portable
embedding kernel knows what went wrong and logs it ("[op_embedding.cpp:43] Check failed
(indices_ptr[i] < weight_height): indices_ptr[0] 50257 >= weight.size(0) 50257"), but that text goes
to the runtime's log on stderr; the exception the caller gets names only the error code.

Standalone: needs only executorch, torch, transformers and numpy. Exits 1 while the exception's
message names neither the bad id nor the table size, 0 once it does (or a clearer class is raised)."""

import os
import sys
import tempfile

import numpy as np
import torch
from executorch.exir import to_edge_transform_and_lower
from executorch.runtime import Runtime
from torch.export import Dim, export
from transformers import GPT2Config, GPT2Model

config = GPT2Config(vocab_size=50257, n_positions=1024, n_embd=64, n_layer=1, n_head=1)
model = GPT2Model(config).eval()


class H(torch.nn.Module):
    """h = hidden_states[0], the embedding GPT-2's first block reads."""

    def __init__(self):
        super().__init__()
        self.model = model

    def forward(self, input_ids):
        return self.model(input_ids=input_ids, use_cache=False, output_hidden_states=True).hidden_states[0]


with torch.no_grad():
    program = export(H(), (torch.zeros(1, 3, dtype=torch.int64),), dynamic_shapes=({1: Dim("T", max=64)},))
path = os.path.join(tempfile.mkdtemp(), "gpt2_h.pte")
with open(path, "wb") as f:
    f.write(to_edge_transform_and_lower(program).to_executorch().buffer)
forward = Runtime.get().load_program(path).load_method("forward")

ids = torch.from_numpy(np.array([[13, 50257, 13]], dtype=np.int64))  # one id past the 50257-row table
print(
    "GPT-2 reference (openai/gpt-2 src/model.py L154, L157): wte has 50257 rows; tf.gather raises "
    "InvalidArgumentError naming the index and the range"
)
try:
    model.wte(ids)
except IndexError as exc:
    print(f"eager torch, wte(input_ids): IndexError: {exc}")
try:
    forward.execute([ids])
except Exception as exc:  # noqa: BLE001 - whatever the runtime raises is what is reported
    text = f"{type(exc).__name__}: {exc}"
    print(f"executorch: {text}")
    if "50257" in str(exc) or isinstance(exc, (IndexError, ValueError)):
        print("the exception names the bad id / table size: fixed")
        sys.exit(0)
    print("error code only: the exception names neither the id 50257 nor the table size")
    sys.exit(1)
print("executorch: no error (a different bug: the bad id was read)")
sys.exit(2)
