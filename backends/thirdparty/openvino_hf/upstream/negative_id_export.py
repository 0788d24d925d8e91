"""The ONNX graph torch.onnx.export(dynamo=True) makes of an nn.Embedding lookup is a bare Gather,
whose indices may be negative (counted from the end), so the exported graph returns the last row
for token id -1 where the eager module raises IndexError. Any ONNX runtime that follows the spec
gives the same row; the script runs the graph with onnx's own reference evaluator (the spec's
semantics), so it needs no particular runtime.

Standalone: needs only torch (its ONNX exporter uses onnxscript), onnx and numpy. Exits 1 while the
exported graph returns a row for id -1, 0 once it raises as eager torch does."""

import contextlib
import io
import sys
import warnings
from typing import cast

import numpy as np
import onnx
import torch
from onnx.reference import ReferenceEvaluator

# GPT-2's token table shape ([n_vocab = 50257, n_embd]; the width does not matter, 8 here)
wte = torch.nn.Embedding(50257, 8).eval()
dims = {"input": {0: torch.export.Dim("batch"), 1: torch.export.Dim("seq")}}
with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
    warnings.simplefilter("ignore")
    program = torch.onnx.export(
        wte,
        (torch.zeros((2, 5), dtype=torch.int64),),
        dynamo=True,
        dynamic_shapes=dims,
        input_names=["input_ids"],
        output_names=["rows"],
    )
assert program is not None  # dynamo=True returns the ONNXProgram (None only from the old exporter)
graph = program.model_proto
print(f"exported graph's nodes: {[node.op_type for node in graph.graph.node]} (onnx {onnx.__version__})")

ids = np.array([[-1, 50256]], dtype=np.int64)
try:
    with torch.no_grad():
        wte(torch.from_numpy(ids))
    eager = "no error"
except IndexError as exc:
    eager = f"IndexError: {exc}"
print(f"eager torch, wte(input_ids) for id -1: {eager}")
print(
    "GPT-2 reference (openai/gpt-2 src/model.py L154, L157): wte has 50257 rows (ids 0..50256) and "
    "tf.gather(wte, X) on CPU raises for -1 ('indices[0,0] = -1 is not in [0, 50257)')"
)
try:
    # a list of the outputs (intermediate=False); onnx annotates run() as that list or a dict
    (rows,) = cast(list, ReferenceEvaluator(graph).run(None, {"input_ids": ids}))
except Exception as exc:  # noqa: BLE001
    print(f"got from the exported graph: {type(exc).__name__}: {exc}")
    sys.exit(0)
print(
    f"got from the exported graph: no error; the row for id -1 equals wte[50256]: "
    f"{np.array_equal(rows[0, 0], rows[0, 1])}"
)
sys.exit(1)
