"""`gpt2-conformance constraints`: prints the pinned constraints file the package ships, which is
the repository's constraints.txt itself (conformance/constraints.txt links to it, and the wheel
carries it as package data), and runs as `python -m gpt2_conformance.run.constraints_command`
where none of the suite's dependencies is installed yet (the CI example's first install step).
The wheel's copy is checked by tests/test_ci_example.py, which installs the built wheel."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib

from gpt2_conformance import cli
from gpt2_conformance.run import constraints_command

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CONSTRAINTS = os.path.join(ROOT, "constraints.txt")


def _top_level() -> str:
    with open(CONSTRAINTS, encoding="utf-8") as f:
        return f.read()


def test_prints_the_repositorys_constraints(capsys):
    assert cli.main(["constraints"]) == 0
    out = capsys.readouterr().out
    assert out == _top_level() and "\ntorch==" in out


def test_one_source_of_truth():
    """The packaged file is a link to the top-level one, not a copy that could drift."""
    packaged = os.path.join(ROOT, "conformance", "constraints.txt")
    assert os.path.islink(packaged) and os.readlink(packaged) == os.path.join("..", "constraints.txt")
    assert os.path.samefile(packaged, CONSTRAINTS)
    with open(os.path.join(ROOT, "pyproject.toml"), "rb") as f:
        package_data = tomllib.load(f)["tool"]["setuptools"]["package-data"]["gpt2_conformance"]
    assert constraints_command.RESOURCE in package_data


BLOCK_DEPENDENCIES = """
import importlib.abc, runpy, sys

class NotInstalled(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in {"numpy", "pytest", "hypothesis", "pytest_benchmark", "pytest_timeout"}:
            raise ModuleNotFoundError(f"No module named {name!r}")

sys.meta_path.insert(0, NotInstalled())
runpy.run_module("gpt2_conformance.run.constraints_command", run_name="__main__", alter_sys=True)
"""


def test_runs_without_the_suites_dependencies():
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run(
        [sys.executable, "-c", BLOCK_DEPENDENCIES],
        cwd=os.path.dirname(ROOT),
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout == _top_level()
