"""The suite never calls what an adapter did not claim, shown mechanically: the whole suite on
the NumPy reference made strict (tests/helpers/strict_adapters.py), once per capability switched off
and for a picoGPT-like combination. A correct implementation that claims less passes or is NOT
CLAIMED everywhere, never FAIL or ERROR; every clause that needs what is missing is NOT
CLAIMED; and the strict adapter's log of calls outside its claims stays empty."""

import numpy as np
import pytest

from gpt2_conformance import results as res
from gpt2_conformance import spec
from gpt2_conformance.api.adapter import Capabilities
from gpt2_conformance.backends.numpy.adapter import NumpyAdapter
from gpt2_conformance.run.runner import run_in_process
from gpt2_conformance.runtime.guard import GuardedAdapter, GuardedFactory, SuiteError
from helpers import strict_adapters

pytestmark = pytest.mark.slow  # one whole suite run per capability switched off


@pytest.mark.parametrize("adapter", strict_adapters.ALL, ids=lambda a: a.__name__)
def test_suite_never_calls_what_is_not_claimed(adapter):
    strict_adapters.VIOLATIONS.clear()
    result = run_in_process(adapter, adapter.__name__)
    assert result.error == ""
    assert strict_adapters.VIOLATIONS == []
    statuses = {c.clause.id: c for c in result.clauses}
    judged = {cid: f"{c.status}: {c.message}" for cid, c in statuses.items() if c.status in (res.FAIL, res.ERROR)}
    assert judged == {}, f"{adapter.__name__}: a correct implementation that claims less was judged"
    caps = adapter.capabilities
    for clause in spec.CLAUSES:
        if not all(caps.claims(r) for r in clause.requires):
            assert statuses[clause.id].status == res.NOT_CLAIMED, clause.id
    if caps.devices and caps.claims("size:768") and caps.claims("dtype:float32"):
        assert result.by_status()[res.PASS] >= 20  # the rest of the suite ran


def test_no_cache_adapter_runs_the_past_length_0_cases_of_mixed_clauses():
    """Clauses whose cases need an offset only in part pass on their past_length = 0 cases and
    show the offset cases as not claimed."""
    result = run_in_process(strict_adapters.NoCache, "NoCache")
    by_id = {c.clause.id: c for c in result.clauses}
    for clause_id in (
        "SHAPE-H",
        "LOOKUP-BATCH-INDEPENDENT",
        "BOUNDS-LAST-POSITION",
        "BOUNDS-POSITION",
        "TIED-GRAD",
        "DTYPE-FLOAT16",
        "GOLDEN-WPE-ROWS",
        "GOLDEN-H",
    ):
        c = by_id[clause_id]
        statuses = {t.status for t in c.tests}
        assert c.status == res.PASS and statuses == {res.PASS, res.NOT_CLAIMED}, (clause_id, statuses)
        assert "not claimed: kv_cache" in c.message
    for clause_id in (
        "POSITIONS-OFFSET",
        "POSITIONS-DECODE",
        "POSITIONS-CHUNKED",
        "POSITIONS-BATCH-SHARED",
        "BOUNDS-PAST-LENGTH",
        "GOLDEN-DECODE",
    ):
        assert by_id[clause_id].status == res.NOT_CLAIMED, clause_id


def test_guard_refuses_calls_outside_the_claims():
    caps = Capabilities(
        kv_cache=False,
        tied_head=False,
        init=False,
        gradients=False,
        mutable_tables=False,
        sizes=(768,),
        dtypes=("float32",),
    )
    guarded = GuardedAdapter(NumpyAdapter(), caps)
    ids = np.zeros((1, 2), np.int64)
    assert guarded.embed(ids, 0).shape == (1, 2, 768)
    assert guarded.embed(ids, np.int64(0)).shape == (1, 2, 768)  # 0 in any valid form needs no cache
    for call, needs in [
        (lambda: guarded.embed(ids, 1), "kv_cache"),
        (lambda: guarded.embed(ids, True), "kv_cache"),
        (lambda: guarded.logits(np.zeros((1, 1, 768), np.float32)), "tied_head"),
        (lambda: guarded.init_tables(0), "init"),
        (lambda: guarded.assign_wte_row(0, np.zeros(768, np.float32)), "mutable_tables"),
        (lambda: guarded.gradients(ids, 0, None, np.zeros(1)), "gradients"),
    ]:
        with pytest.raises(SuiteError, match=needs):
            call()
    factory = GuardedFactory(NumpyAdapter, caps)
    from gpt2_conformance.api.adapter import AdapterConfig

    for config, needs in [
        (AdapterConfig(n_embd=1024), "size:1024"),
        (AdapterConfig(dtype="float16"), "dtype:float16"),
        (AdapterConfig(device="gpu"), "device:gpu"),
    ]:
        with pytest.raises(SuiteError, match=needs):
            factory(config)


def test_guard_marks_the_adapters_own_exceptions():
    from gpt2_conformance.runtime.guard import raised_by_adapter

    guarded = GuardedAdapter(NumpyAdapter(), NumpyAdapter.capabilities)
    with pytest.raises(IndexError) as info:
        guarded.embed(np.array([[50257]]), 0)
    assert raised_by_adapter(info.value) == "embed"
    assert raised_by_adapter(ValueError("the suite's own")) is None
