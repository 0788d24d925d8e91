"""TIED: logits = h_final @ wte^T through the same wte (0 new parameters).

Two questions are kept apart. Structure (TIED-LOGITS, TIED-STORAGE, TIED-NO-BIAS): the head is
wte itself, with no bias and no scale, judged within a bound loose enough for a matmul whose
inputs were rounded to bfloat16 or TF32 (oracle.STRUCTURAL_INPUTS) and still tight enough to
tell another matrix, a scale or a bias apart. Accuracy (TIED-LOGITS-FLOAT32): within the float32
bound, a clause a GPU run in TF32 can waive, whose message names the precision the errors fit.
"""

import numpy as np
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from gpt2_conformance.api import gpt2
from gpt2_conformance.runtime import oracle
from gpt2_conformance.runtime.assertions import as_array, as_logits, assert_bitwise_equal, assert_within, describe_call
from gpt2_conformance.runtime.calls import describe_array
from gpt2_conformance.runtime.strategies import FIXED_ROWS, LAYOUTS, in_layout, suite_settings, update_rows
from gpt2_conformance.runtime.tables import final_h

D = gpt2.N_EMBD_SMALL
STRUCTURE = f"the head is wte: {oracle.STRUCTURAL_INPUTS}-input bound"


def _h(batch, seq_len, seed=9):
    return final_h(batch, seq_len, seed)


@pytest.mark.clause("TIED-LOGITS")
@pytest.mark.parametrize("batch,seq_len", [(1, 1), (2, 6)])
def test_tied_logits(adapter, tables, batch, seq_len):
    """logits == h_final @ wte^T within the bound of bfloat16-rounded inputs: the head is wte."""
    h = _h(batch, seq_len)
    call = describe_call("logits", h_final=f"float32{list(h.shape)}")
    expected, bound = oracle.tied_logits(h, tables[0], inputs=oracle.STRUCTURAL_INPUTS)
    assert_within(as_logits(adapter.logits(h), h, call), expected, bound, call, rule=STRUCTURE)


@pytest.mark.clause("TIED-LOGITS-FLOAT32")
@pytest.mark.parametrize("batch,seq_len", [(1, 1), (2, 6)])
def test_tied_logits_float32(adapter, tables, batch, seq_len):
    """logits == h_final @ wte^T within gamma_d(float32) * |h| @ |wte|^T."""
    h = _h(batch, seq_len)
    call = describe_call("logits", h_final=f"float32{list(h.shape)}")
    logits = as_logits(adapter.logits(h), h, call)
    expected, bound = oracle.tied_logits(h, tables[0])
    try:
        assert_within(logits, expected, bound, call, rule="gamma_768(float32) bound")
    except AssertionError as exc:  # which input precision the errors fit, before the call that ends the line
        text, _, call_part = str(exc).rpartition(" [")
        raise AssertionError(f"{text}{oracle.likely_head_precision(h, tables[0], logits)} [{call_part}") from None


@pytest.mark.clause("TIED-LOGITS")
@pytest.mark.parametrize("layout", ("F", "column-view", "every-other", "reversed", "read-only"))
def test_tied_logits_in_every_layout(adapter, tables, layout):
    """The same for h_final in each memory layout callers pass (the last columns of a wider
    activation, every other column, Fortran order, a reversed view, read-only): a C extension
    that reads the buffer as C-contiguous scrambles the others."""
    h = in_layout(_h(2, 6), layout)
    call = describe_call("logits", h_final=describe_array(h))
    expected, bound = oracle.tied_logits(np.ascontiguousarray(h), tables[0], inputs=oracle.STRUCTURAL_INPUTS)
    assert_within(as_logits(adapter.logits(h), h, call), expected, bound, call, rule=f"{STRUCTURE}, h_final {layout}")


class _Storage:
    """One adapter for every example of the drawn TIED-STORAGE test (a fresh one per example
    would copy wte each time), made on first use; each example moves its rows from where the
    earlier examples left them."""

    def __init__(self, make_adapter, wte: np.ndarray):
        self.make_adapter, self.wte, self.adapter = make_adapter, wte, None
        self.rows: dict[int, np.ndarray] = {}  # the rows assigned so far: their current values

    def get(self):
        if self.adapter is None:
            self.adapter = self.make_adapter()
        return self.adapter


@pytest.fixture
def storage(make_adapter, tables):
    return _Storage(make_adapter, tables[0])


@pytest.mark.clause("TIED-STORAGE")
@suite_settings(max_examples=10)
@given(rows=update_rows, read_back=st.just(False))
@example(rows=FIXED_ROWS[0], read_back=True)
@example(rows=FIXED_ROWS[1], read_back=True)
@example(rows=FIXED_ROWS[2], read_back=True)
@example(rows=FIXED_ROWS[3], read_back=True)
def test_head_shares_wte_storage(storage, rows, read_back):
    """Write wte[row] in place for each drawn row; logit column `row` must move by h @ (new -
    old) (the head reads the new row, it holds no copy of it). The change is sign(h[0, 0]): logit
    [0, 0, row] moves by |h[0, 0]|_1, about 600, against a structural bound near 5. The fixed
    cases also read the rows back from tables() (which may cost a copy of wte at the next write).
    Ten drawn examples (each two [1, 1, V] heads), 100 in the thorough mode."""
    adapter = storage.get()
    h = _h(1, 1)
    h64 = h.astype(np.float64)
    call = describe_call("logits", h_final="float32[1, 1, 768]")
    before = as_logits(adapter.logits(h), h, call)[..., list(rows)].astype(np.float64)
    moved = []
    for row in rows:
        old = storage.rows.get(row, storage.wte[row])
        new_row = (old + np.sign(h[0, 0])).astype(np.float32)
        adapter.assign_wte_row(row, new_row)
        storage.rows[row] = new_row
        moved.append((row, old, new_row))
    done = "assign_wte_row(" + ", ".join(map(str, rows)) + ")"
    if read_back:
        wte = adapter.tables()[0]
        for row, _, new_row in moved:
            assert_bitwise_equal(np.asarray(wte[row]), new_row, f"tables() after {done}", f"wte_row {row}")
    after = as_logits(adapter.logits(h), h, call + f" after {done}")[..., list(rows)].astype(np.float64)
    for k, (row, old, new_row) in enumerate(moved):
        expected = h64 @ (new_row.astype(np.float64) - old)
        magnitude = np.abs(h64) @ (np.abs(new_row.astype(np.float64)) + np.abs(old))
        bound = oracle.rounded_inputs_factor(D, oracle.STRUCTURAL_INPUTS) * magnitude
        assert_within(
            after[..., k] - before[..., k],
            expected,
            bound,
            call + f" after {done} minus before",
            what=f"change of logits[..., {row}]",
            rule=f"the head must read the new row {row}",
        )


@pytest.mark.clause("TIED-GRAD")
@pytest.mark.parametrize("roles", ["gather", "both"])
@pytest.mark.parametrize("past", [0, 5])
def test_gradient_roles(adapter, capabilities, tables, roles, past):
    """dL/dwte = scatter(G_h + G_l @ wte, X) + G_l^T h; dL/dwpe = batch sum at positions. h is the
    implementation's own (its values are LOOKUP-EXACT's to judge): this checks the two roles."""
    from gpt2_conformance.runtime.hooks import skip_unless_claimed

    if past:
        skip_unless_claimed(capabilities, "kv_cache")
    rng = np.random.default_rng(10)
    ids = np.array([[3, 50256, 3, 17], [17, 0, 9, 3]])
    cot_h = rng.standard_normal(ids.shape + (D,), dtype=np.float32)
    cot_logits = rng.standard_normal(ids.shape + (gpt2.N_VOCAB,), dtype=np.float32) * np.float32(0.01)
    if roles == "gather":
        cot_logits[:] = 0
    else:
        cot_h[:] = 0
    h = as_array(adapter.embed(ids, past), describe_call("embed", ids, past)) if roles == "both" else None
    if h is not None and h.shape != ids.shape + (D,):
        h = None  # an h of another shape is SHAPE-H's to judge: the roles are checked with the formula's h
    _judge_gradients(adapter, tables, ids, past, cot_h, cot_logits, h, "h only" if roles == "gather" else "logits only")


NON_C_LAYOUTS = tuple(layout for layout in LAYOUTS if layout != "C")


@pytest.mark.clause("TIED-GRAD")
@pytest.mark.parametrize("layout", NON_C_LAYOUTS)
def test_gradient_cotangents_in_every_layout(adapter, tables, layout):
    """Both roles at once, with both cotangents in each memory layout callers pass (a slice of a
    larger gradient buffer, a transposed one, a reversed view): an implementation that hands the
    buffers to native code as if they were C-contiguous scrambles them."""
    rng = np.random.default_rng(11)
    ids = np.array([[3, 50256, 3, 17], [17, 0, 9, 3]])
    cot_h = in_layout(rng.standard_normal(ids.shape + (D,), dtype=np.float32), layout)
    cot_logits = rng.standard_normal(ids.shape + (gpt2.N_VOCAB,), dtype=np.float32) * np.float32(0.01)
    cot_logits = in_layout(cot_logits, layout)
    h = as_array(adapter.embed(ids, 0), describe_call("embed", ids, 0))
    if h.shape != ids.shape + (D,):
        h = None  # an h of another shape is SHAPE-H's to judge
    _judge_gradients(adapter, tables, ids, 0, cot_h, cot_logits, h, f"both, {layout}")


def _judge_gradients(adapter, tables, ids, past, cot_h, cot_logits, h, cotangents: str) -> None:
    """The adapter's gradients within the formula's bounds; the message names the role that is off."""
    wte, wpe = tables
    call = describe_call("gradients", ids, past, cotangents=cotangents)
    got_wte, got_wpe = (as_array(g, call) for g in adapter.gradients(ids, past, cot_h, cot_logits))
    if oracle.gradients_within(wte, wpe, ids, past, cot_h, cot_logits, got_wte, got_wpe, h=h):
        return  # within the bounds; the dense float64 oracle below is for the message only
    d_wte, d_wpe, b_wte, b_wpe = oracle.gradients(wte, wpe, ids, past, cot_h, cot_logits, h=h)
    head = bool(np.any(cot_logits))
    assert_within(got_wte, d_wte, b_wte, call, "dwte", rule="gather" + (" + projection" if head else "") + " role")
    assert_within(got_wpe, d_wpe, b_wpe, call, "dwpe", rule="batch sum at each position")


def _vocabulary_vectors(params: dict) -> dict:
    """The parameters shaped as one value per vocabulary entry ([V], [1, V], [1, 1, V]): an output
    bias, whatever its values (nn.Linear(bias=True) and TransformerLens' b_U start at zero)."""
    shapes = {name: tuple(int(n) for n in shape) for name, shape in params.items()}
    return {name: shape for name, shape in shapes.items() if tuple(n for n in shape if n != 1) == (gpt2.N_VOCAB,)}


@pytest.mark.clause("TIED-NO-BIAS")
def test_no_bias_parameter(adapter):
    """The head owns no bias parameter: a zero bias is still a trainable bias (the first optimizer
    step moves it), so its values at load time prove nothing. Asked of a loaded adapter (how many
    parameters an unloaded one has is SHAPE-PARAMS' question)."""
    params = adapter.parameters()
    found = _vocabulary_vectors(params)
    if found:
        listed = ", ".join(f"{name} {list(shape)}" for name, shape in found.items())
        raise AssertionError(
            f"parameters() holds {listed}: one value per token of the {gpt2.N_VOCAB}-token vocabulary "
            f"is an output bias, zero or not; the tied head is wte alone [parameters() at d={D}]"
        )


@pytest.mark.clause("TIED-NO-BIAS")
def test_no_output_bias(adapter):
    """logits(0) is exactly 0 (compared as values: the dtype they come back in is DTYPE-OUTPUT's)."""
    h = np.zeros((1, 2, D), np.float32)
    call = describe_call("logits", h_final="zeros[1, 2, 768]")
    assert_bitwise_equal(
        as_logits(adapter.logits(h), h, call),
        np.zeros((1, 2, gpt2.N_VOCAB), np.float64),
        call,
        "logits",
        note="no bias",
        converted=True,
    )
