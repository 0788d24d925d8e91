"""Adapters whose answers come back in a form the protocol does not allow (or in an unusual
form it does allow): the NumPy reference with every array it returns (h, logits, each table of
tables(), each gradient) passed through one change. tests/test_malformed_returns.py runs every
clause on each: an implementation's malformed answer is its FAIL, never the suite's ERROR.

MALFORMED changes break the protocol; ALLOWED ones (a non-contiguous or read-only array) do not,
and must pass every clause the reference passes."""

from __future__ import annotations

import numpy as np

from gpt2_conformance.backends.numpy.adapter import NumpyAdapter


class _Returns(NumpyAdapter):
    def change(self, array: np.ndarray):
        raise NotImplementedError

    def tables(self):
        return tuple(self.change(t) for t in super().tables())

    def embed(self, ids, past_length=0):
        return self.change(super().embed(ids, past_length))

    def logits(self, h_final):
        return self.change(super().logits(h_final))

    def gradients(self, ids, past_length, cotangent_h, cotangent_logits):
        return tuple(self.change(g) for g in super().gradients(ids, past_length, cotangent_h, cotangent_logits))


class WrongRank(_Returns):
    """The last position alone ([B, d] for h, [B, V] for logits), a table with an extra axis."""

    def change(self, array):
        return array[:, -1] if array.ndim == 3 and array.shape[1] else array[None]


class WrongWidth(_Returns):
    def change(self, array):
        return array[..., : array.shape[-1] // 2]


class NestedList(_Returns):
    def change(self, array):
        return array.tolist()


class Nothing(_Returns):
    def change(self, array):
        return None


class Scalar(_Returns):
    def change(self, array):
        return float(array.reshape(-1)[0]) if array.size else 0.0


class Float64(_Returns):
    def change(self, array):
        return array.astype(np.float64)


class FortranOrder(_Returns):
    """Allowed: the same values in Fortran order."""

    def change(self, array):
        return np.asfortranarray(array)


class ReadOnly(_Returns):
    """Allowed: the same values in a read-only array."""

    def change(self, array):
        out = array.copy()
        out.flags.writeable = False
        return out


MALFORMED = [WrongRank, WrongWidth, NestedList, Nothing, Scalar, Float64]
ALLOWED = [FortranOrder, ReadOnly]
