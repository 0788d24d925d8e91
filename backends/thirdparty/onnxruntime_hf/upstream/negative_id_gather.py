"""The ONNX graph torch.onnx.export(dynamo=True) makes of an nn.Embedding lookup (here GPT-2's
wte in Hugging Face's GPT2LMHeadModel) accepts token id -1 and reads the last row, where the
eager model raises IndexError: aten::embedding is lowered to a bare ONNX Gather, whose
indices may be negative (counted from the end).

Standalone: needs only torch, transformers, onnxscript (the exporter), onnxruntime and numpy.
Exits 1 while the exported graph returns a row for id -1, 0 once it raises as eager torch does."""

import contextlib
import io
import sys
import warnings

import numpy as np
import onnxruntime as ort
import torch
from transformers import GPT2Config, GPT2LMHeadModel

# Hugging Face GPT-2 from an explicit config (no hub), random init, one block; the width does not
# matter here. Exported as a deployment would: torch.onnx.export(dynamo=True), default opset,
# run by onnxruntime on the CPU provider with default session options.
config = GPT2Config(vocab_size=50257, n_positions=1024, n_embd=64, n_layer=1, n_head=1)
model = GPT2LMHeadModel(config).eval()


class Embeddings(torch.nn.Module):
    """input_ids -> hidden_states[0] (wte(input_ids) + wpe(positions)), through GPT2Model's forward."""

    def __init__(self, lm):
        super().__init__()
        self.lm = lm

    def forward(self, input_ids):
        return self.lm.transformer(input_ids=input_ids, use_cache=False, output_hidden_states=True).hidden_states[0]


example = torch.zeros((2, 5), dtype=torch.int64)
dims = {"input_ids": {0: torch.export.Dim("batch"), 1: torch.export.Dim("seq")}}
with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
    warnings.simplefilter("ignore")
    program = torch.onnx.export(
        Embeddings(model), (example,), dynamo=True, dynamic_shapes=dims, input_names=["input_ids"], output_names=["h"]
    )
assert program is not None  # dynamo=True returns the ONNXProgram (None only from the old exporter)
options = ort.SessionOptions()
options.log_severity_level = 3  # the exception carries the message; no second copy on stderr
session = ort.InferenceSession(program.model_proto.SerializeToString(), options, providers=["CPUExecutionProvider"])

ids = np.array([[-1, 50256]], dtype=np.int64)
try:
    with torch.no_grad():
        model.transformer.wte(torch.from_numpy(ids))
    eager = "no error"
except IndexError as exc:
    eager = f"IndexError: {exc}"
print(f"eager torch, wte(input_ids) for id -1: {eager}")
print(
    "GPT-2 reference (openai/gpt-2 src/model.py L154, L157): wte has 50257 rows (ids 0..50256) and "
    "tf.gather(wte, X) on CPU raises for -1 ('indices[0,0] = -1 is not in [0, 50257)')"
)
try:
    (h,) = session.run(["h"], {"input_ids": ids})
except Exception as exc:  # noqa: BLE001
    print(f"got from onnxruntime: {type(exc).__name__}: {exc}")
    sys.exit(0)
wte, wpe = (p.detach().numpy() for p in (model.transformer.wte.weight, model.transformer.wpe.weight))
same = np.array_equal(h[0, 0], wte[50256] + wpe[0])
print(f"got from onnxruntime: no error; h[0, 0] equals wte[50256] + wpe[0]: {same}")
sys.exit(1)
