"""paddle.nn.functional.embedding on CPU: id -1 returns the row of memory just before the table,
without an error, while -2 and ids >= the vocabulary raise ValueError. padding_idx=None is passed to
the kernel as -1 (kNoPadding, paddle/nn/functional/input.py L287-293 at paddlepaddle 3.3.1), and the
CPU kernel skips its bounds check for an id equal to padding_idx, then copies table + id * row_width
(paddle/phi/kernels/cpu/embedding_kernel.cc, the check loop and the memcpy loop). Exits 1 while the
bug is there, 0 once id -1 raises as -2 does."""

import sys

import numpy as np
import paddle
import paddle.nn.functional as F

paddle.set_device("cpu")
print("paddle", paddle.__version__)
# the table is rows 1.. of a larger buffer (a view): the row before it is known (1 2 3 4)
big = paddle.to_tensor(np.arange(6 * 4, dtype=np.float32).reshape(6, 4) + 1)
table = big[1:]
try:
    F.embedding(paddle.to_tensor([-2]), table)
    print("id -2: no error")
except ValueError as exc:
    print("id -2 raises ValueError:", str(exc).splitlines()[0][:120])
try:
    row = F.embedding(paddle.to_tensor([-1]), table).numpy()[0]
except ValueError as exc:
    print("id -1 raises ValueError (fixed):", str(exc).splitlines()[0][:120])
    sys.exit(0)
before = big.numpy()[0]
print(f"id -1: no error, returned {row.tolist()}; the memory before the table holds {before.tolist()}")
print(
    "BUG: id -1 reads memory outside the table"
    if np.array_equal(row, before)
    else "BUG: id -1 returns a row without error"
)
sys.exit(1)
