"""The PyTorch backend: the whole suite passes on TorchAdapter, and variants that use torch's
raw ops the wrong way fail exactly the clauses they break.

Each run_in_process is one full suite run (about 15 s on a 2-core CPU box), once for the
real adapter and once per mutant: about 75 s for the module. The tests at the end check the
model and adapter directly and take seconds.
"""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
nn = torch.nn
F = torch.nn.functional

from gpt2_conformance import spec  # noqa: E402
from gpt2_conformance.results import NOT_CLAIMED, PASS  # noqa: E402
from gpt2_conformance.run.runner import run_in_process  # noqa: E402
from gpt2_conformance.api.validation import check_ids_layout, check_past_length  # noqa: E402

from gpt2_conformance.backends.torch.adapter import TorchAdapter, from_numpy  # noqa: E402
from gpt2_conformance.backends.torch.model import GPT2Embedding  # noqa: E402


# -- helpers.mutants: torch's raw ops used the wrong way -----------------------------------------

def _raw_input_checks(ids, past_length):
    """The layout and past_length checks only: the mutants below drop just the bounds."""
    check_ids_layout(tuple(ids.shape), str(ids.dtype).removeprefix("torch."),
                     not (ids.dtype.is_floating_point or ids.dtype == torch.bool))
    return check_past_length(past_length)


class _EmbeddingNoBoundsCheck(GPT2Embedding):
    """nn.Embedding trusted to reject bad indices: on CPU it does raise, but
    IndexError("index out of range in self") names neither the value nor the table size."""

    def forward(self, ids, past_length=0):
        past_length = _raw_input_checks(ids, past_length)
        positions = torch.arange(past_length, past_length + ids.shape[1], device=ids.device)
        return self.wte(ids) + self.wpe(positions)


class _TensorIndexingNoBoundsCheck(GPT2Embedding):
    """weight[ids] and a wpe slice: indexing wraps negative ids (-1 reads row 50256) and a
    slice past the table end silently comes back short."""

    def forward(self, ids, past_length=0):
        past_length = _raw_input_checks(ids, past_length)
        return self.wte.weight[ids] + self.wpe.weight[past_length : past_length + ids.shape[1]]


class _UntiedHead(GPT2Embedding):
    """An nn.Linear head whose weight is a copy of wte: a second [V, d] parameter."""

    def __init__(self, n_embd, *, device=None, dtype=None):  # skip_init needs `device` spelled out
        super().__init__(n_embd, device=device, dtype=dtype)
        self.lm_head = nn.Linear(n_embd, self.n_vocab, bias=False,
                                 device=self.wte.weight.device, dtype=self.wte.weight.dtype)

    def head(self, h):
        weight = self.lm_head.weight
        return F.linear(h.to(torch.float32), weight.to(torch.float32)).to(weight.dtype)


class _ScaleGradByFreq(GPT2Embedding):
    """nn.Embedding(scale_grad_by_freq=True): a token's gradient is divided by how often it
    occurs in the batch, so a repeated token's rows get too little."""

    def __init__(self, n_embd, *, device=None, dtype=None):  # skip_init needs `device` spelled out
        super().__init__(n_embd, device=device, dtype=dtype)
        self.wte.scale_grad_by_freq = True


def _adapter_with(model_class, name, **extra):
    return type(name, (TorchAdapter,), {"model_class": model_class, **extra})


def _load_untied(self, wte, wpe):
    """As a checkpoint converter that fills lm_head.weight from the same wte array would."""
    self.model.load_state_dict({"wte.weight": from_numpy(wte), "wpe.weight": from_numpy(wpe),
                                "lm_head.weight": from_numpy(wte)})


MUTANTS = {
    "embedding_no_bounds_check": _adapter_with(_EmbeddingNoBoundsCheck, "EmbeddingNoBoundsCheck"),
    "indexing_no_bounds_check": _adapter_with(_TensorIndexingNoBoundsCheck, "IndexingNoBoundsCheck"),
    "untied_head_copy": _adapter_with(_UntiedHead, "UntiedHeadCopy", load_tables=_load_untied),
    "scale_grad_by_freq": _adapter_with(_ScaleGradByFreq, "ScaleGradByFreq"),
}

# The exact clause set each mutant fails, found by running the suite once per mutant and
# explained clause by clause:
EXPECTED_FAILURES = {
    # nn.Embedding on CPU raises for ids < 0 or >= 50257 and for positions >= 1024 (so
    # BOUNDS-TOKEN and BOUNDS-POSITION pass: any exception counts, and the adapter works
    # afterwards), but its IndexError("index out of range in self") names neither the
    # value nor the table size. (On CUDA the same gather is a device-side assert instead.)
    "embedding_no_bounds_check": {"BOUNDS-MESSAGE"},
    # tensor indexing wraps: ids -1 .. -50257 read rows 50256 .. 0 and return a value
    # (BOUNDS-TOKEN); wpe[past:past + T] past the end comes back short and broadcasts,
    # so T = 1 at past_length 1024 returns an empty [B, 0, d] (BOUNDS-POSITION); T = 1025
    # raises RuntimeError (size mismatch), not IndexError/ValueError, and -1 does not
    # raise at all (BOUNDS-MESSAGE).
    "indexing_no_bounds_check": {"BOUNDS-TOKEN", "BOUNDS-POSITION", "BOUNDS-MESSAGE"},
    # a third parameter of [V, d] (SHAPE-PARAMS); assign_wte_row does not reach the copy
    # (TIED-STORAGE); the projection role's gradient goes to lm_head, not wte (TIED-GRAD,
    # "both"; the "gather" case has zero logit cotangents and passes). The copy is taken
    # from the same array at load time, so TIED-LOGITS, TIED-NO-BIAS and DTYPE still pass.
    "untied_head_copy": {"SHAPE-PARAMS", "TIED-STORAGE", "TIED-GRAD"},
    # the forward is untouched; ids [[3, 50256, 3, 17], [17, 0, 9, 3]] repeat 3 (x3) and
    # 17 (x2), whose gather-role rows are divided by their counts (TIED-GRAD).
    "scale_grad_by_freq": {"TIED-GRAD"},
}


@pytest.fixture(scope="module")
def suite_result():
    return run_in_process(TorchAdapter, "torch")


def test_suite_passes(suite_result):
    assert suite_result.error == ""
    assert suite_result.failed() == []
    claimed = {c.clause.id for c in suite_result.clauses if c.status != NOT_CLAIMED}
    assert claimed == {c.id for c in spec.CLAUSES}, "TorchAdapter claims every clause on CPU"
    not_passed = {c.clause.id: c.status for c in suite_result.clauses if c.status != PASS}
    assert not_passed == {}


@pytest.mark.slow  # one whole suite run per framework mutant
@pytest.mark.parametrize("name", list(MUTANTS))
def test_mutant_fails_exactly(name):
    result = run_in_process(MUTANTS[name], name)
    assert result.error == ""
    messages = {c.clause.id: c.message for c in result.clauses if c.status == "FAIL"}
    assert set(messages) == EXPECTED_FAILURES[name], messages


@pytest.mark.skipif(not torch.cuda.is_available(), reason="torch sees no GPU on this machine")
def test_suite_passes_on_gpu():
    result = run_in_process(TorchAdapter, "torch", device="gpu")
    assert result.error == "" and result.failed() == []
    assert all(c.status == PASS for c in result.clauses)


# -- the model and adapter directly (fast) -------------------------------------------------

@pytest.fixture(scope="module")
def model():
    return GPT2Embedding(8, generator=torch.Generator().manual_seed(0)).eval()


@pytest.mark.parametrize("bad", [-1, 50257, -(2**63), 2**31 - 1])
def test_token_error_names_value_place_and_size(model, bad):
    ids = torch.tensor([[5, 6], [7, bad]])
    with pytest.raises(IndexError, match=rf"token id {bad} at ids\[1, 1\] is outside the wte table \[0, 50257\)"):
        model(ids)


def test_position_error_names_value_and_size(model):
    with pytest.raises(IndexError, match=r"position 1024 is outside the wpe table \[0, 1024\)"):
        model(torch.zeros((1, 2), dtype=torch.int64), 1023)


def test_head_is_wte_itself(model):
    """F.linear reads the Parameter: an in-place write shows up in the next logits, and the
    module holds exactly two parameters."""
    assert [n for n, _ in model.named_parameters()] == ["wte.weight", "wpe.weight"]
    h = torch.arange(8.0).reshape(1, 1, 8)  # small integers: every sum order is exact
    with torch.no_grad():
        saved = model.wte.weight[7].clone()
        model.wte.weight[7] = 1.0
        try:
            assert torch.equal(model.head(h)[0, 0, 7], h.sum())
        finally:
            model.wte.weight[7] = saved


def test_ids_dtypes():
    adapter = TorchAdapter()
    adapter.load_tables(np.ones((50257, 768), np.float32), np.zeros((1024, 768), np.float32))
    base = adapter.embed(np.array([[1, 2]], np.int64))
    for dtype in (np.int32, np.uint8, np.uint16, np.dtype(">i4")):
        assert np.array_equal(adapter.embed(np.array([[1, 2]], dtype)), base)
    with pytest.raises(TypeError):
        adapter.embed(np.array([[1, 2]], np.uint64))  # could wrap into int64: refused
    with pytest.raises(TypeError, match="integer"):
        adapter.embed(np.array([[1.0, 2.0]]))


@pytest.mark.parametrize("dtype,numpy_dtype", [("float16", np.float16), ("bfloat16", np.float32)])
def test_reduced_precision_outputs(dtype, numpy_dtype):
    from gpt2_conformance.api.adapter import AdapterConfig

    adapter = TorchAdapter(AdapterConfig(dtype=dtype))
    wte = np.full((50257, 768), 1 + 2**-12, np.float32)  # rounds to 1.0 in both dtypes
    adapter.load_tables(wte, np.zeros((1024, 768), np.float32))
    assert adapter.tables()[0].dtype == numpy_dtype and adapter.tables()[0][0, 0] == 1.0
    h = adapter.embed(np.array([[3]]))
    assert h.dtype == numpy_dtype and h[0, 0, 0] == 1.0
    assert adapter.logits(np.ones((1, 1, 768), numpy_dtype)).dtype == numpy_dtype


def test_gpu_availability_follows_torch():
    available, why = TorchAdapter.device_available("gpu")
    assert available == torch.cuda.is_available()
    assert available or "no GPU" in why
    assert TorchAdapter.device_available("cpu") == (True, "")
