"""NumPy reference adapter.

The plainest implementation of the spec that is still fast: np.take(mode="clip") after the
range check, each piece of h written once as the finished sum (np.add(..., out=)), split over
the cores for large inputs (np.take releases the GIL),
and BLAS for the tied head.
float16 is stored as float16; its head accumulates in float32 (as frameworks do) and
rounds once. Gradients are analytic: numpy has no autodiff, and these formulas are the
reference the framework backends' autodiff is compared with.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numpy as np

from gpt2_conformance.api import gpt2
from gpt2_conformance.api.adapter import Adapter, AdapterConfig, Capabilities
from gpt2_conformance.api.machine import cores as _cores  # CPUs this process may run on
from gpt2_conformance.api.machine import immutable, zero_table
from gpt2_conformance.api.validation import check_embed_inputs, check_tables

_NUMPY_DTYPES = {"float32": np.float32, "float16": np.float16}
# Below this many output elements (4 MB of float32) a thread hand-off costs more than it saves:
# decode steps stay on the calling thread.
_THREADED_MIN_ELEMENTS = 1 << 20
_pool: ThreadPoolExecutor | None = None
_HEAD_ROWS = 4096  # wte rows converted to float32 at a time by a float16 head (12 MB at d = 768)


def gather_add(wte: np.ndarray, wpe_rows: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """h[b, t] = wte[ids[b, t]] + wpe_rows[t], split into contiguous pieces, one per core.

    np.take and np.add release the GIL, so threads run them in parallel. mode="clip" skips
    np.take's per-index bounds branch: safe only because the caller checked every id. Each
    element is still one IEEE addition of the same two values, written once into h, so the
    result is bit for bit that of wte[ids] + wpe_rows.
    """
    global _pool
    batch, seq = ids.shape
    h = np.empty((batch, seq, wte.shape[1]), wte.dtype)
    # pieces: whole batch rows when there are several, else slices of the one sequence, each a
    # contiguous block of h that np.add(out=) writes in place. Small outputs (decode
    # steps) skip even the core count: it is a system call, on the hot path of every step.
    n = 1 if h.size < _THREADED_MIN_ELEMENTS else min(_cores(), batch if batch > 1 else seq)
    if n < 2:
        pieces = [(slice(None), slice(None))]
    elif batch > 1:
        pieces = [(slice(i * batch // n, (i + 1) * batch // n), slice(None)) for i in range(n)]
    else:
        pieces = [(slice(None), slice(i * seq // n, (i + 1) * seq // n)) for i in range(n)]

    def piece(where):
        # each piece writes its slice of h once, the finished sum (never a partial value another
        # piece could read or add to): pieces that overlapped would write the same bits, so a
        # split is race-free by construction, not only by the slices being disjoint
        rows, steps = where
        np.add(np.take(wte, ids[rows, steps], axis=0, mode="clip"), wpe_rows[steps][None], out=h[rows, steps])

    if len(pieces) == 1:
        piece(pieces[0])
    else:
        if _pool is None:
            _pool = ThreadPoolExecutor(_cores(), thread_name_prefix="gpt2c-numpy-gather")
        list(_pool.map(piece, pieces))  # list(): re-raises a piece's exception here
    return h


def _kept(table: np.ndarray, dtype) -> np.ndarray:
    """The adapter's own table: a read-only float32 array is kept as a read-only view, copied only
    if a row is assigned (154 MB not copied per load); anything else is copied now (a copy of its
    own, written in place by assign_wte_row), so nothing the caller can write through reaches it."""
    if dtype == np.float32 and immutable(table):
        return _read_only(table)
    return table.astype(dtype, copy=True)


def _read_only(table: np.ndarray) -> np.ndarray:
    view = table.view()
    view.flags.writeable = False
    return view


class NumpyAdapter(Adapter):
    capabilities = Capabilities(dtypes=tuple(_NUMPY_DTYPES), devices=("cpu",), gradients=True)

    def __init__(self, config: AdapterConfig = AdapterConfig()):
        super().__init__(config)
        self._dtype = self.framework_dtype(_NUMPY_DTYPES)
        d = config.n_embd
        # read-only zeros that take no memory: most adapters are loaded right after they are made
        self.wte = zero_table((gpt2.N_VOCAB, d), self._dtype)
        self.wpe = zero_table((gpt2.N_CTX, d), self._dtype)

    # -- tables -------------------------------------------------------------------
    def load_tables(self, wte, wpe):
        check_tables(wte, wpe, self.config.n_embd)
        self.wte, self.wpe = _kept(wte, self._dtype), _kept(wpe, self._dtype)

    def tables(self):
        # read-only views: assign_wte_row copies before it writes, so what was handed out stays
        self.wte, self.wpe = _read_only(self.wte), _read_only(self.wpe)
        return self.wte.view(), self.wpe.view()

    def init_tables(self, seed):
        # model(): wte ~ N(0, 0.02^2), wpe ~ N(0, 0.01^2), plain (not truncated) normals
        rng = np.random.default_rng(seed)
        d = self.config.n_embd
        wte = rng.standard_normal((gpt2.N_VOCAB, d), dtype=np.float32)
        wte *= np.float32(gpt2.WTE_INIT_STD)  # in place: the same values, one 154 MB array fewer
        wpe = rng.standard_normal((gpt2.N_CTX, d), dtype=np.float32)
        wpe *= np.float32(gpt2.WPE_INIT_STD)
        self.wte, self.wpe = wte.astype(self._dtype, copy=False), wpe.astype(self._dtype, copy=False)

    def assign_wte_row(self, index, values):
        if not self.wte.flags.writeable:  # shared with the caller or an earlier tables(): copy on write
            self.wte = self.wte.copy()
        self.wte[index] = values

    def parameters(self):
        return {"wte": self.wte.shape, "wpe": self.wpe.shape}

    # -- forward ------------------------------------------------------------------
    def embed(self, ids, past_length=0):
        ids, past_length = check_embed_inputs(ids, past_length)
        seq_len = ids.shape[1]
        # every id was checked just above, which gather_add's mode="clip" relies on; it splits
        # large inputs over the cores (see `gpt2-conformance bench`).
        return gather_add(self.wte, self.wpe[past_length : past_length + seq_len], ids)

    def logits(self, h_final):
        h_final = np.asarray(h_final)
        if h_final.ndim != 3 or h_final.shape[-1] != self.config.n_embd:
            raise ValueError(f"h_final.shape={h_final.shape}, but should be (B, T, {self.config.n_embd})")
        # one 2-D product: a 3-D h @ wte.T is a loop of B matmuls in numpy, each reading all of
        # wte (far slower at decode shapes B=64, T=1: `gpt2-conformance bench` times both)
        shape = (*h_final.shape[:-1], gpt2.N_VOCAB)
        h_flat = h_final.reshape(-1, self.config.n_embd)
        if self._dtype == np.float32:
            return (h_flat.astype(np.float32, copy=False) @ self.wte.T).reshape(shape)
        # float32 accumulation a block of vocabulary rows at a time: the same products as one
        # matmul against wte in float32, without a 154 MB float32 copy of wte per call
        h32 = h_flat.astype(np.float32)
        out = np.empty((h_flat.shape[0], gpt2.N_VOCAB), self._dtype)
        for start in range(0, gpt2.N_VOCAB, _HEAD_ROWS):
            block = self.wte[start : start + _HEAD_ROWS].astype(np.float32)
            out[:, start : start + _HEAD_ROWS] = h32 @ block.T
        return out.reshape(shape)

    def gradients(self, ids, past_length, cotangent_h, cotangent_logits):
        ids, past_length = check_embed_inputs(ids, past_length)
        h = self.embed(ids, past_length).astype(np.float32, copy=False)
        wte = self.wte.astype(np.float32, copy=False)  # read only here: no 154 MB copy in float32
        d = self.config.n_embd
        head_part = cotangent_logits.reshape(-1, gpt2.N_VOCAB).astype(np.float32) @ wte  # 2-D: BLAS, not a batched loop
        grad_h = cotangent_h.astype(np.float32) + head_part.reshape(cotangent_h.shape)
        grad_wte = cotangent_logits.reshape(-1, gpt2.N_VOCAB).astype(np.float32).T @ h.reshape(-1, d)  # head role
        # gather role: each read row's cotangents summed in id order from zero, then added to its
        # head part (a + b == b + a, so this is bit for bit zeros + gather, then + head), without
        # a second [V, d] array
        rows, where = np.unique(ids.reshape(-1), return_inverse=True)
        gathered = np.zeros((rows.size, d), np.float32)
        np.add.at(gathered, where.reshape(-1), grad_h.reshape(-1, d))
        grad_wte[rows] += gathered
        grad_wpe = np.zeros(self.wpe.shape, np.float32)
        np.add.at(grad_wpe, past_length + np.arange(ids.shape[1]), grad_h.sum(axis=0))
        return grad_wte, grad_wpe
