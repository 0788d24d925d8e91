"""Host-side input checks for embed(ids, past_length), shared by the built-in adapters.

Frameworks disagree on out-of-range gathers (numpy and torch indexing wrap -1 to the last
row, tf.gather raises InvalidArgumentError on CPU but clamps under XLA and returns zeros on GPU,
JAX clamps or fills with NaN, torch on CUDA asserts on the device),
so a conforming implementation checks explicitly. The position bound needs only T and
past_length, so it is checked here on the host without touching the device. The token-id
bound needs the values: numpy adapters call check_token_ids; framework adapters do the same
comparison in their own ops (one reduction, no host copy of the ids).
"""

from __future__ import annotations

import numbers

import numpy as np

from gpt2_conformance.api.errors import EmbeddingInputError, PositionOutOfRangeError, TokenIdOutOfRangeError
from gpt2_conformance.api.gpt2 import N_CTX, N_VOCAB


def check_past_length(past_length) -> int:
    """past_length is a non-negative integer in one of the forms real code passes: a Python int,
    a numpy integer (np.int64 from shape arithmetic, np.int32) or a 0-d integer array. A bool,
    a float (even 2.0) or an array of any other rank is an error."""
    if isinstance(past_length, np.ndarray) and past_length.ndim == 0 and np.issubdtype(past_length.dtype, np.integer):
        past_length = past_length[()]  # the 0-d array's numpy integer
    if isinstance(past_length, (bool, np.bool_)) or not isinstance(past_length, numbers.Integral):
        raise EmbeddingInputError(
            f"past_length={past_length!r} ({type(past_length).__name__}) must be an integer >= 0 "
            "(int, numpy integer or 0-d integer array)"
        )
    if past_length < 0:
        raise EmbeddingInputError(f"past_length={past_length} must be >= 0")
    return int(past_length)


def check_positions(seq_len: int, past_length: int, n_ctx: int = N_CTX) -> None:
    """Every position past_length + t, t < seq_len, is a row of wpe: at most n_ctx - 1."""
    if seq_len > 0 and past_length + seq_len > n_ctx:
        last = past_length + seq_len - 1
        raise PositionOutOfRangeError(
            f"position {last} is outside the wpe table [0, {n_ctx}): past_length={past_length} "
            f"+ T={seq_len} tokens needs positions {past_length}..{last}, at most {n_ctx - 1} allowed"
        )


def check_ids_layout(shape: tuple, dtype_name: str, is_integer: bool) -> None:
    """ids are a rank-2 [B, T] array of an integer dtype (bool is not an integer here)."""
    if len(shape) != 2:
        raise EmbeddingInputError(f"ids must have rank 2 [B, T], got shape {tuple(shape)}")
    if not is_integer or dtype_name == "bool":
        raise TypeError(f"ids must be an integer array, got dtype {dtype_name}")


def describe_bad_id(ids: np.ndarray, bad: np.ndarray, n_vocab: int = N_VOCAB) -> str:
    """One line naming the first offending id and where it sits (bad: boolean mask)."""
    where = tuple(int(i) for i in np.argwhere(bad)[0])
    value = int(ids[where])
    return (
        f"token id {value} at ids{list(where)} is outside the wte table [0, {n_vocab}) "
        f"({int(bad.sum())} offending id(s))"
    )


def check_token_ids(ids: np.ndarray, n_vocab: int = N_VOCAB) -> None:
    """Every id is in [0, n_vocab); raises naming the first offending id and where it sits."""
    if ids.size == 0:
        return
    bad = (ids < 0) | (ids >= n_vocab)
    if bad.any():
        raise TokenIdOutOfRangeError(describe_bad_id(ids, bad, n_vocab))


def check_embed_inputs(ids, past_length, n_vocab: int = N_VOCAB, n_ctx: int = N_CTX) -> tuple[np.ndarray, int]:
    """All of the above for a numpy ids array; returns (ids, past_length) as checked."""
    if not isinstance(ids, np.ndarray):
        raise TypeError(f"ids must be a numpy array, got {type(ids).__name__}")
    check_ids_layout(ids.shape, ids.dtype.name, np.issubdtype(ids.dtype, np.integer))
    past_length = check_past_length(past_length)
    check_positions(ids.shape[1], past_length, n_ctx)
    check_token_ids(ids, n_vocab)
    return ids, past_length


def check_tables(wte: np.ndarray, wpe: np.ndarray, n_embd: int, n_vocab: int = N_VOCAB, n_ctx: int = N_CTX) -> None:
    """Tables handed to load_tables are float32 numpy arrays of the model's shapes."""
    from gpt2_conformance.api.errors import TableShapeError

    for name, table, rows in (("wte", wte, n_vocab), ("wpe", wpe, n_ctx)):
        if not isinstance(table, np.ndarray):
            raise TableShapeError(f"{name} must be a numpy array, got {type(table).__name__}")
        if table.shape != (rows, n_embd):
            raise TableShapeError(f"{name}.shape={table.shape}, but should be ({rows}, {n_embd})")
        if table.dtype != np.float32:
            raise TableShapeError(f"{name}.dtype={table.dtype}, but should be float32")
