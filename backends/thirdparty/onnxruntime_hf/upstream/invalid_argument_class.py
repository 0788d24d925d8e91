"""onnxruntime's InvalidArgument, raised for an out-of-range Gather index, is a plain Exception:
it is neither an IndexError nor a ValueError, so code that handles a bad token id or position
the Python way (except IndexError / except ValueError) does not see it. Its message is clear.

Standalone: needs only torch, transformers, onnxscript (the exporter), onnxruntime and numpy. Exits
1 while the error for token id 50257 is not an IndexError or ValueError, 0 once it is."""

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

print(
    "GPT-2 reference (openai/gpt-2 src/model.py L154, L157): wte has 50257 rows; eager torch raises "
    "IndexError for id 50257, and the Python convention for an index out of range is IndexError"
)
try:
    session.run(["h"], {"input_ids": np.array([[50257]], dtype=np.int64)})
except Exception as exc:  # noqa: BLE001
    bases = [c.__name__ for c in type(exc).__mro__]
    print(f"got: {type(exc).__module__}.{type(exc).__name__}: {exc}")
    print(f"its classes: {' -> '.join(bases)}")
    sys.exit(0 if isinstance(exc, (IndexError, ValueError)) else 1)
print("got: no error")
sys.exit(1)
