"""Correct implementations of unusual shape: each must pass every clause it claims (the kill
matrix runs the suite on them beside the mutants). They guard against a suite that passes only
code written like its own reference: a table stored transposed, gathers through other
primitives, positions built without arange, a batch processed row by row.
"""

from __future__ import annotations

import numpy as np

from gpt2_conformance.api.validation import check_embed_inputs
from gpt2_conformance.backends.numpy.adapter import NumpyAdapter


class TransposedTable(NumpyAdapter):
    """wte stored as [d, V] (as a head-first layout keeps it) and gathered by columns; every
    other method of the reference reads wte through the [V, d] view below."""

    @property
    def wte(self):
        return self.wte_t.T

    @wte.setter
    def wte(self, value):
        self.wte_t = np.ascontiguousarray(value.T)

    def assign_wte_row(self, index, values):
        if not self.wte_t.flags.writeable:  # tables() handed out a read-only view of it: copy on write
            self.wte_t = self.wte_t.copy()
        self.wte_t[:, index] = values

    def embed(self, ids, past_length=0):
        ids, past_length = check_embed_inputs(ids, past_length)
        columns = self.wte_t[:, ids]  # [d, B, T]
        return np.moveaxis(columns, 0, -1) + self.wpe[past_length : past_length + ids.shape[1]][None]


class IndexSelectGather(NumpyAdapter):
    """The gather through take_along_axis on a flattened index (torch's index_select idiom)."""

    def embed(self, ids, past_length=0):
        ids, past_length = check_embed_inputs(ids, past_length)
        flat = ids.reshape(-1, 1).astype(np.intp)
        rows = np.take_along_axis(self.wte, np.broadcast_to(flat, (flat.shape[0], self.wte.shape[1])), axis=0)
        return rows.reshape(*ids.shape, self.wte.shape[1]) + self.wpe[past_length : past_length + ids.shape[1]][None]


class BroadcastPositions(NumpyAdapter):
    """Positions from a cumulative sum of ones broadcast over the batch, not arange."""

    def embed(self, ids, past_length=0):
        ids, past_length = check_embed_inputs(ids, past_length)
        positions = past_length + np.cumsum(np.ones_like(ids), axis=1) - 1  # [B, T]
        return self.wte[ids] + self.wpe[positions]


class RowByRow(NumpyAdapter):
    """One batch row at a time, each into its slice of a preallocated output."""

    def embed(self, ids, past_length=0):
        ids, past_length = check_embed_inputs(ids, past_length)
        out = np.empty((*ids.shape, self.config.n_embd), self.wte.dtype)
        for b in range(ids.shape[0]):
            out[b] = self.wte[ids[b]] + self.wpe[past_length : past_length + ids.shape[1]]
        return out


ALL = [TransposedTable, IndexSelectGather, BroadcastPositions, RowByRow]
