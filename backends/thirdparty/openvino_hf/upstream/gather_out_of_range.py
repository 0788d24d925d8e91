"""OpenVINO's Gather (opset 8, the op its ONNX frontend makes of every ONNX Gather) returns a row of
zeros for an index outside [-s, s-1] instead of failing, and reads negative indices from the end.
For a GPT-2 embedding lookup this means a position past the context (1024 for GPT-2's 1024-row
position table) or a token id past the vocabulary silently adds nothing, and the model runs on.

Standalone: needs only openvino and numpy (the graph is built with OpenVINO's own opset API, so no
ONNX file is needed). Exits 1 while an out-of-range index returns a row without an error, 0 once
it raises."""

import sys

import numpy as np
import openvino as ov
import openvino.opset8 as ops

# A table shaped like GPT-2's position embedding wpe ([n_ctx = 1024, n_embd]; the width does not
# matter, 8 here), row i filled with i + 1 so that a row of zeros is no row of the table. The
# token table wte ([50257, n_embd]) is the same op with a longer axis.
rows, width = 1024, 8
table = np.repeat(np.arange(1, rows + 1, dtype=np.float32)[:, None], width, axis=1)
ids = ops.parameter([-1], ov.Type.i64, name="ids")
gather = ops.gather(ops.constant(table), ids, ops.constant(np.int64(0)))
compiled = ov.Core().compile_model(ov.Model([gather], [ids], "embedding_lookup"), "CPU")

print(
    "GPT-2 reference (openai/gpt-2 src/model.py L152, L154, L157): wpe has 1024 rows and wte 50257; "
    "h = tf.gather(wte, X) + tf.gather(wpe, positions), and tf.gather on CPU raises for an index "
    "outside the table ('indices[0] = 1024 is not in [0, 1024)')"
)
silent = 0
for index, note in (
    (1023, "the last row"),
    (-1, "negative: ONNX counts it from the end"),
    (1024, "one past the end"),
    (-1025, "one before -1024"),
    (50257, "far past the end"),
):
    try:
        (out,) = compiled([np.array([index], dtype=np.int64)]).values()
    except Exception as exc:  # noqa: BLE001
        print(f"index {index} ({note}): {type(exc).__name__}: {str(exc).splitlines()[0]}")
        continue
    row = out[0]
    read = "a row of zeros" if not row.any() else f"row {int(row[0]) - 1}"
    print(f"index {index} ({note}): no error; got {read}")
    silent += not -rows <= index < rows  # -1 is in ONNX's range [-s, s-1]; the other three are not
print(f"out-of-range indices that returned zeros without an error: {silent} of 3")
sys.exit(1 if silent else 0)
