"""What a correct implementation returns, computed independently of any adapter.

Deliberately plain numpy, written from the spec's formulas; the NumPy backend is a separate
implementation (with input checks, dtypes and speed) and is itself checked against this.
"""

from __future__ import annotations

import numpy as np

from conformance.numerics import UNIT_ROUNDOFF, gamma, round_float64_to_dtype


def positions(seq_len: int, past_length: int) -> np.ndarray:
    """p_t = past_length + t (openai/gpt-2 positions_for), shared by the batch."""
    return past_length + np.arange(seq_len)


def embedding(wte: np.ndarray, wpe: np.ndarray, ids: np.ndarray, past_length: int, dtype: str = "float32") -> np.ndarray:
    """h[b, t] = wte[ids[b, t]] + wpe[past_length + t].

    float32: the float32 sum, which is one IEEE addition (the expected value is exact).
    float16/bfloat16: tables already rounded to the dtype; the exact sum rounded once."""
    pos = positions(ids.shape[1], past_length)
    if dtype == "float32":
        return wte[ids] + wpe[pos][None]
    exact = wte[ids].astype(np.float64) + wpe[pos][None].astype(np.float64)
    return round_float64_to_dtype(exact, dtype)


def tied_logits(h: np.ndarray, wte: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(logits in float64, an error bound any float32-accumulated implementation meets).

    Bound: gamma_d(float32) * |h| @ |wte|^T (see numerics), plus the float64 reference's own
    gamma_d(float64) term."""
    h64 = h.astype(np.float64)
    abs_h = np.abs(h64)
    exact = np.empty(h.shape[:-1] + (wte.shape[0],))
    magnitude = np.empty_like(exact)
    for start in range(0, wte.shape[0], 4096):  # float64 copies of wte in cache-sized pieces
        w64 = wte[start : start + 4096].astype(np.float64)
        exact[..., start : start + 4096] = h64 @ w64.T
        magnitude[..., start : start + 4096] = abs_h @ np.abs(w64).T
    d = h.shape[-1]
    bound = (gamma(d, UNIT_ROUNDOFF["float32"]) + gamma(d, UNIT_ROUNDOFF["float64"])) * magnitude
    return exact, bound


def gradients(wte, wpe, ids, past_length, cot_h, cot_logits):
    """(dL/dwte, dL/dwpe, bound_wte, bound_wpe) in float64 for
    L = sum(cot_h * h) + sum(cot_logits * (h @ wte^T)), h = wte[ids] + wpe[positions].

    dL/dh = cot_h + cot_logits @ wte; wte gets dL/dh scattered to the looked-up rows (the
    gather role) plus cot_logits^T @ h (the projection role); wpe gets dL/dh summed over
    the batch at each position. The bound repeats the computation on absolute values and
    multiplies by gamma_K, K = V + 2*B*T + 2, the longest chain of float32 roundings."""
    B, T = ids.shape
    V, d = wte.shape
    pos = positions(T, past_length)

    def run(wte, wpe, cot_h, cot_logits, h):
        dh = cot_h + (cot_logits.reshape(-1, V) @ wte).reshape(cot_h.shape)  # 2-D matmul: 6x faster than 3-D
        d_wte = np.zeros_like(wte)
        np.add.at(d_wte, ids.reshape(-1), dh.reshape(-1, d))
        d_wte += cot_logits.reshape(-1, V).T @ h.reshape(-1, d)
        d_wpe = np.zeros_like(wpe)
        np.add.at(d_wpe, pos, dh.sum(axis=0))
        return d_wte, d_wpe

    w64, p64 = wte.astype(np.float64), wpe.astype(np.float64)
    h64 = w64[ids] + p64[pos][None]
    ch, cl = cot_h.astype(np.float64), cot_logits.astype(np.float64)
    d_wte, d_wpe = run(w64, p64, ch, cl, h64)
    abs_wte, abs_wpe = run(np.abs(w64), np.abs(p64), np.abs(ch), np.abs(cl), np.abs(h64))
    k = gamma(V + 2 * B * T + 2, UNIT_ROUNDOFF["float32"]) + gamma(V + 2 * B * T + 2, UNIT_ROUNDOFF["float64"])
    return d_wte, d_wpe, k * abs_wte, k * abs_wpe
