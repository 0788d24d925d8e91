"""Blame where it belongs: an adapter whose answers come back malformed (another rank or width,
a list, None, a scalar, float64) gets FAIL lines naming the call, and the suite never reports its
own ERROR for them; one whose answers are unusual but allowed (Fortran order, read-only) passes
what the reference passes. Each adapter is the NumPy reference with one change to every array it
returns (tests/helpers/malformed_returns.py), judged as `run --adapter` judges it and, for one of
them, on the pytest route."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from gpt2_conformance.run import runner
from helpers import malformed_returns

TESTS_DIR = os.path.dirname(__file__)
pytestmark = pytest.mark.slow  # one whole suite run per adapter


def _judged(name: str, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [TESTS_DIR, os.environ.get("PYTHONPATH")])))
    spec = f"helpers.malformed_returns:{name}"
    return runner.run_backend(spec, adapter_spec=spec, extra_args=("--gpt2c-no-shrink",))


@pytest.mark.parametrize("adapter", malformed_returns.MALFORMED, ids=lambda a: a.__name__)
def test_malformed_answers_are_the_implementations_fail(adapter, monkeypatch):
    result = _judged(adapter.__name__, monkeypatch)
    assert result.error == ""
    errors = [(c.clause.id, c.message) for c in result.clauses if c.status == "ERROR"]
    assert errors == [], errors
    failed = [c for c in result.clauses if c.status == "FAIL"]
    assert failed, f"{adapter.__name__} passed every clause"
    for clause in failed:
        for test in clause.tests:
            if test.status == "FAIL":  # one line that ends with the call, as every FAIL does
                assert test.message.endswith("]") and " [" in test.message, (test.nodeid, test.message)
                assert "\n" not in test.message


def test_the_message_names_the_call_and_the_expected_shape(monkeypatch):
    """issue 67's own case: embed returns [B, d], not [B, T, d]."""
    result = _judged("WrongRank", monkeypatch)
    messages = {c.clause.id: c.message for c in result.clauses}
    assert "but should be (1, 5, 768)" in messages["GOLDEN-DECODE"] or "(1, 3, 768)" in messages["GOLDEN-DECODE"], (
        messages["GOLDEN-DECODE"]
    )
    assert "h.shape=(" in messages["GOLDEN-H"] and "but should be (1, " in messages["GOLDEN-H"], messages["GOLDEN-H"]


@pytest.mark.parametrize("adapter", malformed_returns.ALLOWED, ids=lambda a: a.__name__)
def test_allowed_answers_pass_what_the_reference_passes(adapter, monkeypatch):
    result = _judged(adapter.__name__, monkeypatch)
    assert result.error == ""
    assert result.failed() == [] and result.errors() == [], [
        (c.clause.id, c.message) for c in result.clauses if c.status in ("FAIL", "ERROR")
    ]


def test_the_pytest_route_blames_the_implementation_too(tmp_path):
    """The same verdict where the suite runs inside the user's own pytest: failures, no errors."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [TESTS_DIR, os.environ.get("PYTHONPATH")])))
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "--pyargs", "gpt2_conformance.suite", "-q", "-p", "no:cacheprovider"]
        + ["--gpt2c-adapter", "helpers.malformed_returns:WrongRank", "--gpt2c-no-shrink", "-k", "golden or shape"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=600,
    )
    summary = out.stdout.strip().splitlines()[-1]
    assert out.returncode == 1 and " failed" in summary and "error" not in summary, out.stdout[-3000:]
