"""A suite child forks a worker for its tests and a new one after each crash
(conformance/run/forking.py): the crashed test FAILs with the reason the parent gives, the tests
after it run in the same child, and a child with more than one thread never forks."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

TESTS = textwrap.dedent("""
    import ctypes, pytest

    @pytest.mark.clause("SHAPE-H")
    def test_a_before():
        pass

    @pytest.mark.clause("TIED-STORAGE")
    def test_b_crashes():
        ctypes.string_at(0)  # a read of address 0: SIGSEGV

    @pytest.mark.clause("SHAPE-H")
    def test_c_after():
        pass

    @pytest.mark.clause("TIED-STORAGE")
    def test_d_crashes_too():
        ctypes.string_at(0)

    @pytest.mark.clause("SHAPE-H")
    def test_e_fails():
        assert False
""")
# as a verdict child gets them when it shares the machine (api/machine.py thread_pools_for): one
# BLAS thread, so importing numpy starts no pool (OpenBLAS otherwise starts one per core at load)
ONE_THREAD_POOLS = {"OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
THREAD = "import threading, time\nthreading.Thread(target=time.sleep, args=(600,), daemon=True).start()\n"


def _child(tmp_path, conftest: str = ""):
    (tmp_path / "test_crashing.py").write_text(TESTS)
    (tmp_path / "conftest.py").write_text(  # what the suite's plugin does: a clause per test, in its report
        "import pytest\n"
        "def pytest_configure(config):\n"
        "    config.addinivalue_line('markers', 'clause(id): the clause a test checks')\n"
        "@pytest.fixture(autouse=True)\n"
        "def _clause(request):\n"
        "    request.node.user_properties.append(('gpt2c_clause', request.node.get_closest_marker('clause').args[0]))\n"
        + conftest
    )
    events = tmp_path / "events.jsonl"
    child = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "-p",
            "no:randomly",
            "-p",
            "gpt2_conformance.run.events",
            "-p",
            "gpt2_conformance.run.forking",
            "--gpt2c-results",
            str(events),
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
        env={**os.environ, **ONE_THREAD_POOLS},
    )
    lines = [json.loads(line) for line in events.read_text().splitlines()]
    return child, {e["nodeid"].split("::")[-1]: e for e in lines if e["event"] == "result"}, lines


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the child forks on Linux only")
def test_each_crash_costs_its_test_and_the_child_runs_the_rest(tmp_path):
    child, results, _ = _child(tmp_path)
    assert child.returncode == 1, child.stdout + child.stderr  # pytest's status: tests failed, not a death
    assert child.stdout.count("the worker died in") == 2, child.stdout
    assert {name: r["outcome"] for name, r in results.items()} == {
        "test_a_before": "passed",
        "test_b_crashes": "failed",
        "test_c_after": "passed",
        "test_d_crashes_too": "failed",
        "test_e_fails": "failed",
    }
    for name in ("test_b_crashes", "test_d_crashes_too"):
        assert results[name]["message"] == "crashed: the test process died (killed by signal SIGSEGV) during this test"
        assert results[name]["clause"] == "TIED-STORAGE"


def test_a_child_with_another_thread_does_not_fork(tmp_path):
    """A thread started at import (a framework's pool): no fork; the crash ends the child, as it
    did before this module, and the parent's restart loop (run/runner.py) takes over."""
    child, results, lines = _child(tmp_path, conftest=THREAD)
    assert child.returncode == -11, child.stdout + child.stderr  # SIGSEGV: the child itself died
    assert "the worker died" not in child.stdout
    assert list(results) == ["test_a_before"] and lines[-1] == {
        "event": "start",
        "nodeid": "test_crashing.py::test_b_crashes",
    }


def test_only_thread_sees_other_threads():
    probe = "from gpt2_conformance.run import forking; print(forking.only_thread())"
    env = {**os.environ, **ONE_THREAD_POOLS}
    alone = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env)
    busy = subprocess.run([sys.executable, "-c", THREAD + probe], capture_output=True, text=True, env=env)
    expected = sys.platform.startswith("linux")
    assert alone.stdout.strip() == str(expected) and busy.stdout.strip() == "False", (alone, busy)
