"""The mutant catalogue: one deliberately broken adapter per realistic way to get GPT-2's
embedding wrong. Each is the NumPy reference with the one wrong line a real port has had.
tests/test_kill_matrix.py runs the whole suite on each and checks which clauses kill it.

TARGETS names the clauses a mutant is built to fail; the kill matrix also records every
other clause it fails (reviewed, with the reason, in test_kill_matrix.EXPECTED_KILLS).
"""

from __future__ import annotations

import numpy as np

from gpt2_conformance.api import gpt2
from gpt2_conformance.api.validation import (
    check_ids_layout,
    check_past_length,
    check_positions,
    check_tables,
    check_token_ids,
)
from gpt2_conformance.backends.numpy.adapter import NumpyAdapter


def _rows(table, index):
    return np.take(table, index, axis=0)


class _Mutant(NumpyAdapter):
    TARGETS: frozenset = frozenset()

    def positions(self, seq_len, past_length):
        return past_length + np.arange(seq_len)

    def check(self, ids, past_length):
        """The reference's checks; mutants that drop a check override this."""
        check_ids_layout(ids.shape, ids.dtype.name, np.issubdtype(ids.dtype, np.integer))
        past_length = check_past_length(past_length)
        check_positions(ids.shape[1], past_length)
        check_token_ids(ids)
        return ids, past_length

    def embed(self, ids, past_length=0):
        ids, past_length = self.check(ids, past_length)
        return _rows(self.wte, ids) + _rows(self.wpe, self.positions(ids.shape[1], past_length))[None]

    def check_h(self, h_final):
        """The reference's check of logits' input, for mutants that write their own head (their
        defect is in the values, not in what they refuse)."""
        h_final = np.asarray(h_final)
        if h_final.ndim != 3 or h_final.shape[-1] != self.config.n_embd:
            raise ValueError(f"h_final.shape={h_final.shape}, but should be (B, T, {self.config.n_embd})")
        return h_final


# -- positions ----------------------------------------------------------------------------


class NoCacheOffset(_Mutant):
    """Positions restart at 0 with a KV cache: p_t = t."""

    TARGETS = frozenset({"POSITIONS-OFFSET", "POSITIONS-DECODE", "POSITIONS-CHUNKED"})

    def positions(self, seq_len, past_length):
        return np.arange(seq_len)


class OffsetTwice(_Mutant):
    """The cache offset is added by the cache object and again by the caller."""

    TARGETS = frozenset({"POSITIONS-OFFSET", "POSITIONS-DECODE"})

    def positions(self, seq_len, past_length):
        return 2 * past_length + np.arange(seq_len)


class CachedTokensReturnedToo(_Mutant):
    """With a cache it returns h for the cached positions too, [B, past_length + T, d] (as an
    implementation that re-embeds the whole sequence it has seen), not [B, T, d]."""

    TARGETS = frozenset({"SHAPE-H"})

    def embed(self, ids, past_length=0):
        ids, past_length = self.check(ids, past_length)
        h = super().embed(ids, past_length)
        if past_length == 0:
            return h
        seen = np.zeros((ids.shape[0], past_length, h.shape[-1]), h.dtype)  # the cached positions' rows
        return np.concatenate([seen, h], axis=1)


class OffByOnePositions(_Mutant):
    """Positions start at 1 (1-based thinking): p_t = past_length + t + 1."""

    TARGETS = frozenset({"LOOKUP-EXACT", "BOUNDS-LAST-POSITION"})

    def positions(self, seq_len, past_length):
        return past_length + np.arange(seq_len) + 1


class UInt8CachePositions(_Mutant):
    """The cached path (past_length > 0) builds its position ids in uint8, as a quantised
    decode loop that keeps its counters narrow: positions 256 and up wrap to 0.. there, while the
    prefill from past_length 0 builds them in int64 and is right."""

    TARGETS = frozenset({"POSITIONS-OFFSET", "POSITIONS-DECODE", "POSITIONS-CHUNKED"})

    def positions(self, seq_len, past_length):
        positions = past_length + np.arange(seq_len)
        return positions.astype(np.uint8).astype(np.int64) if past_length > 0 else positions


class ClampPositions(_Mutant):
    """No position check; positions clamped at 1023 (what jnp indexing does)."""

    TARGETS = frozenset({"BOUNDS-POSITION"})

    def check(self, ids, past_length):
        check_ids_layout(ids.shape, ids.dtype.name, np.issubdtype(ids.dtype, np.integer))
        check_token_ids(ids)
        return ids, check_past_length(past_length)

    def positions(self, seq_len, past_length):
        return np.minimum(past_length + np.arange(seq_len), gpt2.N_CTX - 1)


class WrapPositions(ClampPositions):
    """No position check; positions wrap modulo 1024 (a ring buffer habit)."""

    def positions(self, seq_len, past_length):
        return (past_length + np.arange(seq_len)) % gpt2.N_CTX


class ReversedWpe(_Mutant):
    """wpe read upside down (a table loaded with a flipped axis)."""

    TARGETS = frozenset({"LOOKUP-EXACT", "LOOKUP-LEARNED-POSITIONS"})

    def positions(self, seq_len, past_length):
        return gpt2.N_CTX - 1 - (past_length + np.arange(seq_len))


class SinusoidalPositions(_Mutant):
    """Vaswani sin/cos position features instead of the learned wpe table."""

    TARGETS = frozenset({"LOOKUP-LEARNED-POSITIONS", "LOOKUP-EXACT"})

    def embed(self, ids, past_length=0):
        ids, past_length = self.check(ids, past_length)
        d = self.config.n_embd
        pos = (past_length + np.arange(ids.shape[1]))[:, None]
        angle = pos / np.power(10000.0, 2 * (np.arange(d) // 2) / d)
        table = np.where(np.arange(d) % 2 == 0, np.sin(angle), np.cos(angle)).astype(self.wte.dtype)
        return _rows(self.wte, ids) + table[None]


class BatchRowsMixed(_Mutant):
    """Gathers with ids transposed and reshaped back: batch rows trade tokens."""

    TARGETS = frozenset({"LOOKUP-BATCH-INDEPENDENT"})

    def embed(self, ids, past_length=0):
        ids, past_length = self.check(ids, past_length)
        mixed = np.ascontiguousarray(ids.T).reshape(ids.shape)
        return _rows(self.wte, mixed) + _rows(self.wpe, self.positions(ids.shape[1], past_length))[None]


# -- token ids ----------------------------------------------------------------------------


class NarrowIdCast(_Mutant):
    """ids cast to int16 before the gather: ids >= 32768 wrap negative, then to the end. Both
    id dtypes go the same wrong way, so int32 and int64 still agree (LOOKUP-ID-DTYPES passes)."""

    TARGETS = frozenset({"LOOKUP-EXACT"})

    def embed(self, ids, past_length=0):
        ids, past_length = self.check(ids, past_length)
        return super().embed(ids.astype(np.int16), past_length)

    def check(self, ids, past_length):
        if ids.dtype == np.int16:
            return ids, past_length  # second pass through embed, already checked
        return super().check(ids, past_length)


class Int32IdsNarrowed(_Mutant):
    """int32 ids take a "compact" path that stores them as int16: ids >= 32768 wrap, int64 ids
    are right (a dtype-dependent fast path)."""

    TARGETS = frozenset({"LOOKUP-ID-DTYPES"})

    def embed(self, ids, past_length=0):
        ids, past_length = self.check(ids, past_length)
        gather_ids = ids.astype(np.int16) if ids.dtype == np.int32 else ids
        return _rows(self.wte, gather_ids) + _rows(self.wpe, self.positions(ids.shape[1], past_length))[None]


class StridesIgnored(_Mutant):
    """A C extension that reads the ids' buffer as if it were C-contiguous, ignoring strides
    (Fortran-ordered and strided views come out scrambled). Views with negative strides it
    copies first, as PyArray_FROMANY with NPY_ARRAY_C_CONTIGUOUS would."""

    TARGETS = frozenset({"LOOKUP-EXACT"})

    def embed(self, ids, past_length=0):
        ids, past_length = self.check(ids, past_length)
        ids = _as_c_buffer(ids)
        return _rows(self.wte, ids) + _rows(self.wpe, self.positions(ids.shape[1], past_length))[None]


def _c_read_stays_inside(array: np.ndarray) -> bool:
    """Whether reading array.size elements from the view's first one stays inside the memory it
    views (_as_c_buffer copies the views where it would not)."""
    from numpy.lib.array_utils import byte_bounds

    root = array
    while isinstance(root.base, np.ndarray):
        root = root.base
    start = array.__array_interface__["data"][0]
    return start + array.size * array.itemsize <= byte_bounds(root)[1]


class LargeBatchFloat16Sum(_Mutant):
    """Above 32 rows a "memory-saving" path adds the rows in float16 (a batch-size-dependent
    path, as serving stacks have for their padded batch sizes)."""

    TARGETS = frozenset({"LOOKUP-EXACT", "LOOKUP-BATCH-INDEPENDENT"})

    def embed(self, ids, past_length=0):
        h = super().embed(ids, past_length)
        if ids.shape[0] <= 32:
            return h
        tok = _rows(self.wte, ids).astype(np.float16)
        return (tok + _rows(self.wpe, self.positions(ids.shape[1], past_length)).astype(np.float16)[None]).astype(
            h.dtype
        )


class NumpyIntPastLengthIgnored(_Mutant):
    """past_length is honoured only as a Python int: a numpy integer (np.int64 from shape
    arithmetic) or a 0-d array is silently taken as 0 (an isinstance(past, int) test)."""

    TARGETS = frozenset({"POSITIONS-OFFSET"})

    def check(self, ids, past_length):
        if isinstance(past_length, (np.integer, np.ndarray)):
            past_length = 0
        return super().check(ids, past_length)


class NegativeIdsWrap(_Mutant):
    """Only the upper bound of token ids is checked: -1 silently reads the last row."""

    TARGETS = frozenset({"BOUNDS-TOKEN"})

    def check(self, ids, past_length):
        check_ids_layout(ids.shape, ids.dtype.name, np.issubdtype(ids.dtype, np.integer))
        past_length = check_past_length(past_length)
        check_positions(ids.shape[1], past_length)
        check_token_ids(np.maximum(ids, 0))
        return ids, past_length


class ZeroRowsOutOfRange(_Mutant):
    """No checks; out-of-range ids and positions give zero rows (TF's gather on GPU)."""

    TARGETS = frozenset({"BOUNDS-TOKEN", "BOUNDS-POSITION"})

    def check(self, ids, past_length):
        return ids, int(past_length)

    def embed(self, ids, past_length=0):
        ids, past_length = self.check(ids, past_length)
        pos = self.positions(ids.shape[1], past_length)
        tok = np.where(
            ((ids >= 0) & (ids < gpt2.N_VOCAB))[..., None], _rows(self.wte, np.clip(ids, 0, gpt2.N_VOCAB - 1)), 0
        )
        p_ok = (pos < gpt2.N_CTX)[:, None]
        return (tok + np.where(p_ok, _rows(self.wpe, np.minimum(pos, gpt2.N_CTX - 1)), 0)[None]).astype(self.wte.dtype)


class NaNRowsOutOfRange(ZeroRowsOutOfRange):
    """No checks; out-of-range rows are NaN (jnp.take's default fill)."""

    def embed(self, ids, past_length=0):
        h = super().embed(ids, past_length)
        pos = self.positions(ids.shape[1], int(past_length))
        bad = ((ids < 0) | (ids >= gpt2.N_VOCAB)) | (pos >= gpt2.N_CTX)[None]
        h[bad] = np.nan
        return h


class Int64IdsOnly(_Mutant):
    """Rejects int32 ids (a port that hard-codes torch.long)."""

    TARGETS = frozenset({"LOOKUP-ID-DTYPES"})

    def check(self, ids, past_length):
        if ids.dtype != np.int64:
            raise TypeError(f"ids must be int64, got {ids.dtype}")
        return super().check(ids, past_length)


class FloatIdsAccepted(_Mutant):
    """Casts ids to int without checking their dtype: 3.7 silently becomes 3."""

    TARGETS = frozenset({"BOUNDS-INPUT"})

    def check(self, ids, past_length):
        ids = ids.astype(np.int64)
        return super().check(ids, past_length)


class NegativePastAccepted(_Mutant):
    """past_length not validated: a negative one indexes wpe from the end."""

    TARGETS = frozenset({"BOUNDS-PAST-LENGTH"})

    def check(self, ids, past_length):
        check_ids_layout(ids.shape, ids.dtype.name, np.issubdtype(ids.dtype, np.integer))
        check_token_ids(ids)
        past_length = int(past_length)
        check_positions(ids.shape[1], past_length)
        return ids, past_length


class EmptySequenceCrash(_Mutant):
    """Checks ids with ids.max() and so crashes on T = 0."""

    TARGETS = frozenset({"SHAPE-EMPTY"})

    def check(self, ids, past_length):
        if ids.max() >= gpt2.N_VOCAB or ids.min() < 0:
            raise IndexError(f"token id out of range [0, {gpt2.N_VOCAB})")
        return super().check(ids, past_length)


class UnclearBoundsError(_Mutant):
    """Raises, but a bare RuntimeError that names neither the value nor the rule."""

    TARGETS = frozenset({"BOUNDS-MESSAGE"})

    def check(self, ids, past_length):
        try:
            return super().check(ids, past_length)
        except IndexError:
            raise RuntimeError("device-side assert triggered") from None


# -- the sum ------------------------------------------------------------------------------


class ScaleBySqrtD(_Mutant):
    """Token rows multiplied by sqrt(d), the Transformer-base habit."""

    TARGETS = frozenset({"LOOKUP-EXACT", "LOOKUP-NO-SCALE"})

    def embed(self, ids, past_length=0):
        ids, past_length = self.check(ids, past_length)
        scale = np.asarray(np.sqrt(self.config.n_embd), self.wte.dtype)
        return _rows(self.wte, ids) * scale + _rows(self.wpe, self.positions(ids.shape[1], past_length))[None]


class TokenTypeEmbedding(_Mutant):
    """BERT-style token-type table [2, d] added (type 0 everywhere)."""

    TARGETS = frozenset({"LOOKUP-EXACT", "LOOKUP-NO-EXTRA", "SHAPE-PARAMS"})

    def __init__(self, config=NumpyAdapter.__init__.__defaults__[0]):
        super().__init__(config)
        self.wtt = np.random.default_rng(0).normal(0, 0.02, (2, config.n_embd)).astype(self._dtype)

    def embed(self, ids, past_length=0):
        return super().embed(ids, past_length) + self.wtt[0]

    def parameters(self):
        return super().parameters() | {"wtt": self.wtt.shape}


class DropoutLeftOn(_Mutant):
    """Embedding dropout (p = 0.1) still active at inference."""

    TARGETS = frozenset({"LOOKUP-NO-DROPOUT", "LOOKUP-EXACT"})
    _rng = np.random.default_rng(0)

    def embed(self, ids, past_length=0):
        h = super().embed(ids, past_length)
        keep = self._rng.random(h.shape) >= 0.1
        return np.where(keep, h / np.asarray(0.9, h.dtype), 0).astype(h.dtype)


class SumInFloat16(_Mutant):
    """float32 tables added in float16 (an autocast region around the embedding)."""

    TARGETS = frozenset({"LOOKUP-EXACT"})

    def embed(self, ids, past_length=0):
        ids, past_length = self.check(ids, past_length)
        tok = _rows(self.wte, ids).astype(np.float16)
        pos = _rows(self.wpe, self.positions(ids.shape[1], past_length)).astype(np.float16)
        return (tok + pos[None]).astype(self.wte.dtype)


class Float16Truncated(_Mutant):
    """float16 tables made by truncating the mantissa instead of rounding to nearest-even."""

    TARGETS = frozenset({"DTYPE-FLOAT16"})

    def load_tables(self, wte, wpe):
        check_tables(wte, wpe, self.config.n_embd)
        if self._dtype != np.float16:
            return super().load_tables(wte, wpe)
        chop = lambda t: (t.view(np.uint32) & np.uint32(0xFFFFE000)).view(np.float32).astype(np.float16)  # noqa: E731
        self.wte, self.wpe = chop(wte), chop(wpe)


# -- initialisation -----------------------------------------------------------------------


class _InitMutant(_Mutant):
    def draw(self, rng, shape, std):
        raise NotImplementedError

    def init_tables(self, seed):
        rng = np.random.default_rng(seed)
        d = self.config.n_embd
        self.wte = self.draw(rng, (gpt2.N_VOCAB, d), self.wte_std).astype(self._dtype)
        self.wpe = self.draw(rng, (gpt2.N_CTX, d), self.wpe_std).astype(self._dtype)

    wte_std, wpe_std = gpt2.WTE_INIT_STD, gpt2.WPE_INIT_STD


class _NormalInit(_InitMutant):
    def draw(self, rng, shape, std):
        return rng.standard_normal(shape, dtype=np.float32) * np.float32(std)


class WpeInitStd002(_NormalInit):
    """wpe drawn with wte's std 0.02 (one initializer shared by both tables)."""

    TARGETS = frozenset({"INIT-WPE"})
    wpe_std = 0.02


class InitStdsSwapped(_NormalInit):
    """wte at 0.01 and wpe at 0.02."""

    TARGETS = frozenset({"INIT-WTE", "INIT-WPE"})
    wte_std, wpe_std = 0.01, 0.02


class InitStdOff5Percent(_NormalInit):
    """Both stds 5% too large."""

    TARGETS = frozenset({"INIT-WTE", "INIT-WPE"})
    wte_std, wpe_std = 0.021, 0.0105


class TruncatedNormalInit(_InitMutant):
    """tf.truncated_normal_initializer(stddev): cut at 2 std, so the std is 0.88 x."""

    TARGETS = frozenset({"INIT-WTE", "INIT-WPE"})

    def draw(self, rng, shape, std):
        x = rng.standard_normal(shape, dtype=np.float32)
        bad = np.abs(x) > 2
        while bad.any():
            x[bad] = rng.standard_normal(int(bad.sum()), dtype=np.float32)
            bad = np.abs(x) > 2
        return x * np.float32(std * self.rescale)

    rescale = 1.0


class RescaledTruncatedNormalInit(TruncatedNormalInit):
    """Truncated at 2 std and rescaled to the right std: only the shape is wrong."""

    rescale = 1 / 0.8796256610342398  # std of N(0,1) truncated to [-2, 2]


class UniformInit(_InitMutant):
    """Uniform with the right std (+-sqrt(3) std)."""

    TARGETS = frozenset({"INIT-WTE", "INIT-WPE"})

    def draw(self, rng, shape, std):
        a = np.sqrt(3.0) * std
        return rng.uniform(-a, a, shape).astype(np.float32)


class WpeCopiesWte(_NormalInit):
    """wpe initialised as a scaled copy of wte's first rows (a shared buffer)."""

    TARGETS = frozenset({"INIT-DISTINCT"})

    def init_tables(self, seed):
        super().init_tables(seed)
        self.wpe = (self.wte[: gpt2.N_CTX] * np.float32(0.5)).astype(self._dtype)


# -- the tied head ------------------------------------------------------------------------


class UntiedHeadCopy(_Mutant):
    """The head holds its own copy of wte taken at load time (a second [V, d] parameter)."""

    TARGETS = frozenset({"TIED-STORAGE", "TIED-GRAD", "SHAPE-PARAMS"})

    def load_tables(self, wte, wpe):
        super().load_tables(wte, wpe)
        self.lm_head = self.wte.copy()

    def init_tables(self, seed):
        super().init_tables(seed)
        self.lm_head = self.wte.copy()

    def parameters(self):
        return super().parameters() | {"lm_head": self.lm_head.shape}

    def logits(self, h_final):
        h_final = self.check_h(h_final)
        return (np.asarray(h_final, np.float32) @ self.lm_head.astype(np.float32).T).astype(self.wte.dtype)

    def gradients(self, ids, past_length, cotangent_h, cotangent_logits):
        # the projection role's gradient goes to lm_head, wte keeps only the gather role
        ids, past_length = self.check(ids, past_length)
        grad_h = cotangent_h + cotangent_logits @ self.lm_head
        d = self.config.n_embd
        grad_wte = np.zeros(self.wte.shape, np.float32)
        np.add.at(grad_wte, ids.reshape(-1), grad_h.reshape(-1, d))
        grad_wpe = np.zeros(self.wpe.shape, np.float32)
        np.add.at(grad_wpe, self.positions(ids.shape[1], past_length), grad_h.sum(axis=0))
        return grad_wte, grad_wpe


class OutputBias(_Mutant):
    """An lm_head bias [V] (nn.Linear's default bias=True)."""

    TARGETS = frozenset({"TIED-NO-BIAS", "SHAPE-PARAMS"})

    def __init__(self, config=NumpyAdapter.__init__.__defaults__[0]):
        super().__init__(config)
        self.bias = np.random.default_rng(0).normal(0, 0.02, gpt2.N_VOCAB).astype(np.float32)

    def logits(self, h_final):
        return super().logits(h_final) + self.bias.astype(self._dtype)

    def parameters(self):
        return super().parameters() | {"lm_head.bias": self.bias.shape}


class HeadInTF32(_Mutant):
    """The tied head multiplies in TF32 (inputs rounded to 10-bit mantissas), the default for
    float32 matmuls in TensorFlow and JAX on recent GPUs: tied and exact in structure, not float32
    accurate."""

    TARGETS = frozenset({"TIED-LOGITS-FLOAT32"})

    def logits(self, h_final):
        from gpt2_conformance.runtime.numerics import round_to_dtype

        if self._dtype != np.float32:
            return super().logits(h_final)
        h = round_to_dtype(np.asarray(self.check_h(h_final), np.float32), "tf32")
        shape = (*h.shape[:-1], gpt2.N_VOCAB)
        return (h.reshape(-1, h.shape[-1]) @ round_to_dtype(self.wte, "tf32").T).reshape(shape)


class GradientWithoutHeadRole(_Mutant):
    """The head's use of wte is detached: dL/dwte has only the gather role."""

    TARGETS = frozenset({"TIED-GRAD"})

    def gradients(self, ids, past_length, cotangent_h, cotangent_logits):
        grad_wte, grad_wpe = super().gradients(ids, past_length, cotangent_h, cotangent_logits)
        h = self.embed(ids, past_length)
        grad_wte -= cotangent_logits.reshape(-1, gpt2.N_VOCAB).T @ h.reshape(-1, self.config.n_embd)
        return grad_wte, grad_wpe


# -- shapes and storage -------------------------------------------------------------------


class HardCodedSmall(_Mutant):
    """n_embd hard-coded to GPT-2 small's 768: the larger sizes cannot be built."""

    TARGETS = frozenset({"SHAPE-TABLES"})

    def load_tables(self, wte, wpe):
        check_tables(wte, wpe, gpt2.N_EMBD_SMALL)
        super().load_tables(wte, wpe)


class FlatLogits(_Mutant):
    """The head's [B*T, V] result is not reshaped back (model.py line 172 forgotten)."""

    TARGETS = frozenset({"SHAPE-LOGITS"})

    def logits(self, h_final):
        out = super().logits(h_final)
        return out.reshape(-1, out.shape[-1])


class TablesKeptInBfloat16(_Mutant):
    """Claims float32 but keeps the tables in bfloat16 to save memory."""

    TARGETS = frozenset({"DTYPE-FLOAT32-ROUNDTRIP"})

    def load_tables(self, wte, wpe):
        from gpt2_conformance.runtime.numerics import round_to_dtype

        check_tables(wte, wpe, self.config.n_embd)  # the reference's refusals; the defect is the rounding
        super().load_tables(round_to_dtype(wte, "bfloat16"), round_to_dtype(wpe, "bfloat16"))


class Bfloat16ByTruncation(_Mutant):
    """Claims bfloat16 but converts by dropping the low 16 bits (round toward zero), as
    early bfloat16 casts did, instead of rounding to nearest-even."""

    TARGETS = frozenset({"DTYPE-BFLOAT16"})
    capabilities = NumpyAdapter.capabilities.__class__(dtypes=("float32", "float16", "bfloat16"), gradients=True)

    def __init__(self, config=NumpyAdapter.__init__.__defaults__[0]):
        self.bfloat16 = config.dtype == "bfloat16"
        super().__init__(config.__class__(config.n_embd, "float32" if self.bfloat16 else config.dtype, config.device))
        self.config = config

    def _chop(self, x):
        if not self.bfloat16:
            return x
        return (np.ascontiguousarray(x, np.float32).view(np.uint32) & np.uint32(0xFFFF0000)).view(np.float32)

    def load_tables(self, wte, wpe):
        super().load_tables(wte, wpe)
        self.wte, self.wpe = self._chop(self.wte), self._chop(self.wpe)

    def embed(self, ids, past_length=0):
        return self._chop(super().embed(ids, past_length))

    def logits(self, h_final):
        return self._chop(super().logits(np.asarray(h_final, np.float32)))


# -- the ids real pipelines send (spec.SENTINEL_IDS) ----------------------------------------


class IgnoreIndexAsZeroRow(_Mutant):
    """-100 (CrossEntropyLoss' ignore_index, leaked from the labels) is embedded as a zero row,
    as a port that copied the loss's masking into the embedding; every other bad id raises."""

    TARGETS = frozenset({"BOUNDS-TOKEN"})

    def embed(self, ids, past_length=0):
        ignored = ids == -100
        if not ignored.any():
            return super().embed(ids, past_length)
        h = super().embed(np.where(ignored, 0, ids), past_length)
        h[ignored] = 0
        return h


class PaddedVocabularyRows(_Mutant):
    """The table is padded to 50304 rows for speed (nanoGPT), and the check uses the padded
    size: ids 50257..50303 read the padding (zeros)."""

    TARGETS = frozenset({"BOUNDS-TOKEN"})
    PADDED = 50304

    def check(self, ids, past_length):
        check_ids_layout(ids.shape, ids.dtype.name, np.issubdtype(ids.dtype, np.integer))
        past_length = check_past_length(past_length)
        check_positions(ids.shape[1], past_length)
        check_token_ids(ids, self.PADDED)
        return ids, past_length

    def embed(self, ids, past_length=0):
        ids, past_length = self.check(ids, past_length)
        padding = np.zeros((1, self.wte.shape[1]), self.wte.dtype)  # every padded row reads as this zero row
        rows = np.where((ids >= gpt2.N_VOCAB)[..., None], padding, _rows(self.wte, np.minimum(ids, gpt2.N_VOCAB - 1)))
        return rows + _rows(self.wpe, self.positions(ids.shape[1], past_length))[None]


class Int32MaxIsNoToken(_Mutant):
    """2^31 - 1, a C extension's "no token" marker, is skipped (a zero row) instead of raising."""

    TARGETS = frozenset({"BOUNDS-TOKEN"})

    def embed(self, ids, past_length=0):
        marker = ids == 2**31 - 1
        if not marker.any():
            return super().embed(ids, past_length)
        h = super().embed(np.where(marker, 0, ids), past_length)
        h[marker] = 0
        return h


class DecodeStepSkipsIdCheck(_Mutant):
    """The one-token decode fast path skips the id check (it was "already checked" in the
    prefill) and clamps: a bad id in a cached step reads the eos row."""

    TARGETS = frozenset({"BOUNDS-TOKEN"})

    def check(self, ids, past_length):
        if (
            ids.ndim == 2
            and ids.shape[1] == 1
            and np.issubdtype(ids.dtype, np.integer)
            and check_past_length(past_length) > 0
        ):
            past_length = check_past_length(past_length)
            check_positions(1, past_length)
            return np.clip(ids, 0, gpt2.N_VOCAB - 1), past_length
        return super().check(ids, past_length)


# -- table updates seen by every later call -------------------------------------------------


class GatherTableNotRefreshed(_Mutant):
    """embed gathers from a contiguous copy of wte made at load time (for the fast path);
    assign_wte_row updates wte but not the copy, so the head sees the update and h does not."""

    TARGETS = frozenset({"STATE-UPDATES-SEEN"})

    def load_tables(self, wte, wpe):
        super().load_tables(wte, wpe)
        self.gather_table = np.ascontiguousarray(self.wte).copy()

    def init_tables(self, seed):
        super().init_tables(seed)
        self.gather_table = self.wte.copy()

    def embed(self, ids, past_length=0):
        ids, past_length = self.check(ids, past_length)
        table = getattr(self, "gather_table", self.wte)
        return _rows(table, ids) + _rows(self.wpe, self.positions(ids.shape[1], past_length))[None]


class PrefixCacheKeyedByIds(_Mutant):
    """A prompt cache: h is kept per (ids, past_length) and served again on a hit, and nothing
    invalidates it when the tables change."""

    TARGETS = frozenset({"STATE-UPDATES-SEEN"})

    def embed(self, ids, past_length=0):
        ids, past_length = self.check(ids, past_length)
        cache = self.__dict__.setdefault("prefix_cache", {})
        key = (ids.dtype.str, ids.shape, np.ascontiguousarray(ids).tobytes(), past_length)
        if key not in cache:
            if len(cache) >= 16:
                cache.pop(next(iter(cache)))
            cache[key] = super().embed(ids, past_length)
        return cache[key].copy()


class HeadCacheStaleAfterLoad(_Mutant):
    """logits multiply by a transposed copy of wte made on first use; assign_wte_row refreshes
    it, load_tables forgets to."""

    TARGETS = frozenset({"STATE-UPDATES-SEEN"})

    def _head(self):
        if getattr(self, "head_t", None) is None:
            self.head_t = np.ascontiguousarray(self.wte.astype(np.float32).T)
        return self.head_t

    def assign_wte_row(self, index, values):
        super().assign_wte_row(index, values)
        self.head_t = None

    def init_tables(self, seed):
        super().init_tables(seed)
        self.head_t = None

    def logits(self, h_final):
        if self._dtype != np.float32:
            return super().logits(h_final)
        h = np.asarray(self.check_h(h_final), np.float32)
        return (h.reshape(-1, h.shape[-1]) @ self._head()).reshape(*h.shape[:-1], gpt2.N_VOCAB)


class HotRowCache(_Mutant):
    """The rows most calls read (row 0, the byte-level tokens 0..255 and the eos/pad row 50256)
    are kept in a small contiguous copy made at load, for a fast path; load_tables refreshes it,
    assign_wte_row does not: an updated hot row is served stale, every other row is read fresh."""

    TARGETS = frozenset({"STATE-UPDATES-SEEN"})
    HOT = np.array([*range(256), gpt2.N_VOCAB - 1])

    def _refresh(self):
        self.hot = {int(i): row.copy() for i, row in zip(self.HOT, _rows(self.wte, self.HOT), strict=True)}

    def load_tables(self, wte, wpe):
        super().load_tables(wte, wpe)
        self._refresh()

    def init_tables(self, seed):
        super().init_tables(seed)
        self._refresh()

    def embed(self, ids, past_length=0):
        h = super().embed(ids, past_length)
        hot = getattr(self, "hot", None)
        if hot is None or h.size == 0:
            return h
        ids, past_length = self.check(ids, past_length)
        positions = _rows(self.wpe, self.positions(ids.shape[1], past_length))
        for b, t in np.argwhere(np.isin(ids, self.HOT)):
            h[b, t] = hot[int(ids[b, t])] + positions[t]
        return h


# -- the dtype of what comes back (DTYPE-OUTPUT) ---------------------------------------------


class Float64Logits(_Mutant):
    """A float32 model whose head hands back float64 logits (the product widened by a later
    np.asarray(..., dtype=float), as post-processing code does): the right values, twice the memory."""

    TARGETS = frozenset({"DTYPE-OUTPUT"})

    def logits(self, h_final):
        out = super().logits(h_final)
        return out.astype(np.float64) if self._dtype == np.float32 else out


class ZeroOutputBias(OutputBias):
    """An lm_head bias [V] initialised to zero (nn.Linear(bias=True) with its bias zeroed, as
    TransformerLens' b_U starts): logits(0) is still 0, but the head trains a bias."""

    TARGETS = frozenset({"TIED-NO-BIAS", "SHAPE-PARAMS"})

    def __init__(self, config=NumpyAdapter.__init__.__defaults__[0]):
        super().__init__(config)
        self.bias = np.zeros(gpt2.N_VOCAB, np.float32)


# -- side effects: the caller's arrays ------------------------------------------------------


class IdsSortedInPlace(_Mutant):
    """Sorts each row of the caller's ids in place to dedupe the gather (a C-extension habit),
    after computing h from them: h is right, the caller's ids are not."""

    TARGETS = frozenset({"STATE-NO-SIDE-EFFECTS"})

    def embed(self, ids, past_length=0):
        h = super().embed(ids, past_length)
        if ids.flags.writeable and ids.size:
            ids.sort(axis=1)
        return h


class ReusedOutputBuffer(_Mutant):
    """Writes h into one preallocated buffer per shape and returns it: the h an earlier call
    returned is overwritten by the next call of that shape."""

    TARGETS = frozenset({"STATE-NO-SIDE-EFFECTS"})

    def embed(self, ids, past_length=0):
        h = super().embed(ids, past_length)
        buffers = self.__dict__.setdefault("out_buffers", {})
        out = buffers.setdefault((h.shape, h.dtype.str), np.empty_like(h))
        out[...] = h
        return out


class DecodeStepBufferReused(_Mutant):
    """Only the one-token decode path writes into a persistent [B, 1, d] buffer: a decode loop
    that keeps its steps' h finds every kept one equal to the last."""

    TARGETS = frozenset({"STATE-NO-SIDE-EFFECTS"})

    def embed(self, ids, past_length=0):
        h = super().embed(ids, past_length)
        if h.ndim != 3 or h.shape[1] != 1:
            return h
        buffers = self.__dict__.setdefault("step_buffers", {})
        out = buffers.setdefault((h.shape, h.dtype.str), np.empty_like(h))
        out[...] = h
        return out


class LogitsBufferReused(_Mutant):
    """The head writes into one preallocated logits buffer per shape (np.matmul(out=))."""

    TARGETS = frozenset({"STATE-NO-SIDE-EFFECTS"})

    def logits(self, h_final):
        out = super().logits(h_final)
        buffers = self.__dict__.setdefault("logit_buffers", {})
        kept = buffers.setdefault((out.shape, out.dtype.str), np.empty_like(out))
        kept[...] = out
        return kept


class CotangentAccumulatedInPlace(_Mutant):
    """gradients adds the head's part into the caller's cotangent_h (astype(copy=False) of a
    float32 array is that array): dL/dh is right, the caller's cotangent is changed."""

    TARGETS = frozenset({"STATE-NO-SIDE-EFFECTS"})

    def gradients(self, ids, past_length, cotangent_h, cotangent_logits):
        grads = super().gradients(ids, past_length, cotangent_h, cotangent_logits)
        grad_h = cotangent_h.astype(np.float32, copy=False)
        grad_h += (cotangent_logits.reshape(-1, gpt2.N_VOCAB).astype(np.float32) @ self.wte.astype(np.float32)).reshape(
            grad_h.shape
        )
        return grads


class TablesNotCopied(_Mutant):
    """load_tables keeps the caller's float32 arrays (astype(copy=False)): an in-place update
    then writes into the caller's table (and fails on a read-only one)."""

    TARGETS = frozenset({"STATE-NO-SIDE-EFFECTS"})

    def load_tables(self, wte, wpe):
        check_tables(wte, wpe, self.config.n_embd)
        self.wte = wte.astype(self._dtype, copy=False)
        self.wpe = wpe.astype(self._dtype, copy=False)

    def assign_wte_row(self, index, values):
        self.wte[index] = values  # into the kept array itself (the reference copies a shared one first)


# -- dropout whose mask is the same every call ---------------------------------------------


class DropoutFixedSeed(_Mutant):
    """Embedding dropout (p = 0.1) left on, its mask drawn from a generator re-seeded on every
    call (a fixed PRNG key): the same input gives the same answer twice."""

    TARGETS = frozenset({"LOOKUP-NO-DROPOUT", "LOOKUP-EXACT"})

    def embed(self, ids, past_length=0):
        h = super().embed(ids, past_length)
        keep = np.random.default_rng(0).random(h.shape) >= 0.1
        return np.where(keep, h / np.asarray(0.9, h.dtype), 0).astype(h.dtype)


class DropoutMaskPerPosition(_Mutant):
    """Dropout left on with a mask buffer precomputed for the 1024 positions (no rescale), sliced
    by position: deterministic, the same for every batch row and every cache offset."""

    TARGETS = frozenset({"LOOKUP-NO-DROPOUT", "LOOKUP-EXACT"})

    def embed(self, ids, past_length=0):
        h = super().embed(ids, past_length)
        mask = self.__dict__.setdefault("mask", np.random.default_rng(1).random((gpt2.N_CTX, h.shape[-1])) >= 0.1)
        p = check_past_length(past_length)
        return np.where(mask[p : p + h.shape[1]][None], h, 0).astype(h.dtype)


# -- what mutation testing of the reference found unexercised (reports/mutation-testing.md) -----


class LongSequenceSplitRestartsPositions(_Mutant):
    """One long sequence (B = 1, T * d >= 2^20 elements, as the reference's threaded split) is cut
    into two tiles, and each tile adds the position rows from its own start: positions restart at
    the second tile. At d = 768 no sequence is that long (T <= 1024); at d = 1600, T >= 656 is."""

    TARGETS = frozenset({"LOOKUP-EXACT"})

    def embed(self, ids, past_length=0):
        ids, past_length = self.check(ids, past_length)
        seq = ids.shape[1]
        positions = _rows(self.wpe, self.positions(seq, past_length))
        if ids.shape[0] != 1 or seq * self.config.n_embd < 1 << 20:
            return _rows(self.wte, ids) + positions[None]
        half = seq // 2
        tiles = [(0, half), (half, seq)]
        return np.concatenate([_rows(self.wte, ids[:, a:b]) + positions[: b - a][None] for a, b in tiles], axis=1)


class OffsetKeptFromLastCall(_Mutant):
    """embed(ids) with no past_length continues where the last call ended (a stateful cache's
    habit) instead of the protocol's default 0; every call that passes past_length is right."""

    TARGETS = frozenset({"LOOKUP-EXACT"})

    def embed(self, ids, past_length=None):
        if past_length is None:
            past_length = self.__dict__.get("next_offset", 0)
        h = super().embed(ids, past_length)
        self.next_offset = check_past_length(past_length) + np.asarray(ids).shape[1]
        return h


# -- memory layouts and widths (spec 1.6): what a held-out set found passing every clause ---------


class HeadInputReadAsCOrder(_Mutant):
    """logits hands h_final's buffer to a C matmul as if it were C-contiguous (a ctypes pointer,
    no PyArray_FROMANY): a Fortran-ordered or strided h_final comes out scrambled; reversed views
    it copies first, as NPY_ARRAY_C_CONTIGUOUS would."""

    TARGETS = frozenset({"TIED-LOGITS"})

    def logits(self, h_final):
        return super().logits(_as_c_buffer(np.asarray(h_final)))


class CotangentsReadAsCOrder(_Mutant):
    """gradients reads both cotangents' buffers as if they were C-contiguous."""

    TARGETS = frozenset({"TIED-GRAD"})

    def gradients(self, ids, past_length, cotangent_h, cotangent_logits):
        return super().gradients(ids, past_length, _as_c_buffer(cotangent_h), _as_c_buffer(cotangent_logits))


class TablesReadAsCOrder(_Mutant):
    """load_tables copies each table's buffer as if it were C-contiguous (a memcpy of nbytes from
    the data pointer): a table handed over in Fortran order or as a strided view is kept scrambled."""

    TARGETS = frozenset({"LOOKUP-EXACT", "DTYPE-FLOAT32-ROUNDTRIP"})

    def load_tables(self, wte, wpe):
        check_tables(wte, wpe, self.config.n_embd)
        super().load_tables(_as_c_buffer(wte).copy(), _as_c_buffer(wpe).copy())


class InitStdScaledByWidth(_NormalInit):
    """Stds scaled by sqrt(768 / d) (a fan-in rule tuned at the small model): 0.02 and 0.01 at
    d = 768 only."""

    TARGETS = frozenset({"INIT-WTE", "INIT-WPE"})

    def init_tables(self, seed):
        scale = float(np.sqrt(gpt2.N_EMBD_SMALL / self.config.n_embd))
        self.wte_std, self.wpe_std = gpt2.WTE_INIT_STD * scale, gpt2.WPE_INIT_STD * scale
        super().init_tables(seed)


def _as_c_buffer(array: np.ndarray) -> np.ndarray:
    """What native code that ignores strides reads from `array`'s data pointer: array.size
    elements in C order. Views with negative strides, and views whose C read would run past the
    memory they view, are copied first (as PyArray_FROMANY with NPY_ARRAY_C_CONTIGUOUS would):
    past it a C read finds whatever lies there, which no verdict can rely on."""
    if array.flags.c_contiguous:
        return array
    if min(array.strides) < 0 or not _c_read_stays_inside(array):
        return np.ascontiguousarray(array)
    c_strides = tuple(int(np.prod(array.shape[k + 1 :])) * array.itemsize for k in range(array.ndim))
    return np.lib.stride_tricks.as_strided(array, shape=array.shape, strides=c_strides)


ALL = [
    obj
    for name, obj in sorted(globals().items())
    if isinstance(obj, type) and issubclass(obj, _Mutant) and not name.startswith("_")
]
