"""The PyTorch backend: the whole suite passes on TorchAdapter (one suite run, about 15 s on
a 2-core CPU box), and the model and adapter checked directly (seconds).

The torch mutants (torch's raw ops used the wrong way) are in tests/helpers/mutants_torch.py;
tests/test_kill_matrix.py (the slow tier) checks the exact clauses each fails.
"""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from gpt2_conformance import spec  # noqa: E402
from gpt2_conformance.backends.torch.adapter import TorchAdapter  # noqa: E402
from gpt2_conformance.backends.torch.model import GPT2Embedding  # noqa: E402
from gpt2_conformance.results import NOT_CLAIMED, PASS  # noqa: E402
from gpt2_conformance.run.runner import run_in_process  # noqa: E402


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
