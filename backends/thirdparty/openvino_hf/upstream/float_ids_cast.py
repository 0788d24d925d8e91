"""OpenVINO's Python API casts an input array whose dtype differs from the model's input to that
input's type without a warning (data_dispatcher.value_to_tensor: "If types are mismatched, convert
and always copy"): float ids [1.7, 2.2] given to an int64 input become [1, 2], and bool ids
[True, False] become [1, 0]. For an embedding lookup a float or bool array passed as token ids
by mistake is read as if it were ids.

Standalone: needs only openvino and numpy (the graph is built with OpenVINO's own opset API).
Exits 1 while float or bool ids run without an error, 0 once they raise."""

import sys

import numpy as np
import openvino as ov
import openvino.opset8 as ops

# An embedding lookup with int64 ids (as a GPT-2 exported with torch.onnx has: input_ids is int64),
# table row i filled with i + 1; the table's size does not matter.
table = np.repeat(np.arange(1, 1025, dtype=np.float32)[:, None], 8, axis=1)
ids = ops.parameter([-1], ov.Type.i64, name="input_ids")
gather = ops.gather(ops.constant(table), ids, ops.constant(np.int64(0)))
compiled = ov.Core().compile_model(ov.Model([gather], [ids], "embedding_lookup"), "CPU")

print(
    "GPT-2 reference (openai/gpt-2 src/model.py L154, L157): tf.gather(wte, X) rejects float and bool X "
    "(TypeError: Value for attr 'Tindices' of float is not in the list of allowed values: int16, int32, int64)"
)


def shown(value):
    return [round(float(v), 2) if value.dtype.kind == "f" else v for v in value.tolist()]


silent = 0
for value in (np.array([1.7, 2.2], dtype=np.float32), np.array([1.7, 2.2], dtype=np.float64), np.array([True, False])):
    try:
        (out,) = compiled([value]).values()
    except Exception as exc:  # noqa: BLE001
        print(f"{value.dtype} ids {shown(value)}: {type(exc).__name__}: {str(exc).splitlines()[0]}")
        continue
    print(f"{value.dtype} ids {shown(value)}: no error; read rows {[int(r) - 1 for r in out[:, 0]]}")
    silent += 1
sys.exit(1 if silent else 0)
