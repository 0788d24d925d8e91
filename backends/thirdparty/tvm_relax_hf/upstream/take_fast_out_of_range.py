"""Reproduction (TVM only, no torch): relax.op.take in its default mode="fast", the op TVM's
PyTorch frontend lowers every aten.embedding to, reads past the table for an out-of-range id and
returns the bytes it finds there as a row, with no error. GPT-2's token table has 50257 rows; ids
50257 and 50258 are the first two past its end (here they read the zeros that pad the table's
allocation to a page; id -1, one row before its start, reads an unmapped page and kills the
process with SIGSEGV, so it is left out: this script must reach its exit code).

Exits 1 while the call returns without raising (the bug), 0 once an out-of-range index raises.
"""

import sys

import numpy as np
import tvm
from tvm import relax

VOCAB, D = 50257, 64

bb = relax.BlockBuilder()
table = relax.Var("table", relax.TensorType((VOCAB, D), "float32"))
n = tvm.tirx.Var("n", "int64")
ids = relax.Var("ids", relax.TensorType((n,), "int32"))
with bb.function("main", [table, ids]):
    with bb.dataflow():
        out = bb.emit_output(relax.op.take(table, ids, axis=0))  # mode="fast", the default, as the frontend emits it
    bb.emit_func_output(out)
vm = relax.VirtualMachine(tvm.compile(bb.get(), target="llvm"), tvm.cpu())

table_np = np.random.default_rng(0).standard_normal((VOCAB, D), dtype=np.float32)
weights = tvm.runtime.tensor(table_np)

silent = []
for bad in (VOCAB, VOCAB + 1):
    try:
        row = vm["main"](weights, tvm.runtime.tensor(np.array([bad, 0], np.int32))).numpy()[0]
    except Exception as exc:  # noqa: BLE001 -- the fix: any error the caller can catch, naming the index
        print(f"id {bad}: raised {type(exc).__name__}: {exc}")
        continue
    where = "not a row of the table" if not (table_np == row).all(axis=1).any() else "a row of the table"
    print(f"id {bad}: no error; returned a row ({where}), first four values {row[:4]}")
    silent.append(bad)

print(f"tvm {tvm.__version__}: ids outside [0, {VOCAB}) that returned a row instead of raising: {silent}")
sys.exit(1 if silent else 0)
