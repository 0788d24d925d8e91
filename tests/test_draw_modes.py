"""The draw modes (SPEC.md "Draw modes"): the default is derandomized, the thorough mode draws
THOROUGH_FACTOR times the examples from a seed that is printed, stored and replayable."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gpt2_conformance import spec
from gpt2_conformance.runtime import strategies

TESTS_DIR = os.path.dirname(__file__)


@contextlib.contextmanager
def _mode(**fields):
    """strategies.MODE with `fields` set, put back after."""
    saved = {name: getattr(strategies.MODE, name) for name in fields}
    for name, value in fields.items():
        setattr(strategies.MODE, name, value)
    try:
        yield
    finally:
        for name, value in saved.items():
            setattr(strategies.MODE, name, value)


def _drawn(thorough: bool, seed: int | None) -> list[int]:
    """The values one drawn test sees under a mode."""
    seen = []
    with _mode(thorough=thorough, seed=seed):

        @strategies.suite_settings(max_examples=5)
        @given(st.integers(0, 10**9))
        def test(x):
            seen.append(x)

        test()
    return seen


def test_default_draws_are_the_same_every_time():
    assert _drawn(False, None) == _drawn(False, None)


def test_thorough_draws_more_and_a_seed_replays_them():
    first, again, other = _drawn(True, 7), _drawn(True, 7), _drawn(True, 8)
    assert len(first) > len(_drawn(False, None))  # THOROUGH_FACTOR x the examples
    assert first == again
    assert first != other


def test_cli_seed_without_thorough_is_a_usage_error():
    out = subprocess.run(
        [sys.executable, "-m", "gpt2_conformance.cli", "run", "--backend", "numpy", "--seed", "3"],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 2 and "--seed replays a thorough run" in out.stderr, out.stderr


def test_spec_says_what_each_mode_draws():
    text = spec.markdown()
    assert "## Draw modes" in text and f"{spec.THOROUGH_FACTOR} times the examples" in text


def test_thorough_run_stores_and_prints_its_seed(tmp_path):
    """A thorough run on one small clause set: the seed is on the console and in the JSON."""
    out = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; from gpt2_conformance import cli; from gpt2_conformance.run import runner\n"
            "real = runner.run_backend\n"
            "runner.run_backend = lambda *a, **kw: real(*a, **dict(kw, extra_args=[*kw['extra_args'], "
            "'-k', 'test_exact_sum and not layout']))\n"
            "sys.exit(cli.main(sys.argv[1:]))",
            "run",
            "--backend",
            "numpy",
            "--thorough",
            "--seed",
            "1234",
            "--report-dir",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
    )
    assert "seed 1234; replay with --thorough --seed 1234" in out.stdout, out.stdout + out.stderr
    report = json.loads((tmp_path / "gpt2-conformance-numpy-cpu.json").read_text())
    assert report["environment"]["draws"] == {
        "mode": "thorough",
        "examples_factor": spec.THOROUGH_FACTOR,
        "seed": 1234,
        "replay": "--thorough --seed 1234",
        "shrink": True,
    }
    exact = next(c for c in report["clauses"] if c["id"] == "LOOKUP-EXACT")
    assert exact["status"] == "PASS", exact


def _first_failure(shrink: bool) -> int:
    """The example a failing drawn test reports, with or without the shrink phase."""
    reported = []
    with _mode(shrink=shrink):

        @strategies.suite_settings(max_examples=50)
        @given(st.integers(0, 10**9))
        def test(x):
            reported.append(x)
            assert x < 1000

        with pytest.raises(AssertionError):
            test()
    return reported[-1]  # hypothesis replays the example it reports last


def test_no_shrink_reports_the_first_failing_example_and_still_fails():
    """--gpt2c-no-shrink: the test fails all the same, on the example first drawn, not the minimal one."""
    assert _first_failure(shrink=True) == 1000
    unshrunk = _first_failure(shrink=False)
    assert unshrunk > 1000, unshrunk


def test_no_shrink_run_is_stored_and_replayed(tmp_path):
    """`run --no-shrink`: the same FAIL, the report stores the mode, the repro line keeps it."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [TESTS_DIR, os.environ.get("PYTHONPATH")])))
    case = "test_positions.py::test_offset_positions"
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "gpt2_conformance.cli",
            "run",
            "--adapter",
            "helpers.mutants:OffsetTwice",
            "--no-shrink",
            "--case",
            case,
            "--report-dir",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert out.returncode == 1, out.stdout + out.stderr
    (path,) = tmp_path.glob("*.json")
    report = json.loads(path.read_text())
    assert report["environment"]["draws"] == {"mode": "default", "derandomized": True, "shrink": False}
    clause = next(c for c in report["clauses"] if c["id"] == "POSITIONS-OFFSET")
    assert clause["status"] == "FAIL", clause
    (test,) = clause["tests"]
    assert (
        test["repro"] == f"gpt2-conformance run --adapter helpers.mutants:OffsetTwice --no-shrink --case {case}"
    )  # shlex.quote leaves it bare


class _Config:
    """What the suite's hooks read of a pytest config: the waivers and --gpt2c-first-drawn."""

    def __init__(self, waived=(), first_drawn=()):
        self._gpt2c_waivers = {clause: object() for clause in waived}
        self.first_drawn = list(first_drawn)

    def getoption(self, name, default=None):
        return self.first_drawn if name == "--gpt2c-first-drawn" else default


def _reported_by_the_hook(config) -> tuple[int, tuple]:
    """(the example a failing drawn test of clause C reports when called inside the suite's
    pytest_runtest_call hook, its settings' phases after the call)."""
    from types import SimpleNamespace

    from gpt2_conformance.runtime import hooks

    reported = []

    @strategies.suite_settings(max_examples=50)
    @given(st.integers(0, 10**9))
    def test(x):
        reported.append(x)
        assert x < 1000

    item = SimpleNamespace(obj=test, config=config, get_closest_marker=lambda name: SimpleNamespace(args=("C",)))
    call = hooks.pytest_runtest_call(item)
    next(call)
    with pytest.raises(AssertionError):
        test()
    with contextlib.suppress(StopIteration):
        next(call)
    return reported[-1], test._hypothesis_internal_use_settings.phases


def test_a_waived_clauses_failing_example_is_reported_as_first_drawn():
    """A waived clause (a waiver of the pytest route, or --gpt2c-first-drawn as the CLI passes
    each waived clause) skips the shrink phase for that test's call only; any other clause shrinks."""
    from hypothesis import Phase

    shrunk, phases = _reported_by_the_hook(_Config())
    assert shrunk == 1000 and Phase.shrink in phases
    for config in (_Config(waived=["C"]), _Config(first_drawn=["C"])):
        first, phases = _reported_by_the_hook(config)
        assert first > 1000, first
        assert Phase.shrink in phases  # put back after the call


def test_run_passes_its_waived_clauses_as_first_drawn(tmp_path):
    """`run` with a waiver: the clause is waived as before and the report lists it as first drawn;
    the --case replay exits 0 (it runs in one child: on two cores the shard without the test
    errored and failed the replay)."""
    waivers = tmp_path / "waivers.toml"
    waivers.write_text('[[waiver]]\nclause = "POSITIONS-OFFSET"\nreason = "a test"\nlink = "https://example.org/1"\n')
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [TESTS_DIR, os.environ.get("PYTHONPATH")])))
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "gpt2_conformance.cli",
            "run",
            "--adapter",
            "helpers.mutants:OffsetTwice",
            "--waivers",
            str(waivers),
            "--case",
            "test_positions.py::test_offset_positions",
            "--report-dir",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    (path,) = tmp_path.glob("*.json")
    report = json.loads(path.read_text())
    assert report["environment"]["draws"]["first_drawn"] == ["POSITIONS-OFFSET"], report["environment"]["draws"]
    clause = next(c for c in report["clauses"] if c["id"] == "POSITIONS-OFFSET")
    assert clause["status"] == "DEVIATION (WAIVED)", clause
