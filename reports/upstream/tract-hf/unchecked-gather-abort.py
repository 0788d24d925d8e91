"""tract's Gather does not check its indices against the data's axis: an index past the end (or
before -axis_len) reaches an unchecked slice and panics, and since the panic cannot unwind through
the C API that the Python package calls (tract_state_run), Rust aborts the whole process
(SIGABRT); no exception reaches Python. For a GPT-2 embedding lookup, position 1024 (one past the
1024-row position table) or a token id past the vocabulary kills the serving process.

Standalone: needs only tract, onnx (tract's Python package loads models from ONNX files; the one
node model is written with onnx.helper) and numpy. Each lookup runs in a child process, since the
failing ones abort it. Exits 1 while an out-of-range index aborts the process or returns a row, 0
once it raises an exception Python can catch."""

import os
import re
import signal
import subprocess
import sys
import tempfile

import numpy as np

ROWS = 1024  # GPT-2's n_ctx (wpe's rows); the width does not matter: 8


def lookup(index: int) -> None:
    """Child: one ONNX Gather of a [1024, 8] table (row i filled with i + 1), run by tract."""
    import onnx
    import tract
    from onnx import TensorProto, helper, numpy_helper

    table = np.repeat(np.arange(1, ROWS + 1, dtype=np.float32)[:, None], 8, axis=1)
    graph = helper.make_graph(
        [helper.make_node("Gather", ["table", "ids"], ["rows"], axis=0)],
        "embedding_lookup",
        [helper.make_tensor_value_info("ids", TensorProto.INT64, ["n"])],
        [helper.make_tensor_value_info("rows", TensorProto.FLOAT, ["n", 8])],
        initializer=[numpy_helper.from_array(table, "table")],
    )
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "gather.onnx")
        onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)
        runnable = tract.onnx().load(path).into_model().into_runnable()
    try:
        row = runnable.run([np.array([index], dtype=np.int64)])[0].to_numpy()[0]
    except Exception as exc:  # noqa: BLE001
        print(f"{type(exc).__name__}: {str(exc).splitlines()[0]}")
        sys.exit(0)
    print(f"no error; got row {int(row[0]) - 1}")
    sys.exit(3)


if len(sys.argv) == 3 and sys.argv[1] == "--lookup":
    lookup(int(sys.argv[2]))

print(
    "GPT-2 reference (openai/gpt-2 src/model.py L152, L154, L157): wpe has 1024 rows and wte 50257; "
    "h = tf.gather(wte, X) + tf.gather(wpe, positions), and tf.gather on CPU raises an exception for an index "
    "outside the table ('indices[0] = 1024 is not in [0, 1024)'), -1 included"
)
env = dict(os.environ, RUST_BACKTRACE="0")
failed = 0
for index, note in (
    (1023, "the last row"),
    (-1, "negative: ONNX counts it from the end"),
    (1024, "one past the end"),
    (-1025, "one before -1024"),
):
    done = subprocess.run(
        [sys.executable, os.path.abspath(__file__), "--lookup", str(index)],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    if done.returncode < 0:
        panic = [
            re.sub(r" \(\d+\)", "", line.strip())
            for line in done.stderr.splitlines()
            if "panicked at" in line or "range" in line
        ]
        print(
            f"index {index} ({note}): process killed by {signal.Signals(-done.returncode).name}; "
            f"stderr: {' / '.join(panic[:2]) or '(none)'}"
        )
    else:
        print(f"index {index} ({note}): {done.stdout.strip() or done.stderr.strip()[-300:]}")
    out_of_range = not -ROWS <= index < ROWS  # -1 is in ONNX's range [-s, s-1]; 1024 and -1025 are not
    failed += out_of_range and done.returncode != 0
print(f"out-of-range indices that did not raise a Python exception: {failed} of 2")
sys.exit(1 if failed else 0)
