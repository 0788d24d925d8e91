"""Judging a table stored in a lower-precision type (a GGUF's F16, BF16, Q8_0, ...) and read as
its float32 values, against the real GPT-2 table. Float32 tables never come here: they must be
bit-exact and are digest-checked (command.check_tables).

How each stored type is judged, and why:
- float16 / bfloat16: a faithful conversion rounds each real float32 value once, to nearest
  even, which is how the DTYPE clauses store tables ("Tables are stored rounded to float16
  (nearest-even)", spec DTYPE-FLOAT16; numerics.round_to_dtype). So every element must equal
  round_to_dtype(real) bit for bit. The error against the real value is reported too.
- Q8_0: no DTYPE clause applies (the suite has no 8-bit dtype). The table is judged with
  Q8_0's own error bound, derived below from ggml's reference quantiser.
- any other ggml type (Q4_K, ...): the largest error and its element are reported, not judged.

wte: the real wte is known only through the digests of its float32 bytes and a few published
values (fixtures/golden.json), so a dequantised wte cannot be verified in full: the known values
are checked after the same rounding (float16/bfloat16) and otherwise only reported.

Q8_0's bound. ggml's reference quantiser, per block of 32 consecutive elements of a row
(quantize_row_q8_0_ref, https://github.com/ggml-org/llama.cpp/blob/01243c587feceaa5d6a6c2305535ef2f549c48b8/ggml/src/ggml-quants.c#L277-L300;
gguf-py's Q8_0.quantize_blocks is "bit-exact" with it,
https://github.com/ggml-org/llama.cpp/blob/gguf-v0.19.0/gguf-py/gguf/quants.py#L378-L401):
    d = fl32(amax / 127);  id = fl32(1 / d);  q_j = round(fl32(x_j * id));  stored D = fp16(d)
and dequantisation gives q_j * D, exact in float32 (a 7-bit integer times an 11-bit significand).
Then |x - q D| <= |x - q d| + |q| |d - D|, where
- |x/d - q| <= 1/2 + 2^-15: rounding costs 1/2 whichever way ties go, and |x * id| <= 127 (1 + 3u)
  carries at most about 254 u of float32 error (u = 2^-24) for id = fl(1/d), or 381 u for the
  SIMD quantisers' id = fl(127 / amax); 2^-15 = 512 u covers both;
- |d - D| <= max(d 2^-11, 2^-25): float16 rounding to nearest, half an ulp, relative 2^-11 for
  normal values and 2^-25 absolute below float16's smallest normal 2^-14;
- |q| <= 127.
So |x - deq| <= d (1/2 + 2^-15) + 127 max(d 2^-11, 2^-25) per element. The second term matters:
d/2 alone does not hold (gguf's own Q8_0 of the real wpe exceeds it in 916 elements, by up to
0.549 d; tests/test_golden_gguf.py shows both).
"""

from __future__ import annotations

import numpy as np

from gpt2_conformance.golden import digests
from gpt2_conformance.runtime import numerics

Q8_0_BLOCK = 32
ROUNDED = ("float16", "bfloat16")  # the DTYPE clauses' storage types


def q8_0_bound(real: np.ndarray) -> np.ndarray:
    """Per element: the largest |x - dequantised Q8_0(x)| (module docstring), float64."""
    blocks = np.asarray(real, np.float32).reshape(-1, Q8_0_BLOCK)
    d = (np.abs(blocks).max(axis=1, keepdims=True) / np.float32(127)).astype(np.float64)
    bound = d * (0.5 + 2.0**-15) + 127 * np.maximum(d * 2.0**-11, 2.0**-25)
    return np.broadcast_to(bound, blocks.shape).reshape(np.shape(real))


def _index(name: str, flat: int, shape) -> str:
    return f"{name}[{', '.join(map(str, np.unravel_index(flat, shape)))}]"


def largest_error(name: str, table: np.ndarray, real: np.ndarray) -> str:
    """The largest |stored - real|, naming the element (a non-finite stored value counts as worst)."""
    err = np.abs(table.astype(np.float64) - real.astype(np.float64)).reshape(-1)
    bad = ~np.isfinite(err)
    worst = int(np.argmax(bad)) if bad.any() else int(np.argmax(err))
    flat_t, flat_r = table.reshape(-1), real.reshape(-1)
    return (
        f"largest error against the real {name}: |diff| {err[worst]:.3g} at {_index(name, worst, table.shape)} "
        f"= {float(flat_t[worst])!r} (real {float(flat_r[worst])!r}); mean |diff| {np.nanmean(err):.3g}"
        + (f"; {int(bad.sum())} non-finite elements" if bad.any() else "")
    )


def judge_wpe(table: np.ndarray, stored: str, real: np.ndarray) -> tuple[bool | None, list[str]]:
    """(True within the rule for `stored`, False not, None no rule for it) and the report lines."""
    error = f"        {largest_error('wpe', table, real)}"
    n = table.size
    if stored in ROUNDED:
        diff = digests.compare(table, numerics.round_to_dtype(real, stored))
        rule = f"the real GPT-2 124M wpe rounded to {stored} (nearest even, as the DTYPE clauses store tables)"
        if diff.identical:
            return True, [f"  wpe  {stored}: MATCHES {rule}: all {n} elements", error]
        assert diff.first_index is not None  # compare() sets it wherever an element differs
        i = ", ".join(map(str, diff.first_index))
        return False, [
            f"  wpe  {stored}: DOES NOT MATCH {rule}: {diff.n_differ} of {n} elements differ; first at "
            f"wpe[{i}] = {diff.first_value!r} (real {float(real[diff.first_index])!r} rounds to "
            f"{diff.first_reference!r})",
            error,
        ]
    if stored == "Q8_0":
        err = np.abs(table.astype(np.float64) - real.astype(np.float64))
        bound = q8_0_bound(real)
        over = ~(err <= bound)  # NaN counts as over
        rule = (
            "        Q8_0's bound per element: d (1/2 + 2^-15) + 127 max(d 2^-11, 2^-25), d = max|real| over "
            "its 32-element block / 127 (ggml's quantize_row_q8_0_ref; no DTYPE clause applies to Q8_0)"
        )
        if not over.any():
            ratio = float((err / bound).max())
            return True, [
                f"  wpe  Q8_0: WITHIN Q8_0's error bound of the real GPT-2 124M wpe in all {n} elements "
                f"(largest error / bound {ratio:.3f})",
                rule,
                error,
            ]
        first = int(np.argmax(over.reshape(-1)))
        return False, [
            f"  wpe  Q8_0: EXCEEDS Q8_0's error bound of the real GPT-2 124M wpe in {int(over.sum())} "
            f"of {n} elements; first at {_index('wpe', first, table.shape)} = {float(table.reshape(-1)[first])!r} "
            f"(real {float(real.reshape(-1)[first])!r}, bound {float(bound.reshape(-1)[first]):.3g})",
            rule,
            error,
        ]
    return None, [
        f"  wpe  {stored}: NOT JUDGED: no error bound is derived here for {stored} (float32 is judged "
        f"bit for bit, float16/bfloat16 by their rounding, Q8_0 by its bound)",
        error,
    ]


def judge_wte(table: np.ndarray, stored: str, known) -> tuple[bool | None, list[str]]:
    """The known real wte values (data.Known) after the rounding of `stored`: False when one
    disagrees, else None (the rest of the table cannot be checked without the real wte)."""
    misses, worst = [], None
    for k in known:
        got = float(table[k.row, k.col])
        reference = float(k.value) if k.exact else float(k.text)
        if stored in ROUNDED:
            if k.exact:
                ok = table[k.row, k.col].view(np.uint32) == numerics.round_to_dtype(k.value, stored).view(np.uint32)
            else:  # |got - real| <= half an ulp at |real| <= |text| + tol, |real - text| <= tol
                half_ulp = float(numerics.ulp(abs(reference) + k.abs_tol, stored)) / 2
                ok = abs(got - reference) <= k.abs_tol + half_ulp
            if not ok:
                misses.append((k, got))
        err = abs(got - reference)
        if worst is None or not err <= worst[0]:
            worst = (err, k, got)
    lines = []
    if worst is not None:
        err, k, got = worst
        lines.append(
            f"        largest error over the {len(known)} known real wte values: |diff| {err:.3g} at "
            f"wte[{k.row}, {k.col}] = {got!r} (real {k.text}" + ("" if k.exact else f" +- {k.abs_tol:.2g}") + ")"
        )
    unverifiable = "the real wte is known only by its float32 digests and published values"
    if stored not in ROUNDED:
        return None, [
            f"  wte  {stored}: CANNOT BE VERIFIED: {unverifiable}, and no bound is applied to {stored} "
            "(the Q8_0 bound needs each real block's largest value)",
            *lines,
        ]
    if misses:
        k, got = misses[0]
        return False, [
            f"  wte  {stored}: DOES NOT MATCH the real GPT-2 124M wte: {len(misses)} of {len(known)} known "
            f"real wte values differ after rounding to {stored}; first wte[{k.row}, {k.col}] = {got!r}, "
            f"real {k.text}",
            *lines,
        ]
    return None, [
        f"  wte  {stored}: CANNOT BE VERIFIED in full ({unverifiable}): all {len(known)} known real wte "
        f"values agree after rounding to {stored}",
        *lines,
    ]
