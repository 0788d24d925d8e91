"""Assertion helpers. Every failure is one line that names the call, the input, and
expected vs actual, e.g.

  h[0, 3, 17]=0.0123 but should be 0.0456; 12 of 7680 elements differ, max |diff| 0.033, 0 NaN
  [embed(ids=int64[2, 5] in [0, 50256], past_length=3)]   (one line in a real message)

An exception the adapter raised ends with its call too (runtime/verdicts.py).
"""

from __future__ import annotations

import numpy as np

from gpt2_conformance.api.gpt2 import N_VOCAB
from gpt2_conformance.runtime.calls import describe_call, describe_ids  # noqa: F401 - the tests' one import
from gpt2_conformance.runtime.numerics import first_index, float64_chunks

_PIECE_ELEMENTS = 1 << 20  # compared at a time by assert_bitwise_equal (4 MB of float32)


def as_array(out, call: str) -> np.ndarray:
    """The adapter returned a numpy array (the protocol's only bridge)."""
    if not isinstance(out, np.ndarray):
        raise AssertionError(f"returned {type(out).__name__}, but should return numpy.ndarray [{call}]")
    return out


def as_logits(out, h: np.ndarray, call: str) -> np.ndarray:
    """The logits as [B, T, V]: a result of the right size in another shape is SHAPE-LOGITS'
    to judge, not these clauses'."""
    out = as_array(out, call)
    want = h.shape[:-1] + (N_VOCAB,)
    return out.reshape(want) if out.size == int(np.prod(want)) else out


def assert_shape(out, shape: tuple, call: str, what: str = "out") -> np.ndarray:
    out = as_array(out, call)
    if out.shape != tuple(shape):
        raise AssertionError(f"{what}.shape={out.shape}, but should be {tuple(shape)} [{call}]")
    return out


def assert_dtype(out: np.ndarray, dtype: str, call: str, what: str = "out") -> None:
    if out.dtype.name != dtype:
        raise AssertionError(f"{what}.dtype={out.dtype.name}, but should be {dtype} [{call}]")


def _num(x) -> str:
    return f"{float(x):.9g}"


def _max_abs_diff(a: np.ndarray, b: np.ndarray) -> float:
    """np.nanmax(|a - b|) in float64 where some difference is finite, else NaN, a chunk at a time."""
    worst, finite = -np.inf, False
    with np.errstate(invalid="ignore"):
        for x, y in float64_chunks(a, b):
            diff = np.abs(x - y)
            finite = finite or bool(np.isfinite(diff).any())
            if not np.isnan(diff).all():
                worst = max(worst, float(np.nanmax(diff)))
    return worst if finite else np.nan


def _index(what: str, idx: tuple) -> str:
    return f"{what}[{', '.join(map(str, idx))}]"


def assert_bitwise_equal(
    actual, expected: np.ndarray, call: str, what: str = "h", note: str = "", converted: bool = False
) -> None:
    """Same shape and the same bits (NaN and -0.0 included): the float32 embedding rule.
    `converted`: actual is first converted to expected's dtype (a float16 table read back as
    float32: exact). Compared a piece at a time: a [V, d] mask or converted copy costs more than
    the comparison (memory a process has not touched yet is slow on these machines)."""
    actual = assert_shape(actual, expected.shape, call, what)
    if not converted and np.dtype(actual.dtype) != expected.dtype:
        raise AssertionError(f"{what}.dtype={actual.dtype}, but should be {expected.dtype} [{call}]")
    if _same_bits(actual, expected):
        return
    a = np.ascontiguousarray(actual, dtype=expected.dtype)  # a failure: the whole picture, once
    e = np.ascontiguousarray(expected)
    bits = np.dtype(f"u{e.dtype.itemsize}")
    differ = a.view(bits) != e.view(bits)
    idx = first_index(differ)
    worst = _max_abs_diff(a, e)
    extra = f" ({note})" if note else ""
    raise AssertionError(
        f"{_index(what, idx)}={_num(a[idx])} but should be {_num(e[idx])}{extra}; "
        f"{int(differ.sum())} of {differ.size} elements differ, max |diff| {worst:.3g}, "
        f"{int(np.isnan(a).sum())} NaN [{call}]"
    )


def _same_bits(actual: np.ndarray, expected: np.ndarray) -> bool:
    """actual (converted to expected's dtype) holds expected's bits, compared rows at a time."""
    if expected.ndim == 0:
        actual, expected = actual.reshape(1), expected.reshape(1)
    bits = np.dtype(f"u{expected.dtype.itemsize}")
    rows = max(1, _PIECE_ELEMENTS // max(1, int(np.prod(expected.shape[1:]))))
    for start in range(0, expected.shape[0], rows):
        a = np.ascontiguousarray(actual[start : start + rows], dtype=expected.dtype)
        e = np.ascontiguousarray(expected[start : start + rows])
        if (a.view(bits) != e.view(bits)).any():
            return False
    return True


def assert_within(
    actual, expected: np.ndarray, bound: np.ndarray, call: str, what: str = "logits", rule: str = ""
) -> None:
    """|actual - expected| <= bound elementwise (bound derived in numerics/oracle)."""
    actual = assert_shape(actual, expected.shape, call, what)
    err = np.abs(actual.astype(np.float64) - expected)
    bad = ~(err <= bound)  # NaN counts as bad
    if bad.any():
        ratio = np.where(bad, np.nan_to_num(err / np.maximum(bound, 1e-300), nan=np.inf), 0)
        idx = tuple(int(i) for i in np.unravel_index(np.argmax(ratio), ratio.shape))
        raise AssertionError(
            f"{_index(what, idx)}={_num(actual[idx])} but should be {_num(expected[idx])} "
            f"+- {float(bound[idx]):.3g}{' (' + rule + ')' if rule else ''}; "
            f"{int(bad.sum())} of {bad.size} elements outside, worst |err|/bound {float(ratio[idx]):.3g} [{call}]"
        )


def describe_returned(out) -> str:
    """What came back from a call that should have raised: shape, NaN and zero rows."""
    if not isinstance(out, np.ndarray):
        return f"returned {type(out).__name__}"
    text = f"returned {out.dtype}{list(out.shape)}"
    if out.ndim == 3 and out.size:
        rows = out.reshape(-1, out.shape[-1]).astype(np.float64)
        nan_rows = int(np.isnan(rows).any(axis=1).sum())
        zero_rows = int((rows == 0).all(axis=1).sum())
        text += f" with {nan_rows} NaN row(s) and {zero_rows} all-zero row(s)"
    return text


def assert_raises(fn, call: str, why: str, observe=None) -> BaseException:
    """fn() must raise (any Exception); returns it. `why` is the rule, for the message. `observe`,
    if given, is handed the exception or what came back instead (runtime/observe.py): it records
    what the implementation did and never changes the verdict."""
    from gpt2_conformance.runtime.guard import SuiteError

    try:
        out = fn()
    except SuiteError:
        raise  # the suite's own failure (a call outside the claims) is never the raise asked for
    except Exception as exc:  # noqa: BLE001 - any exception is a raise; BOUNDS-MESSAGE judges its kind
        if observe is not None:
            observe(exc)
        return exc
    if observe is not None:
        observe(out)
    raise AssertionError(f"{describe_returned(out)}, but should raise ({why}) [{call}]")


def changed_row(table: np.ndarray, row: int, seed: int) -> np.ndarray:
    """A copy of `table` whose row `row` moved by 0.5 to 1.5 in every element: far more than any
    rounding of a sum with a row of the other table, so every element of h that reads it moves."""
    out = table.copy()
    out[row] += np.float32(0.5) + np.random.default_rng(seed).random(table.shape[1], dtype=np.float32)
    return out


def assert_moves_exactly_at(before: np.ndarray, after: np.ndarray, where: np.ndarray, call: str, why: str) -> None:
    """h changed in every element of the rows where `where` [B, T] is True, and nowhere else."""
    before, after = np.asarray(before), as_array(after, call)
    for h in (before, after):
        if h.shape[:-1] != where.shape or h.dtype != np.float32:
            raise AssertionError(
                f"h is {h.dtype}{list(h.shape)}, but should be float32{list(where.shape)} + [d] [{call}]"
            )
    moved = after.view(np.uint32) != before.view(np.uint32)
    stray = moved & ~where[..., None]
    if stray.any():
        b, t, j = (int(i) for i in np.argwhere(stray)[0])
        raise AssertionError(
            f"h[{b}, {t}, {j}] changed from {float(before[b, t, j]):.9g} to {float(after[b, t, j]):.9g} "
            f"after {why}, but that row should not be read there; "
            f"{int(stray.any(-1).sum())} (b, t) rows moved that should not [{call}]"
        )
    still = ~moved & where[..., None]
    if still.any():
        b, t, j = (int(i) for i in np.argwhere(still)[0])
        raise AssertionError(
            f"h[{b}, {t}, {j}]={float(after[b, t, j]):.9g} did not change after {why}, but h must "
            f"read that row there; {int(still.sum())} of {int(where.sum()) * after.shape[-1]} elements "
            f"did not move [{call}]"
        )
