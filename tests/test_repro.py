"""A FAIL's one-line replay: the JSON report gives each failed test the `run --case` command
that replays it alone, with the same draws, and that command fails the same way."""

import json
import os
import shlex
import subprocess
import sys

import pytest

TESTS_DIR = os.path.dirname(__file__)
pytestmark = pytest.mark.slow  # two suite children

CASE = "test_bounds.py::test_error_names_value_and_rule[token-negative]"
MUTANT = "helpers.mutants:NegativeIdsWrap"


def _run(args, report_dir):
    env = os.environ | {"PYTHONPATH": os.pathsep.join(filter(None, [TESTS_DIR, os.environ.get("PYTHONPATH")]))}
    return subprocess.run(
        [sys.executable, "-m", "gpt2_conformance.cli", "run", *args, "--report-dir", str(report_dir)],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )


def _failed_tests(report_dir):
    (path,) = [p for p in report_dir.iterdir() if p.suffix == ".json"]
    report = json.loads(path.read_text())
    return report, [t for c in report["clauses"] for t in c["tests"] if t["status"] == "FAIL"]


def test_a_failed_test_replays_alone_from_its_repro_line(tmp_path):
    first = _run(
        ["--adapter", MUTANT, "--case", CASE, "--case", "test_bounds.py::test_malformed_ids_raise[rank1]"],
        tmp_path / "first",
    )
    assert first.returncode == 1, first.stdout + first.stderr
    report, failed = _failed_tests(tmp_path / "first")
    assert len(failed) == 1 and failed[0]["nodeid"].endswith(CASE), failed  # nodeids are relative to pytest's rootdir
    repro = failed[0]["repro"]
    assert repro == f"gpt2-conformance run --adapter {MUTANT} --case '{CASE}'"
    statuses = {c["id"]: c["status"] for c in report["clauses"]}
    assert statuses["BOUNDS-MESSAGE"] == "FAIL" and statuses["BOUNDS-INPUT"] == "PASS"
    assert statuses["LOOKUP-EXACT"] == "SKIPPED"  # not selected: not a suite error, not a pass
    replay = _run(shlex.split(repro)[2:], tmp_path / "replay")
    assert replay.returncode == 1, replay.stdout + replay.stderr
    _, again = _failed_tests(tmp_path / "replay")
    assert [(t["nodeid"], t["message"]) for t in again] == [(failed[0]["nodeid"], failed[0]["message"])]
    assert failed[0]["message"].endswith("[embed(ids=int64[1, 3] in [-1, 7], past_length=0)]")


def test_an_unknown_case_is_a_usage_error(tmp_path):
    out = _run(["--backend", "numpy", "--case", "test_bounds.py::no_such_test"], tmp_path)
    assert out.returncode == 2 and "test_bounds.py has no test 'no_such_test'" in out.stderr, out.stderr
    # parameters the command line cannot check without collecting the suite: the child refuses them
    out = _run(["--backend", "numpy", "--case", "test_bounds.py::test_too_long_raises[no-such-case]"], tmp_path)
    assert out.returncode == 2 and "names no test of the suite; did you mean" in out.stderr, out.stderr
