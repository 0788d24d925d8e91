"""The suite as users install it: the wheel built from this repository, installed into a fresh
venv and run from a directory with no repository on the path. It must be complete (the golden
data ships inside it, so GOLDEN passes for numpy) and the pytest entry point must work with a
user's own adapter. With the golden data made unreachable, the GOLDEN rows are the suite's
ERROR (exit code 4), never a FAIL of the implementation.

Slow (a venv and a dependency install, about 1-3 minutes); CI runs it, so the wheel cannot
silently lose its data again."""

import json
import os
import pathlib
import shutil
import subprocess
import sys

import pytest

from helpers.wheel import build_wheel

ROOT = pathlib.Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.slow  # builds the wheel and installs it in a fresh venv

USER_ADAPTER = """
import numpy as np
from gpt2_conformance.api.adapter import Adapter, Capabilities
from gpt2_conformance.api.validation import check_embed_inputs


class MyAdapter(Adapter):
    capabilities = Capabilities(init=False, mutable_tables=False)

    def load_tables(self, wte, wpe):
        self.wte, self.wpe = wte.copy(), wpe.copy()

    def tables(self):
        return self.wte.copy(), self.wpe.copy()

    def parameters(self):
        d = self.config.n_embd
        return {"wte": (50257, d), "wpe": (1024, d)}

    def embed(self, ids, past_length=0):
        ids, past_length = check_embed_inputs(ids, past_length)
        return self.wte[ids] + self.wpe[past_length : past_length + ids.shape[1]]

    def logits(self, h_final):
        return h_final @ self.wte.T
"""


def _run(cmd, cwd, env=None, timeout=900):
    out = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    return out.returncode, out.stdout + out.stderr


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
    """(venv python, a work directory outside the repository, a clean environment)."""
    tmp = tmp_path_factory.mktemp("wheel")
    wheel = build_wheel(tmp)
    code, out = _run([sys.executable, "-m", "venv", str(tmp / "venv")], tmp)
    assert code == 0, out
    python = str(tmp / "venv" / "bin" / "python")
    code, out = _run([python, "-m", "pip", "install", "-q", "-c", str(ROOT / "constraints.txt"), str(wheel)], tmp)
    assert code == 0, out
    work = tmp / "work"
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "GPT2C_FIXTURES", "VIRTUAL_ENV")}
    return python, work, env


def test_wheel_carries_the_golden_data(installed):
    python, work, env = installed
    code, out = _run(
        [
            python,
            "-c",
            "import gpt2_conformance as g, gpt2_conformance.backends as b, "
            "gpt2_conformance.golden.data as d; print(d.fixtures_dir()); print(g.__file__); print(b.__file__)",
        ],
        work,
        env,
    )
    assert code == 0, out
    fixtures, package, backends = out.split()
    for path in (package, backends, fixtures):  # the installed copy, not the repository (None would fail here too)
        assert "site-packages" in path and str(ROOT) not in path, out
    assert os.path.isfile(os.path.join(fixtures, "gpt2_124M_wpe_float32_le.bin"))


def test_wheel_installs_one_import_name(installed, tmp_path):
    """Nothing but gpt2_conformance (and its dist-info) at the top of site-packages: generic names
    such as `conformance` or `backends` would shadow, or be shadowed by, a user's own."""
    import zipfile

    python, work, env = installed
    wheel = next((pathlib.Path(python).parents[2] / "dist").glob("gpt2_conformance-*.whl"))
    top = {name.split("/")[0] for name in zipfile.ZipFile(wheel).namelist()}
    assert {t for t in top if not t.endswith(".dist-info")} == {"gpt2_conformance"}, top
    for generic in ("conformance", "backends"):
        code, out = _run([python, "-c", f"import {generic}"], work, env)
        assert code != 0 and "ModuleNotFoundError" in out, out


def test_installed_suite_passes_every_claimed_clause_for_numpy(installed):
    python, work, env = installed
    code, out = _run(
        [python, "-m", "gpt2_conformance.cli", "run", "--backend", "numpy", "--report-dir", "r"], work, env
    )
    assert code == 0, out
    report = json.loads((work / "r" / "gpt2-conformance-numpy-cpu.json").read_text())
    statuses = {c["id"]: c["status"] for c in report["clauses"]}
    assert {s for s in statuses.values()} <= {"PASS", "NOT CLAIMED"}, out
    assert all(statuses[c] == "PASS" for c in statuses if c.startswith("GOLDEN-")), out
    assert str(ROOT) not in report["environment"]["golden_data"]


def test_installed_suite_builds_and_judges_a_reference_client(installed):
    """The wire protocol's schema and clients ship in the wheel: an installed suite copies the C
    client out, builds it with the system's cc and judges it with run --exec."""
    python, work, env = installed
    code, out = _run([python, "-m", "gpt2_conformance.cli", "wire", "schema"], work, env)
    assert code == 0 and '"title": "gpt2-conformance wire protocol, version 1"' in out, out
    if shutil.which("cc") is None:
        pytest.skip("cc is not on PATH: the C client cannot be built here")
    code, out = _run([python, "-m", "gpt2_conformance.cli", "wire", "build", "c", "--out-dir", "client"], work, env)
    assert code == 0, out
    case = "test_bounds.py::test_error_names_value_and_rule[token-high]"
    code, out = _run(
        [python, "-m", "gpt2_conformance.cli", "run", "--exec", "client/gpt2_wire", "--case", case], work, env
    )
    assert code == 0 and "BOUNDS-MESSAGE             PASS" in out, out


def test_installed_pytest_entry_point_runs_a_users_adapter(installed):
    python, work, env = installed
    (work / "my_gpt2_adapter.py").write_text(USER_ADAPTER)
    code, out = _run(
        [
            python,
            "-m",
            "pytest",
            "--pyargs",
            "gpt2_conformance.suite",
            "--gpt2c-adapter",
            "my_gpt2_adapter:MyAdapter",
            "-q",
            "-p",
            "no:cacheprovider",
        ],
        work,
        dict(env, PYTHONPATH=str(work)),
    )
    assert code == 0, out[-3000:]
    assert " passed" in out and "failed" not in out.splitlines()[-1], out[-2000:]


def test_unreachable_golden_data_is_the_suites_error_not_the_adapters(installed):
    python, work, env = installed
    empty = work / "no-fixtures"
    empty.mkdir()
    code, out = _run(
        [python, "-m", "gpt2_conformance.cli", "run", "--backend", "numpy", "--report-dir", "r2"],
        work,
        dict(env, GPT2C_FIXTURES=str(empty)),
    )
    assert code == 4, out  # suite error, not a failure (1) and not a pass (0)
    report = json.loads((work / "r2" / "gpt2-conformance-numpy-cpu.json").read_text())
    golden = {c["id"]: c for c in report["clauses"] if c["group"] == "GOLDEN"}
    assert all(c["status"] == "ERROR" and "suite" in c["message"] for c in golden.values()), golden
    assert report["summary"]["FAIL"] == 0 and report["summary"]["PASS"] >= 30
    assert "GOLDEN fixtures not found" in golden["GOLDEN-H"]["message"]


# -- a neighbour's project: the suite installed beside it breaks nothing -------------------------

NEIGHBOUR_CONFTEST = """
def pytest_addoption(parser):  # options found in a great many ML repositories
    parser.addoption("--device", default="cpu")
    parser.addoption("--backend", default="local")
    parser.addoption("--checkpoint", default="none")
"""
NEIGHBOUR_TEST = """
import backends
import conformance


def test_own_options_and_packages(request):
    assert request.config.getoption("--device") == "cpu"
    assert request.config.getoption("--backend") == "local"
    assert request.config.getoption("--checkpoint") == "none"
    assert backends.KIND == "storage" and conformance.KIND == "theirs"
"""


@pytest.fixture(scope="module")
def neighbour(installed):
    """A user's project with its own --device/--backend/--checkpoint options and its own
    top-level `backends` and `conformance` packages, the wheel installed in the same venv."""
    python, work, env = installed
    project = work.parent / "neighbour"
    for package, kind in (("backends", "storage"), ("conformance", "theirs")):
        (project / package).mkdir(parents=True)
        (project / package / "__init__.py").write_text(f"KIND = {kind!r}\n")
    (project / "conftest.py").write_text(NEIGHBOUR_CONFTEST)
    (project / "tests").mkdir()
    (project / "tests" / "test_own.py").write_text(NEIGHBOUR_TEST)
    (project / "my_gpt2_adapter.py").write_text(USER_ADAPTER)
    return python, project, dict(env, PYTHONPATH=str(project))


def test_neighbours_own_pytest_still_passes(neighbour):
    python, project, env = neighbour
    code, out = _run([python, "-m", "pytest", "-q", "-p", "no:cacheprovider", "tests"], project, env)
    assert code == 0 and "1 passed" in out, out[-3000:]


def test_suite_runs_from_the_neighbours_root(neighbour):
    python, project, env = neighbour
    cli = str(pathlib.Path(python).parent / "gpt2-conformance")
    code, out = _run([cli, "run", "--backend", "numpy", "--report-dir", "r"], project, env)
    assert code == 0 and "0 failed" in out and "suite error" not in out, out[-3000:]
    code, out = _run(
        [
            python,
            "-m",
            "pytest",
            "--pyargs",
            "gpt2_conformance.suite",
            "--gpt2c-backend",
            "numpy",
            "--gpt2c-device",
            "cpu",
            "-q",
            "-p",
            "no:cacheprovider",
        ],
        project,
        env,
    )
    assert code == 0 and "failed" not in out.splitlines()[-1], out[-3000:]
    code, out = _run(
        [
            python,
            "-m",
            "pytest",
            "--pyargs",
            "gpt2_conformance.suite",
            "--gpt2c-adapter",
            "my_gpt2_adapter:MyAdapter",
            "-q",
            "-p",
            "no:cacheprovider",
            "-k",
            "LOOKUP or lookup",
        ],
        project,
        env,
    )
    assert code == 0, out[-3000:]


def test_plugin_imports_nothing_in_a_foreign_pytest_run(neighbour):
    """Loaded into every pytest session of the environment, the entry point imports no module of
    the suite's beyond itself (and so no numpy, hypothesis or framework on its account)."""
    python, project, env = neighbour
    probe = (
        "import sys, pytest\n"
        "class P:\n"
        "    def pytest_collection_finish(self, session):\n"
        "        print('LOADED', sorted(m for m in sys.modules if m.startswith('gpt2_conformance')))\n"
        "sys.exit(pytest.main(['-q', '-p', 'no:cacheprovider', 'tests', '-s'], plugins=[P()]))\n"
    )
    code, out = _run([python, "-c", probe], project, env)
    assert code == 0, out[-3000:]
    assert "LOADED ['gpt2_conformance', 'gpt2_conformance.pytest_plugin']" in out, out[-3000:]
