"""What an implementation did with a bad input, in one phrase: the BOUNDS probes' observation.

A BOUNDS test asks for a raise and judges only that; what came back instead (a clamped row, a
wrapped row, zeros, NaN, memory that is no row of either table) is the question users of an
engine ask (onnx#2179: what does Gather do with an index out of range?). The probes record it
here without calling the adapter again: the observation reads the answer the test already got,
with the suite's own tables, so no verdict depends on it (a failure to classify is recorded as
such, never raised). `gpt2-conformance out-of-range` tabulates the recorded phrases
(gpt2_conformance.merge.out_of_range).

The phrases, one per outcome:

    raised <ExceptionType>       the call raised (what BOUNDS asks for), and its built-in base
    NaN rows / inf rows          the bad row has a NaN (an inf) in it
    zero rows                    the bad row is all zero, or the bad table's part of it is
    clamped to row N             the bad side read the nearest end of its table
    wrapped to row N             the bad side read the row its value names modulo the table size
    accepted: row N              (float ids) the call read the row the value casts to
    read row N                   the bad side read some other row of its table
    rows of other memory         the bad row is no row of wte plus a row of wpe
    returned <what>              the answer is not float32 [B, T, d] (its shape or type)
"""

from __future__ import annotations

import numpy as np

from gpt2_conformance.api import gpt2

PROPERTY = "gpt2c_observed"  # the pytest user property a probe's phrase travels in to the report


def raised(exc: BaseException) -> str:
    """`raised TypeName`, with the built-in class it derives from where that says more
    (`raised TokenIdOutOfRangeError (IndexError)`; not for a plain Exception subclass)."""
    kind = type(exc)
    builtin = next(c for c in kind.__mro__ if c.__module__ == "builtins")
    if builtin is kind or builtin in (Exception, BaseException):
        return f"raised {kind.__name__}"
    return f"raised {kind.__name__} ({builtin.__name__})"


def returned(out, ids, past, tables) -> str:
    """The phrase for an answer `out` to embed(ids, past) that should have raised, against the
    suite's tables (wte, wpe): the first row whose token or position is bad is classified."""
    wte, wpe = (np.asarray(t, np.float32) for t in tables)
    ids_array = np.asarray(ids)
    if not isinstance(out, np.ndarray):
        return f"returned {type(out).__name__}"
    if out.ndim != 3 or out.shape[:-1] != ids_array.shape or out.shape[-1] != wte.shape[1]:
        return f"returned {out.dtype}{list(out.shape)}"
    b, t = _bad_place(ids_array, past)
    row = out[b, t].astype(np.float64)
    if np.isnan(row).any():
        return "NaN rows"
    if np.isinf(row).any():
        return "inf rows"
    if not row.any():
        return "zero rows"
    token, position = ids_array[b, t], int(past) + t
    token_ok = _integral(token) and 0 <= int(token) < wte.shape[0]
    if token_ok and not np.issubdtype(ids_array.dtype, np.integer):  # float ids: the table side is the value's
        found = _nearest(row - wpe[position], wte) if 0 <= position < wpe.shape[0] else None
        return "rows of other memory" if found is None else f"accepted: row {found}"
    if token_ok:  # the position is the bad side
        return _side(row, wte[int(token)], wpe, position)
    if 0 <= position < wpe.shape[0]:
        return _side(row, wpe[position], wte, int(token))
    return "rows of other memory"  # both sides bad: no probe asks this


def _bad_place(ids: np.ndarray, past) -> tuple[int, int]:
    """The first (b, t) whose token id is out of [0, 50257) or not an integer, else whose position is
    out of [0, 1024), else (0, 0): the float ids' probe, every row of which is as bad."""
    positions = int(past) + np.arange(ids.shape[1])
    bad_position = (positions < 0) | (positions >= gpt2.N_CTX)
    if np.issubdtype(ids.dtype, np.integer):
        bad_token = (ids < 0) | (ids >= gpt2.N_VOCAB)
        if bad_token.any():
            b, t = np.argwhere(bad_token)[0]
            return int(b), int(t)
    if bad_position.any():
        return 0, int(np.argmax(bad_position))
    return 0, 0


def _integral(value) -> bool:
    return bool(np.isfinite(value)) and float(value) == int(value)


def _side(row: np.ndarray, good: np.ndarray, table: np.ndarray, value: int) -> str:
    """What the bad side of the sum `row` read from `table`, the good side's row being `good`."""
    part = row - good
    if not np.abs(part).max() > _tolerance(good, 0.0):
        return "zero rows"
    found = _nearest(part, table)
    if found is None:
        return "rows of other memory"
    rows = table.shape[0]
    if found == min(max(value, 0), rows - 1):
        return f"clamped to row {found}"
    if found == value % rows:
        return f"wrapped to row {found}"
    return f"read row {found}"


def _nearest(part: np.ndarray, table: np.ndarray) -> int | None:
    """The row of `table` equal to `part` up to a float32 sum's rounding, or None."""
    scores = table.astype(np.float64) @ part - 0.5 * np.einsum("ij,ij->i", table, table, dtype=np.float64)
    best = int(np.argmax(scores))  # the row nearest to part in the euclidean norm
    if np.abs(table[best] - part).max() <= _tolerance(part, float(np.abs(table[best]).max())):
        return best
    return None


def _tolerance(part: np.ndarray, scale: float) -> float:
    """A float32 sum of two rows is rounded by at most half an ulp of the sum (and a float16
    engine's by 2^-11 of it): a bound well above both, far below the distance between two rows
    of a table drawn at std 0.02."""
    return 1e-3 * (float(np.abs(part).max()) + scale) + 1e-7


def recorder(node, ids, past, tables):
    """A callback for assert_raises(observe=...): records the phrase for its first call on the
    pytest item `node` (a user property, which the suite's child writes into the report)."""

    def record(result) -> None:
        if any(name == PROPERTY for name, _ in node.user_properties):
            return
        try:
            phrase = raised(result) if isinstance(result, BaseException) else returned(result, ids, past, tables)
        except Exception as exc:  # noqa: BLE001 - an observation must never change a verdict
            phrase = f"not classified ({type(exc).__name__}: {exc})"
        node.user_properties.append((PROPERTY, phrase))

    return record
