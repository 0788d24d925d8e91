"""Rounding and error bounds, so every tolerance in the suite is derived, not guessed.

Tolerances (quoted in SPEC.md):
- Embedding in float32: one IEEE addition of two float32 numbers, so h must equal the
  float32 sum bit for bit (tolerance 0).
- Embedding in float16/bfloat16: the exact sum of the two stored low-precision values,
  rounded once to the dtype, is within 1/2 ulp; an implementation that adds in float32 and
  rounds to the dtype can round twice, which costs at most 1 ulp. So |h - exact| <= 1 ulp.
- Dot products of length n in floating point with unit roundoff u, in any summation order,
  FMA or not, satisfy |fl(x.y) - x.y| <= gamma_n * sum|x_i y_i| with gamma_n = n u / (1 - n u)
  (Higham, Accuracy and Stability of Numerical Algorithms, 2nd ed., eq. 3.5). Low-precision
  products are accumulated in float32 by every framework we know of; the output is then
  rounded once to the dtype, adding u_dtype * |result|.
"""

from __future__ import annotations

import numpy as np

UNIT_ROUNDOFF = {"float64": 2.0**-53, "float32": 2.0**-24, "tf32": 2.0**-11, "float16": 2.0**-11, "bfloat16": 2.0**-8}
MANTISSA_BITS = {"float32": 23, "tf32": 10, "float16": 10, "bfloat16": 7}  # stored fraction bits
MIN_NORMAL_EXP = {"float32": -126, "float16": -14, "bfloat16": -126}


def gamma(n: int, u: float) -> float:
    """Higham's gamma_n = n u / (1 - n u), the relative bound for n accumulated roundings."""
    if n * u >= 1:
        raise ValueError(f"gamma({n}, {u}) is undefined: n*u >= 1")
    return n * u / (1 - n * u)


def first_index(mask: np.ndarray) -> tuple[int, ...]:
    """The first True element's index in C order: argwhere's first row, without building all of
    them (for a [V, d] table that differs everywhere, 0.6 GB of indices)."""
    return tuple(int(i) for i in np.unravel_index(int(np.argmax(mask)), mask.shape))


def float64_chunks(*arrays: np.ndarray, size: int = 1 << 20):
    """The arrays (of one size) flattened and converted to float64 `size` elements at a time, as
    tuples of chunks: float64 copies of whole [V, d] tables cost more than what is computed on
    them (fresh memory is slow on these machines)."""
    flats = [a.reshape(-1) for a in arrays]
    for start in range(0, flats[0].size, size):
        yield tuple(f[start : start + size].astype(np.float64) for f in flats)


def float64_row_blocks(table: np.ndarray, rows: int = 1024):
    """(start, stop, block): table[start:stop] converted to float64, `rows` rows at a time, each
    block written into one reused buffer (6 MB at d = 768, read back from the cache by what is
    computed on it: a third faster than a new array per block). The block is the caller's to
    overwrite (np.abs in place) until the next one."""
    buffer = np.empty((min(rows, table.shape[0]), table.shape[1]))
    for start in range(0, table.shape[0], rows):
        block = buffer[: min(rows, table.shape[0] - start)]
        block[...] = table[start : start + rows]
        yield start, start + block.shape[0], block


def round_mantissa(x: np.ndarray, bits: int) -> np.ndarray:
    """float32 values rounded to nearest-even at `bits` fraction bits (float32's exponent range
    kept): bfloat16 at 7 bits, TF32 (the tensor-core float32 matmul mode) at 10."""
    drop = 23 - bits
    b = np.asarray(x, np.float32, order="C").view(np.uint32)
    # b + (half - 1) + (the kept lowest bit), then the dropped bits cleared. In uint32 the sum
    # wraps only for NaNs with the sign bit set, and wraps to the same 32 bits a wider sum would
    # truncate to; in place, one array the size of x (not six of twice its size: on wte, most of
    # the function's time was that fresh memory).
    out = b >> np.uint32(drop)
    out &= np.uint32(1)
    out += np.uint32((1 << (drop - 1)) - 1)
    out += b
    out &= np.uint32(0xFFFFFFFF ^ ((1 << drop) - 1))
    return out.view(np.float32)


def round_to_dtype(x: np.ndarray, dtype: str) -> np.ndarray:
    """float32 values rounded to nearest-even in `dtype`, returned as float32 (exact)."""
    x = np.asarray(x, dtype=np.float32)
    if dtype == "float32":
        return x.copy()
    if dtype == "float16":
        return x.astype(np.float16).astype(np.float32)
    if dtype in ("bfloat16", "tf32"):
        return round_mantissa(x, MANTISSA_BITS[dtype])
    raise ValueError(f"round_to_dtype: unknown dtype {dtype!r}")


def rounded_inputs_factor(d: int, inputs: str) -> float:
    """Relative bound (times |h| @ |wte|^T) for a length-d dot product whose two inputs were each
    rounded to `inputs` (unit roundoff u) and then accumulated in float32: each product is off by
    at most (2u + u^2) of |x y|, and the float32 sum adds gamma_d(float32) of the rounded inputs'
    magnitudes, at most (1 + u)^2 times the originals'. Plus the float64 reference's own gamma_d."""
    u = UNIT_ROUNDOFF[inputs]
    return 2 * u + u * u + gamma(d, UNIT_ROUNDOFF["float32"]) * (1 + u) ** 2 + gamma(d, UNIT_ROUNDOFF["float64"])


def round_float64_to_dtype(x: np.ndarray, dtype: str) -> np.ndarray:
    """Exact float64 values rounded once to `dtype` (as float32). For bfloat16 the float64 ->
    float32 step is exact for the sums this suite forms (two bfloat16 values), so one rounding."""
    if dtype == "float16":
        return np.asarray(x, np.float64).astype(np.float16).astype(np.float32)
    return round_to_dtype(np.asarray(x, np.float64).astype(np.float32), dtype)


def ulp(x: np.ndarray, dtype: str) -> np.ndarray:
    """Spacing of `dtype` numbers at |x| (float64 result), subnormals included."""
    x = np.abs(np.asarray(x, np.float64))
    mant, min_exp = MANTISSA_BITS[dtype], MIN_NORMAL_EXP[dtype]
    with np.errstate(divide="ignore"):
        exponent = np.floor(np.log2(np.where(x > 0, x, 1.0)))
    exponent = np.maximum(np.where(x > 0, exponent, min_exp), min_exp)
    return np.exp2(exponent - mant)


def representable(x: np.ndarray, dtype: str) -> bool:
    """Whether every float32 value in x is exactly a `dtype` value."""
    x = np.asarray(x, np.float32)
    return bool(np.array_equal(round_to_dtype(x, dtype), x, equal_nan=True))
