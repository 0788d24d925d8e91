"""The spec registry, SPEC.md and the suite agree: every clause has tests, every test names a
known clause, every requirement is a real capability."""

import importlib
import inspect
import pathlib

import pytest

from gpt2_conformance import spec
from gpt2_conformance.api.adapter import Capabilities

SUITE_MODULES = ["shape", "lookup", "positions", "bounds", "init", "tied", "dtype", "golden", "state"]


def _suite_tests():
    for name in SUITE_MODULES:
        module = importlib.import_module(f"gpt2_conformance.suite.test_{name}")
        for fn_name, fn in inspect.getmembers(module, inspect.isfunction):
            if fn_name.startswith("test_"):
                marks = [m for m in getattr(fn, "pytestmark", []) if m.name == "clause"]
                yield f"test_{name}.{fn_name}", marks


def test_spec_md_is_generated_from_registry():
    path = pathlib.Path(spec.__file__).with_name("SPEC.md")
    assert path.read_text() == spec.markdown() + "\n", (
        "SPEC.md is stale: run `gpt2-conformance spec > conformance/SPEC.md`"
    )


def test_every_suite_test_names_one_known_clause():
    for name, marks in _suite_tests():
        assert len(marks) == 1, f"{name} has {len(marks)} clause markers, but should have 1"
        assert marks[0].args[0] in spec.BY_ID, f"{name} names unknown clause {marks[0].args[0]!r}"


def test_every_clause_has_a_test():
    covered = {marks[0].args[0] for _, marks in _suite_tests() if marks}
    assert set(spec.BY_ID) - covered == set(), "clauses without a test"


@pytest.mark.parametrize("clause", spec.CLAUSES, ids=lambda c: c.id)
def test_requirements_are_capabilities(clause):
    for requirement in clause.requires:  # claims() raises KeyError on an unknown name
        assert isinstance(Capabilities().claims(requirement), bool), requirement


def test_clause_ids_are_stable_format():
    for c in spec.CLAUSES:
        assert c.id == c.id.upper() and c.id.startswith(c.group), c.id
        assert c.text and c.source and c.title, c.id


def test_unknown_clause_is_an_error():
    with pytest.raises(KeyError, match="NOPE"):
        spec.clause("NOPE")
