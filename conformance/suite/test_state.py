"""STATE: every call reads the current tables and changes nothing else.

STATE-UPDATES-SEEN is a relation: after a table update, the implementation answers as it does
on the new tables (rows move exactly where the updated row is read; after load_tables, as a
fresh adapter loaded with the same tables), so a wrong value that is wrong the same way before
and after is LOOKUP-EXACT's, not this clause's. STATE-NO-SIDE-EFFECTS reads what the guard saw
(runtime/side_effects.py): the guard compares every array it passed and every answer it got
with its private copies after each call, and puts back what changed, so the other clauses run
on intact data and this one reports the change.
"""

import numpy as np
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from gpt2_conformance.api import gpt2
from gpt2_conformance.runtime import oracle
from gpt2_conformance.runtime.assertions import (
    as_array,
    as_logits,
    assert_bitwise_equal,
    assert_moves_exactly_at,
    assert_shape,
    assert_within,
    changed_row,
    describe_call,
)
from gpt2_conformance.runtime.hooks import skip_unless_claimed
from gpt2_conformance.runtime.strategies import (
    FIXED_ROWS,
    LAYOUTS,
    in_layout,
    suite_settings,
    token_ids,
    update_rows,
)
from gpt2_conformance.runtime.tables import final_h

D = gpt2.N_EMBD_SMALL
ROW = 12345  # the row STATE-NO-SIDE-EFFECTS updates
IDS = np.array([[ROW, 7, ROW, gpt2.N_VOCAB - 1, 0, ROW, 5, 9]])  # the ids the reload cases embed
DECODE_FROM = 40  # the decode steps' first past_length

READ_TOO = (0, 255, 256, gpt2.N_VOCAB - 1)  # read in every call of the drawn cases, updated or not


def _read_with(rows: tuple, others: list, order: list) -> np.ndarray:
    """One sequence [1, T] reading every updated row twice among ids not updated, in `order`
    (a permutation of its places; how batch rows relate is LOOKUP-BATCH-INDEPENDENT's question)."""
    places = [*rows, *rows, *[i for i in (*READ_TOO, *others) if i not in rows]]
    return np.array([[places[k] for k in order]], np.int64)


@st.composite
def updates(draw):
    """(rows, ids): the rows assign_wte_row updates, and the ids of the calls that read them."""
    rows = draw(update_rows)
    others = draw(st.lists(token_ids, max_size=3))
    size = 2 * len(rows) + len([i for i in (*READ_TOO, *others) if i not in rows])
    return rows, _read_with(rows, others, draw(st.permutations(range(size))))


def _fixed(rows: tuple) -> tuple:
    size = 2 * len(rows) + len([i for i in READ_TOO if i not in rows])
    return rows, _read_with(rows, [], list(range(size)))


def _steps(ids: np.ndarray, step: str) -> list[tuple[np.ndarray, int]]:
    """The calls that read ids: one prefill, or a decode loop of one-token steps (C-ordered
    copies: how strided ids are read is LOOKUP-EXACT's question)."""
    if step == "prefill":
        return [(ids, 0)]
    return [(np.ascontiguousarray(ids[:, t : t + 1]), DECODE_FROM + t) for t in range(ids.shape[1])]


class Updated:
    """One adapter for every example of a drawn test (a fresh one per example would copy wte
    each time), made on first use; each example updates its rows on top of the earlier ones'
    and compares the answers just before and just after its own update."""

    def __init__(self, make_adapter, wte: np.ndarray):
        self.make_adapter, self.wte, self.adapter = make_adapter, wte, None
        self.rows: dict[int, np.ndarray] = {}  # the rows assigned so far: their current values

    def get(self):
        if self.adapter is None:
            self.adapter = self.make_adapter()
        return self.adapter

    def current(self, row: int) -> np.ndarray:
        return self.rows.get(row, self.wte[row])

    def assign(self, row: int) -> tuple[np.ndarray, np.ndarray]:
        """assign_wte_row(row, old + 0.5 .. 1.5 in every element): far more than any rounding of
        a sum with a wpe row, so every element of h that reads it moves. Returns (old, new)."""
        old = self.current(row)
        new = (old + np.float32(0.5) + np.random.default_rng(row).random(D, dtype=np.float32)).astype(np.float32)
        self.get().assign_wte_row(row, new)
        self.rows[row] = new
        return old, new


@pytest.fixture
def updated(make_adapter, tables):
    return Updated(make_adapter, tables[0])


def _assert_moves_at_rows(before, after, ids: np.ndarray, rows: tuple, call: str) -> None:
    """h moved in every element where ids hold an updated row and nowhere else; the message names
    the row at the first wrong place (assert_moves_exactly_at's first, in the same order)."""
    where = np.isin(ids, rows)
    why = "assign_wte_row(" + ", ".join(map(str, rows)) + ")"
    after = as_array(after, call)
    if before.shape == after.shape == ids.shape + (D,) and before.dtype == after.dtype == np.float32:
        moved = after.view(np.uint32) != before.view(np.uint32)
        wrong = (moved & ~where[..., None]).any(-1)
        if not wrong.any():
            wrong = (~moved & where[..., None]).any(-1)
        if wrong.any():
            b, t = (int(i) for i in np.argwhere(wrong)[0])
            row = int(ids[b, t])
            why = f"assign_wte_row({row})" if row in rows else f"{why} (row {row} at ids[{b}, {t}] was not updated)"
    assert_moves_exactly_at(before, after, where, call, why)


@pytest.mark.clause("STATE-UPDATES-SEEN")
@pytest.mark.parametrize("step", ["prefill", "cached decode"])
@suite_settings()
@given(case=updates())
@example(case=_fixed(FIXED_ROWS[0]))
@example(case=_fixed(FIXED_ROWS[1]))
@example(case=_fixed(FIXED_ROWS[2]))
@example(case=_fixed(FIXED_ROWS[3]))
def test_row_update_seen_by_embed(updated, capabilities, step, case):
    """assign_wte_row(i, v) after ids holding i were embedded: embedding the same ids again
    moves h in every element where ids == i, and nowhere else (a cache of gathered rows, of the
    hot rows or of h keyed by the ids must not outlive the update). The rows are drawn, the edge
    rows always among them, several at once."""
    skip_unless_claimed(capabilities, "mutable_tables")
    if step != "prefill":
        skip_unless_claimed(capabilities, "kv_cache")
    rows, ids = case
    adapter = updated.get()
    calls = _steps(ids, step)
    before = [as_array(adapter.embed(i, past), describe_call("embed", i, past)) for i, past in calls]
    for row in rows:
        updated.assign(row)
    done = "assign_wte_row(" + ", ".join(map(str, rows)) + ")"
    for (step_ids, past), first in zip(calls, before, strict=True):
        if first.shape != step_ids.shape + (D,):
            continue  # an h of another shape is SHAPE-H's: where it moves cannot be read from it
        call = describe_call("embed", step_ids, past) + f" after {done}"
        _assert_moves_at_rows(first, adapter.embed(step_ids, past), step_ids, rows, call)


@pytest.fixture(scope="module")
def reloaded_tables(tables):
    """Other tables, every row different: wte's rows shifted by one, wpe negated (exact);
    read-only like the suite's own (an adapter may keep them without a copy). Made once for the
    module's tests (a [50257, 768] copy each time was a tenth of a second)."""
    wte, wpe = np.roll(tables[0], 1, axis=0), -tables[1]
    wte.flags.writeable = wpe.flags.writeable = False
    return wte, wpe


@pytest.mark.clause("STATE-UPDATES-SEEN")
@pytest.mark.parametrize("call", ["embed", "embed cached", "logits", "gradients"])
def test_reload_seen_by_every_call(make_adapter, capabilities, reloaded_tables, call):
    """After load_tables(wte', wpe'), an adapter that answered on the old tables answers as a
    fresh adapter loaded with wte', wpe': bit for bit for h; for logits and gradients within
    twice the structural bound (two runs of one implementation's float32 reductions)."""
    if call == "embed cached":
        skip_unless_claimed(capabilities, "kv_cache")
    if call == "logits":
        skip_unless_claimed(capabilities, "tied_head")
    if call == "gradients":
        skip_unless_claimed(capabilities, "gradients")
        skip_unless_claimed(capabilities, "tied_head")
    ids, past = (IDS, 0) if call != "embed cached" else (IDS[:, 2:3], DECODE_FROM)
    h = final_h(*IDS.shape, seed=22)
    rng = np.random.default_rng(23)
    cot_h = rng.standard_normal(IDS.shape + (D,), dtype=np.float32)
    cot_logits = rng.standard_normal(IDS.shape + (gpt2.N_VOCAB,), dtype=np.float32) * np.float32(0.01)

    def answer(adapter):
        if call == "logits":
            return as_logits(adapter.logits(h), h, describe_call("logits", h_final=f"float32{list(h.shape)}"))
        if call == "gradients":
            return adapter.gradients(ids, past, cot_h, cot_logits)
        return as_array(adapter.embed(ids, past), describe_call("embed", ids, past))

    adapter = make_adapter()
    answer(adapter)  # on the old tables: whatever the implementation caches is now built
    new = reloaded_tables
    adapter.load_tables(*new)
    fresh = make_adapter(load=False)
    fresh.load_tables(*new)
    what = describe_call("embed", ids, past) if call.startswith("embed") else call + "(...)"
    context = f"{what} after load_tables(other tables) vs a fresh adapter loaded with them"
    got = answer(adapter)
    if call == "gradients":
        # every row the ids read and every 97th other one: a stale table moves all of them (cot_logits
        # reaches every row), and [V, d] float64 comparisons would cost more than the whole clause.
        # Only those rows are kept, and the first adapter (whose guard keeps copies of both its [V, d]
        # answers) is let go before the second answers: 0.6 GB less at this clause's peak
        rows = np.union1d(np.unique(ids), np.arange(0, gpt2.N_VOCAB, 97))
        got = (np.asarray(assert_shape(got[0], (gpt2.N_VOCAB, D), context, "dwte"))[rows], as_array(got[1], context))
        del adapter
    want = answer(fresh)
    if call.startswith("embed"):
        assert_bitwise_equal(got, want, context)
    elif call == "logits":
        _, bound = oracle.tied_logits(h, new[0], inputs=oracle.STRUCTURAL_INPUTS)
        assert_within(got, want.astype(np.float64), 2 * bound, context, rule="the head must read the loaded wte")
    else:
        h_new = as_array(fresh.embed(ids, past), describe_call("embed", ids, past))
        bound_wte, bound_wpe = oracle.gradient_bounds(*new, ids, past, cot_h, cot_logits, h_new, rows)
        assert_within(
            got[0],
            np.asarray(want[0])[rows].astype(np.float64),
            2 * bound_wte,
            context + f" (rows {rows[0]}, {rows[1]}, ... of wte)",
            "dwte",
            rule="the gradients must read the loaded tables",
        )
        assert_within(
            got[1],
            np.asarray(want[1], np.float64),
            2 * bound_wpe,
            context,
            "dwpe",
            rule="the gradients must read the loaded tables",
        )


def _assert_no_side_effects(adapter, scenario: str) -> None:
    found = adapter.side_effects()
    if found:  # the first one, and how many more, before its call
        more = f"; {len(found) - 1} more side effect(s) in the {scenario} calls" if len(found) > 1 else ""
        raise AssertionError(f"{found[0].what}{more} [{found[0].call}]")


def _ids(seed, batch=2, seq_len=6):
    return np.random.default_rng(seed).integers(0, gpt2.N_VOCAB, (batch, seq_len))


@pytest.mark.clause("STATE-NO-SIDE-EFFECTS")
@pytest.mark.parametrize("scenario", ["embed", "decode loop", "logits", "gradients", "load_tables"])
def test_calls_are_pure_reads(make_adapter, capabilities, tables, scenario):
    """A sequence of calls a real caller makes, each checked by the guard: no argument written
    into, no earlier answer overwritten, and (embed, logits) the tables read back unchanged."""
    adapter = make_adapter(load=scenario != "load_tables")
    loaded = adapter.tables() if scenario in ("embed", "logits") else None
    if scenario == "embed":
        for seed, layout in enumerate(LAYOUTS):  # every layout, two shapes, twice each
            for batch, seq_len in ((2, 6), (2, 6), (1, 3)):
                adapter.embed(in_layout(_ids(seed * 7 + seq_len, batch, seq_len), layout), 0)
    elif scenario == "decode loop":
        skip_unless_claimed(capabilities, "kv_cache")
        all_ids = _ids(31, 2, 12)
        for t in range(all_ids.shape[1]):  # the steps' answers are kept, as a decode loop keeps them
            adapter.embed(all_ids[:, t : t + 1], t)
    elif scenario == "logits":
        skip_unless_claimed(capabilities, "tied_head")
        for seed in (1, 2, 3):
            adapter.logits(final_h(2, 3, seed))
    elif scenario == "gradients":
        skip_unless_claimed(capabilities, "gradients")
        skip_unless_claimed(capabilities, "tied_head")
        rng = np.random.default_rng(41)
        for _ in range(2):
            cot_h = rng.standard_normal((2, 4, D), dtype=np.float32)
            cot_logits = rng.standard_normal((2, 4, gpt2.N_VOCAB), dtype=np.float32) * np.float32(0.01)
            adapter.gradients(_ids(42, 2, 4), 0, cot_h, cot_logits)
    else:  # load_tables copies: a later in-place update leaves the caller's arrays alone
        skip_unless_claimed(capabilities, "mutable_tables")
        wte, wpe = tables[0].copy(), tables[1].copy()  # writable, as a caller's own arrays are
        adapter.load_tables(wte, wpe)
        adapter.assign_wte_row(ROW, changed_row(tables[0], ROW, seed=43)[ROW])
    _assert_no_side_effects(adapter, scenario)
    if loaded is not None:  # against the implementation's own tables before the calls, not the suite's
        for name, got, want in zip(("wte", "wpe"), adapter.tables(), loaded, strict=False):
            assert_bitwise_equal(
                np.asarray(got),
                np.asarray(want),
                f"tables() after the {scenario} calls",
                name,
                note="a pure read leaves the tables as they were",
            )
