"""What a correct implementation returns, computed independently of any adapter.

Deliberately plain numpy, written from the spec's formulas; the NumPy backend is a separate
implementation (with input checks, dtypes and speed) and is itself checked against this.
"""

from __future__ import annotations

import numpy as np

from gpt2_conformance.runtime.numerics import (
    UNIT_ROUNDOFF,
    float64_row_blocks,
    gamma,
    round_float64_to_dtype,
    round_to_dtype,
    rounded_inputs_factor,
)

# The structural head check allows inputs rounded to bfloat16 (the coarsest a float32 matmul is
# run in by default anywhere: TF32's 10-bit mantissas on recent GPUs, bfloat16 passes on TPUs):
# loose enough that reduced precision passes, tight enough (2^-7 of |h| @ |wte|^T) that a
# missing or scaled head, a bias or another matrix does not.
STRUCTURAL_INPUTS = "bfloat16"


def positions(seq_len: int, past_length: int) -> np.ndarray:
    """p_t = past_length + t (openai/gpt-2 positions_for), shared by the batch."""
    return past_length + np.arange(seq_len)


def embedding(
    wte: np.ndarray, wpe: np.ndarray, ids: np.ndarray, past_length: int, dtype: str = "float32"
) -> np.ndarray:
    """h[b, t] = wte[ids[b, t]] + wpe[past_length + t].

    float32: the float32 sum, which is one IEEE addition (the expected value is exact).
    float16/bfloat16: tables already rounded to the dtype; the exact sum rounded once."""
    pos = positions(ids.shape[1], past_length)
    if dtype == "float32":
        return wte[ids] + wpe[pos][None]
    exact = wte[ids].astype(np.float64) + wpe[pos][None].astype(np.float64)
    return round_float64_to_dtype(exact, dtype)


def _products(h: np.ndarray, wte: np.ndarray, block: int = 1024) -> tuple[np.ndarray, np.ndarray]:
    """(h @ wte^T, |h| @ |wte|^T) in float64."""
    h64 = h.astype(np.float64)
    abs_h = np.abs(h64)
    exact = np.empty(h.shape[:-1] + (wte.shape[0],))
    magnitude = np.empty_like(exact)
    for start, stop, w64 in float64_row_blocks(wte, block):
        exact[..., start:stop] = h64 @ w64.T
        np.abs(w64, out=w64)
        magnitude[..., start:stop] = abs_h @ w64.T
    return exact, magnitude


def tied_logits(h: np.ndarray, wte: np.ndarray, inputs: str = "float32") -> tuple[np.ndarray, np.ndarray]:
    """(logits in float64, an error bound any float32-accumulated implementation meets).

    inputs="float32": gamma_d(float32) * |h| @ |wte|^T (see numerics), plus the float64
    reference's own gamma_d(float64) term. inputs="bfloat16" (STRUCTURAL_INPUTS) or "tf32": the
    bound when both inputs were first rounded to that format (numerics.rounded_inputs_factor)."""
    exact, magnitude = _products(h, wte)
    d = h.shape[-1]
    if inputs == "float32":
        factor = gamma(d, UNIT_ROUNDOFF["float32"]) + gamma(d, UNIT_ROUNDOFF["float64"])
    else:
        factor = rounded_inputs_factor(d, inputs)
    return exact, factor * magnitude


def likely_head_precision(h: np.ndarray, wte: np.ndarray, logits: np.ndarray) -> str:
    """A clause for a failure message: which reduced input precision the head's errors fit.

    Rounds h and wte as a TF32 or bfloat16 matmul would, computes that product in float64, and
    names the first format whose product the logits match within the float32 bound."""
    d = h.shape[-1]
    factor = gamma(d, UNIT_ROUNDOFF["float32"]) + gamma(d, UNIT_ROUNDOFF["float64"])
    logits = np.asarray(logits, np.float64).reshape(h.shape[:-1] + (wte.shape[0],))
    for fmt, what in (
        (
            "tf32",
            "TF32 inputs (10-bit mantissas: a float32 matmul in TF32 mode, the default of "
            "TensorFlow and JAX on Ampere and newer GPUs, torch with allow_tf32)",
        ),
        ("bfloat16", "bfloat16 inputs (7-bit mantissas: a matmul run in bfloat16)"),
    ):
        emulated, magnitude = _products(round_to_dtype(h, fmt), round_to_dtype(wte, fmt))
        if np.all(np.abs(logits - emulated) <= factor * magnitude):
            return f"; the errors fit {what}"
    return ""


def gradients(wte, wpe, ids, past_length, cot_h, cot_logits, h=None):
    """(dL/dwte, dL/dwpe, bound_wte, bound_wpe) in float64 for
    L = sum(cot_h * h) + sum(cot_logits * (h @ wte^T)), h = wte[ids] + wpe[positions].

    h: the implementation's own h, if given, in the projection role (cot_logits^T @ h): then a
    wrong h is LOOKUP-EXACT's to judge, and this checks only that both roles reach dL/dwte.

    dL/dh = cot_h + cot_logits @ wte; wte gets dL/dh scattered to the looked-up rows (the
    gather role) plus cot_logits^T @ h (the projection role); wpe gets dL/dh summed over
    the batch at each position. The bound repeats the computation on absolute values and
    multiplies by gamma_K, K = V + 2*B*T + 2, the longest chain of float32 roundings."""
    B, T = ids.shape
    V, d = wte.shape
    pos = positions(T, past_length)

    def run(wte, wpe, cot_h, cot_logits, h):
        dh = cot_h + (cot_logits.reshape(-1, V) @ wte).reshape(cot_h.shape)  # 2-D matmul: BLAS once, not a 3-D loop
        d_wte = np.zeros_like(wte)
        np.add.at(d_wte, ids.reshape(-1), dh.reshape(-1, d))
        d_wte += cot_logits.reshape(-1, V).T @ h.reshape(-1, d)
        d_wpe = np.zeros_like(wpe)
        np.add.at(d_wpe, pos, dh.sum(axis=0))
        return d_wte, d_wpe

    w64, p64 = wte.astype(np.float64), wpe.astype(np.float64)
    h64 = w64[ids] + p64[pos][None] if h is None else np.asarray(h, np.float64)
    ch, cl = cot_h.astype(np.float64), cot_logits.astype(np.float64)
    d_wte, d_wpe = run(w64, p64, ch, cl, h64)
    abs_wte, abs_wpe = run(np.abs(w64), np.abs(p64), np.abs(ch), np.abs(cl), np.abs(h64))
    k = gamma(V + 2 * B * T + 2, UNIT_ROUNDOFF["float32"]) + gamma(V + 2 * B * T + 2, UNIT_ROUNDOFF["float64"])
    return d_wte, d_wpe, k * abs_wte, k * abs_wpe


def gradient_bounds(wte, wpe, ids, past_length, cot_h, cot_logits, h, rows) -> tuple[np.ndarray, np.ndarray]:
    """gradients()'s bounds (gamma_K times the computation on absolute values) for wte's `rows`
    (sorted, holding every id) and all of wpe, in float32 and without the float64 oracle: for
    comparing two answers of one implementation (a relation), where only the size of the
    rounding matters. h: the implementation's own h."""
    B, T = ids.shape
    V, d = wte.shape
    abs_cl = np.abs(cot_logits.reshape(-1, V).astype(np.float32))
    abs_h = np.abs(np.asarray(h, np.float32).reshape(-1, d))
    abs_dh = np.abs(cot_h.reshape(-1, d).astype(np.float32)) + abs_cl @ np.abs(np.asarray(wte, np.float32))
    abs_wte = abs_cl[:, rows].T @ abs_h
    np.add.at(abs_wte, np.searchsorted(rows, ids.reshape(-1)), abs_dh)
    abs_wpe = np.zeros(wpe.shape, np.float32)
    np.add.at(abs_wpe, positions(T, past_length), abs_dh.reshape(B, T, d).sum(axis=0))
    k = gamma(V + 2 * B * T + 2, UNIT_ROUNDOFF["float32"])
    return k * abs_wte.astype(np.float64), k * abs_wpe.astype(np.float64)


def gradients_within(
    wte, wpe, ids, past_length, cot_h, cot_logits, got_wte, got_wpe, h=None, block: int = 1024
) -> bool:
    """Whether (got_wte, got_wpe) lie within gradients()'s bounds, decided a block of wte rows at a
    time without the eight [V, d] float64 arrays gradients() builds (most of a second per call).

    True only where gradients() + assert_within would pass too, so a caller can skip them: the
    rows no id reads (only the projection role cot_logits^T @ h reaches them) are checked in
    float32 against the bound less 1e-5 of it, far more than float32's own error in computing
    them (a dot product of B*T terms: < 1e-6 of the bound's magnitude); the rows the ids read, and
    dwpe, in float64 as gradients() does. False: let gradients() and assert_within decide and
    word the message."""
    B, T = ids.shape
    V, d = wte.shape
    got_wte, got_wpe = np.asarray(got_wte), np.asarray(got_wpe)
    if got_wte.shape != (V, d) or got_wpe.shape != wpe.shape:
        return False
    pos = positions(T, past_length)
    flat = ids.reshape(-1)
    cl_t = np.ascontiguousarray(cot_logits.reshape(-1, V).T, dtype=np.float64)  # [V, B*T]: row blocks contiguous
    ch = cot_h.reshape(-1, d).astype(np.float64)
    h64 = (
        wte[ids].astype(np.float64) + wpe[pos][None].astype(np.float64) if h is None else np.asarray(h, np.float64)
    ).reshape(-1, d)
    dh, abs_dh = ch.copy(), np.abs(ch)
    for start, stop, w64 in float64_row_blocks(wte, block):
        dh += cl_t[start:stop].T @ w64
        np.abs(w64, out=w64)
        abs_dh += np.abs(cl_t[start:stop]).T @ w64
    k = gamma(V + 2 * B * T + 2, UNIT_ROUNDOFF["float32"]) + gamma(V + 2 * B * T + 2, UNIT_ROUNDOFF["float64"])
    read = np.unique(flat)
    with np.errstate(invalid="ignore", over="ignore"):
        # rows no id reads, in float32 with a margin
        cl32, h32 = cl_t.astype(np.float32), h64.astype(np.float32)
        abs_cl32, abs_h32 = np.abs(cl32), np.abs(h32)
        k32 = np.float32(k * (1 - 1e-5))
        for start in range(0, V, block):
            stop = min(start + block, V)
            err = np.abs(got_wte[start:stop].astype(np.float32) - cl32[start:stop] @ h32)
            ok = err <= k32 * (abs_cl32[start:stop] @ abs_h32)
            ok[read[(read >= start) & (read < stop)] - start] = True  # checked in float64 below
            if not ok.all():
                return False
        # the rows the ids read, and dwpe, in float64 as gradients() computes them
        expected = cl_t[read] @ h64
        magnitude = np.abs(cl_t[read]) @ np.abs(h64)
        where = np.searchsorted(read, flat)
        np.add.at(expected, where, dh)
        np.add.at(magnitude, where, abs_dh)
        if not np.all(np.abs(got_wte[read].astype(np.float64) - expected) <= k * magnitude):
            return False
        d_wpe, abs_wpe = np.zeros(wpe.shape), np.zeros(wpe.shape)
        np.add.at(d_wpe, pos, dh.reshape(B, T, d).sum(axis=0))
        np.add.at(abs_wpe, pos, abs_dh.reshape(B, T, d).sum(axis=0))
        return bool(np.all(np.abs(got_wpe.astype(np.float64) - d_wpe) <= k * abs_wpe))
