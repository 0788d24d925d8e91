"""The specificity half of the kill matrix: correct implementations that owe nothing to this
suite (tests/helpers/independent/: torch nn.Embedding with a tied nn.Linear, torch nn.Parameter
tables indexed directly, Keras 3 Embedding layers, Flax nn.Embed with attend, TensorFlow variables
with tf.gather as openai/gpt-2 writes it, plain numpy) pass every clause they claim, on both
routes. A spec change that fails one of them measures the suite's habits, not GPT-2: it does not
land."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys

import pytest

from gpt2_conformance import spec
from gpt2_conformance.run import runner
from helpers.independent import IMPLEMENTATIONS

TESTS_DIR = os.path.dirname(__file__)
pytestmark = pytest.mark.slow  # one whole suite run per implementation


def _env() -> dict:
    return dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [TESTS_DIR, os.environ.get("PYTHONPATH")])))


def _needs(framework: str) -> None:
    if importlib.util.find_spec(framework) is None:
        pytest.skip(f"{framework} is not installed")


def test_the_set_spans_the_frameworks_and_owes_nothing_to_the_suite():
    """At least six, on torch, Keras, Flax, TensorFlow and numpy; none imports the suite's input
    checks (api/validation.py) or its reference."""
    assert len(IMPLEMENTATIONS) >= 6
    assert {"torch", "keras", "flax", "tensorflow", "numpy"} <= {framework for framework, _ in IMPLEMENTATIONS.values()}
    for _, target in IMPLEMENTATIONS.values():
        path = os.path.join(TESTS_DIR, *target.partition(":")[0].split(".")) + ".py"
        with open(path) as f:
            source = f.read()
        for borrowed in ("gpt2_conformance.api.validation", "gpt2_conformance.backends", "gpt2_conformance.api.gpt2"):
            assert borrowed not in source, f"{path} uses {borrowed}"


@pytest.mark.parametrize("name", list(IMPLEMENTATIONS))
def test_passes_every_claimed_clause(name, monkeypatch):
    framework, target = IMPLEMENTATIONS[name]
    _needs(framework)
    monkeypatch.setenv("PYTHONPATH", _env()["PYTHONPATH"])
    result = runner.run_backend(target, adapter_spec=target)
    assert result.error == ""
    assert result.failed() == [] and result.errors() == [], [
        (c.clause.id, c.message) for c in result.clauses if c.status in ("FAIL", "ERROR")
    ]
    judged = {c.clause.id for c in result.clauses if c.status == "PASS"}
    assert {"LOOKUP-EXACT", "BOUNDS-MESSAGE", "BOUNDS-TOKEN", "TIED-LOGITS"} <= judged, judged
    assert len(judged) + sum(c.status == "NOT CLAIMED" for c in result.clauses) == len(spec.CLAUSES)


def test_the_pytest_route_passes_them_too(tmp_path):
    """The same verdict where the suite runs inside a user's own pytest (the torch module: the
    shape most ports have)."""
    _needs("torch")
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "--pyargs", "gpt2_conformance.suite", "-q", "-p", "no:cacheprovider"]
        + ["--gpt2c-adapter", IMPLEMENTATIONS["torch-embedding"][1]],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=_env(),
        timeout=900,
    )
    summary = out.stdout.strip().splitlines()[-1]
    assert out.returncode == 0 and " passed" in summary and "failed" not in summary, out.stdout[-3000:]
