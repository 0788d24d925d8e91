"""A real segmentation fault in an adapter costs exactly the clause whose test was running: that
clause FAILs with the reason (the signal named), the child process is restarted without the
finished tests, and every other clause still gets its own verdict (conformance/run/runner.py).

Three crashes: a ctypes read of address 0 in a plain parametrised test (TIED-STORAGE), the
same inside a hypothesis-driven test (BOUNDS-TOKEN draws the far id that triggers it), and
MLX's real unchecked gather on id 2**31 - 1 through the mlx-lm adapter."""

from __future__ import annotations

import importlib.util
import os
import signal
import subprocess
import sys

import pytest

from gpt2_conformance import results as res
from gpt2_conformance import spec
from gpt2_conformance.api import machine
from gpt2_conformance.run import runner
from helpers import crashing_adapters

pytestmark = pytest.mark.slow  # child processes that really crash

TESTS_DIR = os.path.dirname(__file__)
MLX_SPEC = "gpt2_conformance.backends.thirdparty.mlx_lm.adapter:MlxLmAdapter"


@pytest.fixture(autouse=True)
def _tests_on_child_path(monkeypatch):
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [TESTS_DIR, os.environ.get("PYTHONPATH")])))


def _by_clause(result):
    return {c.clause.id: c for c in result.clauses}


def _crashed_tests(clause):
    """Names of the clause's tests that failed because the child died of SIGSEGV."""
    return sorted(t.nodeid.split("::")[-1] for t in clause.tests if t.status == res.FAIL and "SIGSEGV" in t.message)


def _require_mlx():
    for module in ("mlx.core", "mlx_lm"):
        try:
            found = importlib.util.find_spec(module) is not None
        except ModuleNotFoundError:
            found = False
        if not found:
            pytest.skip(f"{module} is not installed (pip install -c constraints.txt 'mlx[cpu]' mlx-lm)")


def test_segfault_fails_its_clause_and_every_other_clause_gets_its_verdict():
    """The whole suite on the NumPy reference whose assign_wte_row segfaults."""
    result = runner.run_backend("SegfaultInAssignRow", adapter_spec="helpers.crashing_adapters:SegfaultInAssignRow")
    assert result.error == "", result.error
    clauses = _by_clause(result)
    assert set(clauses) == {c.id for c in spec.CLAUSES}
    storage = clauses["TIED-STORAGE"]
    assert storage.status == res.FAIL and "SIGSEGV" in storage.message, f"{storage.status}: {storage.message}"
    # the storage test (its rows drawn by hypothesis, spec 1.4) crashed in its child process
    assert _crashed_tests(storage) == ["test_head_shares_wte_storage"]
    writers = {"TIED-STORAGE", "STATE-UPDATES-SEEN", "STATE-NO-SIDE-EFFECTS"}  # every clause that writes a row
    for cid in writers:
        assert clauses[cid].status == res.FAIL and "SIGSEGV" in clauses[cid].message, cid
    others = {cid: (c.status, c.message) for cid, c in clauses.items() if cid not in writers}
    # the reference passes every clause it claims; it claims no bfloat16
    assert {cid: s for cid, (s, _) in others.items() if s != res.PASS} == {"DTYPE-BFLOAT16": res.NOT_CLAIMED}, others


def test_the_folders_a_dead_child_leaves_go_with_the_run(tmp_path, monkeypatch):
    """An adapter's temporary folder outlives a child that dies (no finalizer runs): each child's
    temporary directory is the run's own, and goes with it. The caches stay where they were."""
    record = tmp_path / "folders"
    monkeypatch.setenv(crashing_adapters.FOLDERS_RECORD, str(record))
    result = runner.run_backend(
        "LeavesItsFolderAndSegfaults",
        extra_args=["-k", "test_head_shares_wte_storage"],
        adapter_spec="helpers.crashing_adapters:LeavesItsFolderAndSegfaults",
    )
    assert result.error == "", result.error
    assert _crashed_tests(_by_clause(result)["TIED-STORAGE"]) == ["test_head_shares_wte_storage"]
    lines = [line.split() for line in record.read_text().splitlines()]
    assert len(lines) >= 1, f"lines={lines}, but should be one per crashed child at least"
    left = [folder for folder, _ in lines if os.path.exists(folder)]
    assert left == [], f"left={left}, but should be [] (the run's children's folders, after the run)"
    roots = {root for _, root in lines}
    assert roots == {machine.private_cache_root()}, f"the children's cache roots={roots}, but should be this process's"


def test_segfault_inside_a_hypothesis_test_fails_the_clause_that_drew_the_input():
    """The crash lands mid-way through BOUNDS-TOKEN's hypothesis runs (the first drawn id
    >= 2**24 in magnitude): that clause FAILs, not a neighbour, and the tests after it run."""
    subset = [
        "-k",
        "bad_token_id or too_long_raises or error_names_value or test_empty_sequence or test_no_output_bias",
    ]
    result = runner.run_backend(
        "SegfaultOnFarIds", adapter_spec="helpers.crashing_adapters:SegfaultOnFarIds", extra_args=subset
    )
    assert result.error == "", result.error
    clauses = _by_clause(result)
    token = clauses["BOUNDS-TOKEN"]
    assert token.status == res.FAIL, f"{token.status}: {token.message}"
    assert _crashed_tests(token) == ["test_bad_token_id_raises_int32", "test_bad_token_id_raises_int64"]
    # the neighbours in test_bounds.py (before and after it) and other modules keep their verdicts
    for cid in ("BOUNDS-POSITION", "BOUNDS-MESSAGE", "SHAPE-EMPTY", "TIED-NO-BIAS"):
        assert clauses[cid].status == res.PASS, f"{cid}: {clauses[cid].status}: {clauses[cid].message}"


def test_a_poisoned_device_context_costs_only_the_clause_that_poisoned_it():
    """An adapter that, like torch on CUDA without a host check, fails every call after a bad
    id (a device-side assert poisons the context): the child ends itself after that test and the
    rest run in a fresh process, so the clauses that send no bad id still pass (the GPU run's
    hf-transformers case, simulated on the CPU)."""
    subset = [
        "-k",
        "test_bad_token_id_raises_int64 or test_error_names_value_and_rule or test_exact_sum "
        "or test_no_output_bias or test_last_position_valid",
    ]
    result = runner.run_backend(
        "PoisonsItsDeviceOnBadIds", extra_args=subset, adapter_spec="helpers.crashing_adapters:PoisonsItsDeviceOnBadIds"
    )
    assert result.error == "", result.error
    clauses = _by_clause(result)
    for cid in ("BOUNDS-TOKEN", "BOUNDS-MESSAGE"):  # they raise RuntimeError, and the probe after it fails
        assert clauses[cid].status == res.FAIL and "device-side assert" in clauses[cid].message, cid
    for cid in ("LOOKUP-EXACT", "TIED-NO-BIAS", "BOUNDS-LAST-POSITION"):  # after the poisoning, in new processes
        assert clauses[cid].status == res.PASS, f"{cid}: {clauses[cid].status}: {clauses[cid].message}"


def test_mlx_gather_on_id_2_31_minus_1_is_a_real_segfault():
    """What the mlx-lm waivers rely on, measured directly: nn.Embedding (wte in mlx-lm's GPT-2)
    looking up id 2**31 - 1 kills the process with SIGSEGV instead of raising."""
    _require_mlx()
    code = (
        "import mlx.core as mx, mlx.nn as nn\n"
        "e = nn.Embedding(50257, 8)\n"
        "mx.eval(e(mx.array([[2**31 - 1]])))\n"
        "print('returned')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == -signal.SIGSEGV, (
        f"returncode={out.returncode}, but should be {-signal.SIGSEGV} "
        f"(SIGSEGV) [{out.stdout.strip()} {out.stderr.strip()[-300:]}]"
    )


def test_mlx_lm_segfault_is_a_fail_of_bounds_token_and_the_run_goes_on():
    """mlx-lm's GPT-2 as it is (no waivers applied here): the suite's far ids crash MLX's
    gather inside BOUNDS-TOKEN's hypothesis tests; that clause FAILs naming SIGSEGV and the
    clauses around it still get their verdicts."""
    _require_mlx()
    subset = ["-k", "bad_token_id or test_empty_sequence or test_no_output_bias or test_last_position_valid"]
    result = runner.run_backend("mlx-lm", adapter_spec=MLX_SPEC, extra_args=subset)
    assert result.error == "", result.error
    clauses = _by_clause(result)
    token = clauses["BOUNDS-TOKEN"]
    assert token.status == res.FAIL and "SIGSEGV" in token.message, f"{token.status}: {token.message}"
    assert _crashed_tests(token) == ["test_bad_token_id_raises_int32", "test_bad_token_id_raises_int64"]
    for cid in ("SHAPE-EMPTY", "TIED-NO-BIAS", "BOUNDS-LAST-POSITION"):
        assert clauses[cid].status == res.PASS, f"{cid}: {clauses[cid].status}: {clauses[cid].message}"
