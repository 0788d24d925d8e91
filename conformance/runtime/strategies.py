"""Hypothesis strategies for (B, T, past_length, ids) that reach the edges: T = 1 and
1024, the last position 1023, B up to 64, ids 0, 1, 32767/32768, 65535 (narrow-int casts) and
50256, and ids in the memory layouts callers pass (Fortran order, strided and reversed views,
read-only). SPEC.md states these ranges (spec.DRAWN_INPUTS)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from gpt2_conformance.api.gpt2 import N_CTX, N_VOCAB
from gpt2_conformance.spec import THOROUGH_FACTOR

EDGE_IDS = (0, 1, 2, 255, 256, 32767, 32768, 50255, N_VOCAB - 1)
# 2**32 and 2**32 + 5 wrap to the valid ids 0 and 5 when int64 ids are narrowed to int32
# unchecked (JAX without x64 does this silently); int32 draws filter them out
EDGE_BAD_IDS = (-1, -2, N_VOCAB, N_VOCAB + 1, -N_VOCAB, 65536, 2**31 - 1, -(2**31), 2**32, 2**32 + 5)

token_ids = st.one_of(st.sampled_from(EDGE_IDS), st.integers(0, N_VOCAB - 1))

# Rows a real pipeline updates in place (fine-tuning new special tokens, resizing the vocabulary,
# resetting the eos/pad row) and an implementation may serve from a copy made at load: row 0, the
# byte-level tokens (ids below 256; 97 is "b"), 256 (the first merge) and 50256 (<|endoftext|>).
# STATE-UPDATES-SEEN and TIED-STORAGE update FIXED_ROWS in every draw mode and draw UPDATE_ROWS.
EDGE_ROWS = (0, 97, 255, 256, N_VOCAB - 1)
FIXED_ROWS = ((0,), (97,), (N_VOCAB - 1,), (0, 255, N_VOCAB - 1))
update_rows = st.lists(
    st.one_of(st.sampled_from(EDGE_ROWS), st.integers(0, N_VOCAB - 1)), min_size=1, max_size=3, unique=True
).map(tuple)

MAX_BATCH = 64  # the bench times B up to 64; serving stacks pad batches to fixed sizes like it
LAST_POSITION = N_CTX - 1
# Clauses about relations (batch rows, decode, chunks, offsets) keep their positions below the
# last one: whether position 1023 works at all is BOUNDS-LAST-POSITION's (and LOOKUP-EXACT's)
# to say, and an implementation that fails only there must not fail every relation with it.
RELATION_MAX_POSITION = N_CTX - 2

# Memory layouts callers hand in: a decode loop's all_ids[:, -1:] is a non-contiguous view,
# other libraries give Fortran order (a head stored [d, V] hands its table over as wte.T), a
# slice of a concatenated activation is a strided view, np.frombuffer gives read-only arrays.
LAYOUTS = ("C", "F", "column-view", "every-other", "reversed", "read-only")


def in_layout(array: np.ndarray, layout: str) -> np.ndarray:
    """The same values as `array` (C order) in another memory layout; "column" is the last axis
    (T for ids, d for h_final and the tables)."""
    if layout == "C":
        return array
    if layout == "F":
        return np.asfortranarray(array)
    if layout in ("column-view", "every-other"):  # the last columns of a wider array; or stride 2 along them
        width = array.shape[-1]
        wide = np.zeros(array.shape[:-1] + (width + 3 if layout == "column-view" else 2 * width,), array.dtype)
        columns = slice(3, None) if layout == "column-view" else slice(None, None, 2)
        wide[..., columns] = array
        return wide[..., columns]
    if layout == "reversed":  # negative strides on every axis
        backwards = (slice(None, None, -1),) * array.ndim
        return np.ascontiguousarray(array[backwards])[backwards]
    if layout == "read-only":
        out = array.copy()
        out.flags.writeable = False
        return out
    raise ValueError(f"in_layout: unknown layout {layout!r}; known: {LAYOUTS}")


@st.composite
def batch_and_length(draw, max_batch: int = MAX_BATCH, min_batch: int = 1, max_len: int = N_CTX):
    """(B, T): B up to 64, T up to max_len for B <= 3, 64 for B <= 16, 8 above (cheap)."""
    tiers = [st.integers(min_batch, max(min_batch, min(3, max_batch)))]
    if max_batch > 3:
        tiers += [st.integers(max(min_batch, 4), min(16, max_batch))]
    if max_batch > 16:
        tiers += [st.integers(max(min_batch, 17), max_batch), st.just(max_batch)]
    batch = draw(st.one_of(*tiers))
    cap = max_len if batch <= 3 else min(max_len, 64 if batch <= 16 else 8)
    seq_len = draw(
        st.one_of(
            st.just(1),
            st.integers(1, min(16, cap)),
            st.integers(1, min(64, cap)),
            st.sampled_from([cap, max(cap - 1, 1)]),
            st.integers(1, cap),
        )
    )
    return batch, seq_len


@st.composite
def embed_inputs(
    draw,
    max_batch: int = MAX_BATCH,
    min_batch: int = 1,
    max_len: int = N_CTX,
    cached: bool | None = None,
    dtype=np.int64,
    max_position: int = LAST_POSITION,
    max_past: int = N_CTX,
    layouts: bool = True,
):
    """(ids [B, T], past_length) with 1 <= T and past_length + T - 1 <= max_position. cached=True
    forces past_length > 0, False forces 0, None draws either; a test drawing cached inputs
    needs kv_cache claimed. T = 0 is SHAPE-EMPTY's alone, so one empty-sequence bug fails one
    clause rather than every clause that draws inputs. ids come in a drawn memory layout."""
    top = max_position + 1  # positions past_length .. past_length + T - 1 < top
    if cached:
        max_len = min(max_len, top - 1)  # leave room for past_length >= 1
    batch, seq_len = draw(batch_and_length(max_batch, min_batch, min(max_len, top)))
    room = min(top - seq_len, max_past)
    if cached is False or (cached is None and room == 0):
        past = 0
    else:
        lo = 1 if cached else 0
        # the last valid start, the first, and anything between
        past = draw(st.one_of(st.just(room), st.just(lo), st.integers(lo, room)))
    ids = np.ascontiguousarray(draw(hnp.arrays(dtype, (batch, seq_len), elements=token_ids)))
    layout = draw(st.sampled_from(LAYOUTS)) if layouts else "C"
    return in_layout(ids, layout), past


@st.composite
def out_of_range_positions(draw, cached: bool = True):
    """(T, past_length) with past_length + T > 1024, T >= 1, biased to the first bad position."""
    if not cached:
        return draw(st.one_of(st.just(N_CTX + 1), st.integers(N_CTX + 1, 2 * N_CTX))), 0
    seq_len = draw(st.one_of(st.just(1), st.integers(1, 8), st.integers(1, N_CTX + 8)))
    first_bad = max(N_CTX - seq_len + 1, 0)
    past = draw(st.one_of(st.just(first_bad), st.integers(first_bad, first_bad + 4), st.integers(first_bad, 10**6)))
    return seq_len, past


@st.composite
def ids_with_one_bad(draw, dtype=np.int64):
    """A valid [B, T] ids array with one out-of-range id at a drawn place."""
    batch, seq_len = draw(st.integers(1, 3)), draw(st.integers(1, 12))
    ids = draw(hnp.arrays(dtype, (batch, seq_len), elements=token_ids))
    info = np.iinfo(dtype)
    bad = draw(
        st.one_of(
            st.sampled_from([b for b in EDGE_BAD_IDS if info.min <= b <= info.max]),
            st.integers(N_VOCAB, info.max),
            st.integers(info.min, -1),
        )
    )
    where = (draw(st.integers(0, batch - 1)), draw(st.integers(0, seq_len - 1)))
    ids = ids.copy()
    ids[where] = bad
    return ids, bad


@st.composite
def chunk_splits(draw, seq_len: int):
    """Sorted split points strictly inside (0, seq_len); may be empty (no split)."""
    points = draw(st.lists(st.integers(1, max(seq_len - 1, 1)), max_size=6, unique=True))
    return sorted(p for p in points if 0 < p < seq_len)


@dataclass
class DrawMode:
    """How the suite draws (spec.DRAW_MODES): set once per session, before the clause tests are
    imported (runtime/hooks.py pytest_configure), read when their settings are built."""

    thorough: bool = False
    seed: int | None = None  # thorough: the seed of the draws, printed and stored in the report
    shrink: bool = True  # minimise a failing example (hypothesis' shrink phase); off: the first one found


MODE = DrawMode()


def without_shrinking(phases) -> tuple:
    """hypothesis phases less its shrink phase: a failing example is reported as first drawn."""
    from hypothesis import Phase

    return tuple(p for p in phases if p is not Phase.shrink)


def suite_settings(max_examples: int = 25):
    """Deterministic by default (derandomized, no example database), no deadline: a verdict must
    not depend on the run or on machine load. In the thorough mode, THOROUGH_FACTOR times the
    examples from MODE.seed (the hypothesis seed the runner passes; the same seed replays the same
    draws). Function-scoped fixtures are fine: the suite's adapters are read-only inside a @given
    test."""
    from hypothesis import HealthCheck, Phase, seed, settings

    examples = max_examples * (THOROUGH_FACTOR if MODE.thorough else 1)
    # without the shrink phase a test that fails still fails (its first failing example is
    # replayed and raised), only sooner: shrinking is most of a failing implementation's run
    phases = tuple(Phase) if MODE.shrink else without_shrinking(Phase)
    chosen = settings(
        max_examples=examples,
        derandomize=not MODE.thorough,
        database=None,
        deadline=None,
        print_blob=False,
        phases=phases,
        suppress_health_check=[
            HealthCheck.function_scoped_fixture,
            HealthCheck.too_slow,
            HealthCheck.data_too_large,
            HealthCheck.large_base_example,
        ],
    )
    if not MODE.thorough:
        return chosen
    return lambda test: seed(MODE.seed)(chosen(test))
