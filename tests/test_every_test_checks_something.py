"""Every test can fail: each test function in tests/ (and each clause test of the suite) asserts
something, expects an exception, or calls a function of this project that does. A test that
only runs code passes whatever the code does; this finds one before a reviewer has to."""

from __future__ import annotations

import ast
import pathlib

ROOT = pathlib.Path(__file__).resolve().parent.parent
FOLDERS = (ROOT / "tests", ROOT / "conformance")
CHECKS = {"raises", "fail", "warns", "deprecated_call", "xfail"}  # pytest.<these> judge too


def _functions() -> dict[str, list[tuple[pathlib.Path, ast.FunctionDef]]]:
    out: dict[str, list] = {}
    for folder in FOLDERS:
        for path in folder.rglob("*.py"):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            for node in ast.walk(tree):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    out.setdefault(node.name, []).append((path, node))
    return out


def _called(node) -> set[str]:
    names = set()
    for sub in ast.walk(node):
        if isinstance(sub, ast.Call):
            f = sub.func
            names.add(f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else "")
    return names


def _judges_itself(node) -> bool:
    for sub in ast.walk(node):
        if isinstance(sub, ast.Assert):
            return True
        if isinstance(sub, ast.Raise) and sub.exc is not None:
            text = ast.unparse(sub.exc)
            if "AssertionError" in text or "Failed" in text:
                return True
        if isinstance(sub, ast.Call) and isinstance(sub.func, ast.Attribute):
            if sub.func.attr in CHECKS:
                return True
            # numpy.testing.assert_allclose and its kin raise AssertionError on a mismatch
            if sub.func.attr.startswith("assert_") and ast.unparse(sub.func.value).endswith("testing"):
                return True
    return False


def _judging(functions) -> set[str]:
    """Names of the functions that assert, directly or through a function of ours they call."""
    judging = {name for name, defs in functions.items() if any(_judges_itself(n) for _, n in defs)}
    calls = {name: set().union(*(_called(n) for _, n in defs)) for name, defs in functions.items()}
    changed = True
    while changed:
        changed = False
        for name, callees in calls.items():
            if name not in judging and callees & judging:
                judging.add(name)
                changed = True
    return judging


def test_every_test_can_fail():
    functions = _functions()
    judging = _judging(functions)
    idle = sorted(
        f"{path.relative_to(ROOT)}:{node.lineno} {name}"
        for name, defs in functions.items()
        if name.startswith("test_") and name not in judging
        for path, node in defs
        if path.name.startswith("test_")
    )
    assert idle == [], "tests that assert nothing and expect no exception"


def test_the_check_finds_a_test_that_asserts_nothing():
    tree = ast.parse(
        "def test_idle():\n    x = 1 + 1\n\ndef test_ok():\n    assert 1\n\n"
        "def helper():\n    assert 2\n\ndef test_via_helper():\n    helper()\n\n"
        "def test_close():\n    np.testing.assert_allclose(1, 1)\n\n"
        "def test_not_a_check():\n    np.assert_allclose(1, 1)\n"
    )
    functions = {n.name: [(ROOT / "tests" / "test_x.py", n)] for n in tree.body}
    assert _judging(functions) == {"test_ok", "helper", "test_via_helper", "test_close"}
