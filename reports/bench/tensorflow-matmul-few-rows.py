"""TensorFlow CPU: tf.matmul(a, b, transpose_b=True) for a of 2-12 rows and b [50257, 768] (GPT-2's
tied output head, `logits = h @ wte^T`, openai/gpt-2 src/model.py line 171) takes many times the
time of one row, and of the same dot products computed as transpose(matmul(b, a, transpose_b=True)).

Standalone: tensorflow and numpy only. Prints the median of 15 calls per shape for both forms and
NumPy's `a @ b.T`; exits 1 while the direct form is over twice the transposed one for some shape
(the slowdown reproduces), 0 otherwise.

    python tensorflow-matmul-few-rows.py
"""

import os
import statistics
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

V, D = 50257, 768
ROWS = (1, 2, 3, 4, 6, 8, 12)


def median_ms(fn, calls=15):
    fn()  # the first call pays for kernel selection and allocation
    times = []
    for _ in range(calls):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return 1e3 * statistics.median(times)


def main() -> int:
    rng = np.random.default_rng(0)
    b = tf.constant(rng.standard_normal((V, D), dtype=np.float32))
    b_np = b.numpy()
    print(
        f"tensorflow {tf.__version__}, numpy {np.__version__}, {os.cpu_count()} CPUs; "
        f"b [{V}, {D}] float32, median of 15 calls (ms)"
    )
    print(
        f"{'rows':>4}  {'matmul(a, b, transpose_b=True)':>31}  {'transpose(matmul(b, a, transpose_b=True))':>42}  "
        f"{'numpy a @ b.T':>13}"
    )
    slow = []
    for rows in ROWS:
        a = tf.constant(rng.standard_normal((rows, D), dtype=np.float32))
        a_np = a.numpy()
        direct = median_ms(lambda a=a: tf.matmul(a, b, transpose_b=True).numpy())
        transposed = median_ms(lambda a=a: tf.transpose(tf.matmul(b, a, transpose_b=True)).numpy())
        numpy = median_ms(lambda a_np=a_np: a_np @ b_np.T)
        np.testing.assert_allclose(
            tf.matmul(a, b, transpose_b=True).numpy(),
            tf.transpose(tf.matmul(b, a, transpose_b=True)).numpy(),
            rtol=1e-4,
            atol=1e-4,
        )
        print(f"{rows:>4}  {direct:>31.1f}  {transposed:>42.1f}  {numpy:>13.1f}")
        if direct > 2 * transposed:
            slow.append(rows)
    if slow:
        print(f"reproduces: the direct form is over 2x the transposed one for {slow} rows")
        return 1
    print("does not reproduce: the direct form is within 2x of the transposed one for every shape")
    return 0


if __name__ == "__main__":
    sys.exit(main())
